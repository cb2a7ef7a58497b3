import APITransport

/// Receives timings and retry decisions, e.g. to export metrics. Called inline: keep it cheap.
public protocol StripeClientObserver: Sendable {
    /// Called once per attempt. `route` is a template with ids replaced, e.g. `/v1/customers/{id}`;
    /// `status` is nil when no HTTP answer came back.
    func stripeRequest(method: HTTPTransportMethod, route: String, status: Int?, attempt: Int, duration: Duration)
    /// Called before waiting `delay` to try again.
    func stripeRetry(method: HTTPTransportMethod, route: String, reason: String, delay: Duration)
    /// Called when a request had to wait for the rate limiter (not when a token was free).
    func stripeRateLimitWait(priority: RequestPriority, waited: Duration)
}
