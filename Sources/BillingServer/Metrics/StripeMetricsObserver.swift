import APITransport
import StripeAPI

/// Stripe API calls as metrics: requests by route template, method and status (or `error` for
/// a transport failure) with latency, retries by reason, and time spent waiting for the rate limit.
public struct StripeMetricsObserver: StripeClientObserver {
    let metrics: BillingMetrics

    public init(metrics: BillingMetrics) {
        self.metrics = metrics
    }

    public func stripeRequest(method: HTTPTransportMethod, route: String, status: Int?, attempt: Int, duration: Duration) {
        let dimensions = [("route", route), ("method", method.rawValue), ("status", status.map(String.init) ?? "error")]
        metrics.count("billingd_stripe_requests_total", dimensions: dimensions)
        metrics.time("billingd_stripe_request_seconds", duration, dimensions: [("route", route), ("method", method.rawValue)])
    }

    public func stripeRetry(method: HTTPTransportMethod, route: String, reason: String, delay: Duration) {
        metrics.count("billingd_stripe_retries_total", dimensions: [("route", route), ("reason", reason)])
    }

    public func stripeRateLimitWait(priority: RequestPriority, waited: Duration) {
        metrics.time("billingd_stripe_rate_limit_wait_seconds", waited, dimensions: [("priority", "\(priority)")])
    }
}
