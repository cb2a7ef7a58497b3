import HTTPTypes

/// A failure the fake answers with instead of (or before) the real answer, for testing a client's
/// retries, timeouts and error handling:
/// `fake.inject(.status(429, retryAfter: 1), times: 2, matching: .path("/v1/customers"))`.
public struct Fault: Sendable, CustomStringConvertible {
    enum Effect: Sendable {
        case status(Int, retryAfter: Int?, shouldRetry: Bool?)
        case delay(Duration)
        case delayAnswer(Duration)
        case dropConnection
        case expiredKey
    }

    let effect: Effect

    /// Answers with `code` and Stripe's error body for it (429 → `rate_limit`, 5xx → `api_error`, …).
    /// - Parameters:
    ///   - retryAfter: seconds, sent as `Retry-After`.
    ///   - shouldRetry: sent as `Stripe-Should-Retry: true|false` when set.
    public static func status(_ code: Int, retryAfter: Int? = nil, shouldRetry: Bool? = nil) -> Fault {
        Fault(effect: .status(code, retryAfter: retryAfter, shouldRetry: shouldRetry))
    }

    /// Waits this long, then answers normally.
    public static func delay(_ duration: Duration) -> Fault { Fault(effect: .delay(duration)) }

    /// Does the request at once, then waits this long before answering: the window in which a
    /// client that times out or dies has had its request done without hearing of it.
    public static func delayAnswer(_ duration: Duration) -> Fault { Fault(effect: .delayAnswer(duration)) }

    /// Closes the TCP connection without answering; the client sees a transport error.
    public static let dropConnection = Fault(effect: .dropConnection)

    /// Answers 401 with code `api_key_expired`, as Stripe does for a rolled key.
    public static let expiredKey = Fault(effect: .expiredKey)

    public var description: String {
        switch effect {
        case .status(let code, let retryAfter, let shouldRetry):
            "status(\(code)\(retryAfter.map { ", retryAfter: \($0)" } ?? "")\(shouldRetry.map { ", shouldRetry: \($0)" } ?? ""))"
        case .delay(let duration): "delay(\(duration))"
        case .delayAnswer(let duration): "delayAnswer(\(duration))"
        case .dropConnection: "dropConnection"
        case .expiredKey: "expiredKey"
        }
    }
}

/// Which requests a fault or a look at ``StripeFake/requests(matching:)`` applies to: a method
/// and a path prefix, either optional.
public struct RequestMatcher: Sendable, CustomStringConvertible {
    /// `GET`, `POST`, `DELETE`; nil for any.
    public var method: String?
    /// A prefix of the path (`/v1/customers` also takes `/v1/customers/cus_…`); nil for any.
    public var pathPrefix: String?

    public init(method: String? = nil, pathPrefix: String? = nil) {
        self.method = method?.uppercased()
        self.pathPrefix = pathPrefix
    }

    public static let any = RequestMatcher()

    public static func path(_ prefix: String, method: String? = nil) -> RequestMatcher {
        RequestMatcher(method: method, pathPrefix: prefix)
    }

    public static func method(_ method: String, path prefix: String? = nil) -> RequestMatcher {
        RequestMatcher(method: method, pathPrefix: prefix)
    }

    public func matches(method: String, path: String) -> Bool {
        (self.method == nil || self.method == method.uppercased()) && (pathPrefix.map { path.hasPrefix($0) } ?? true)
    }

    public var description: String { "\(method ?? "*") \(pathPrefix ?? "*")" }
}

/// A fault waiting for requests, with how many more times it fires.
struct ArmedFault: Sendable {
    let fault: Fault
    let matcher: RequestMatcher
    var remaining: Int
}

extension Fault {
    /// The error answer of a `.status` fault: Stripe's body for that status.
    static func error(status code: Int, retryAfter: Int?, shouldRetry: Bool?) -> StripeAPIError {
        var error: StripeAPIError
        switch code {
        case 429:
            error = StripeAPIError(
                status: .init(code: code), type: "invalid_request_error", code: "rate_limit",
                message:
                    "Request rate limit exceeded. You can learn more about rate limits here https://stripe.com/docs/rate-limits."
            )
        case 409:
            error = StripeAPIError(
                status: .init(code: code), type: "invalid_request_error", code: "lock_timeout",
                message:
                    "This object cannot be accessed right now because another API request or Stripe process is currently accessing it."
            )
        case 402:
            error = StripeAPIError(
                status: .init(code: code), type: "card_error", code: "card_declined", message: "Your card was declined."
            )
        case 500...:
            error = StripeAPIError(
                status: .init(code: code), type: "api_error",
                message:
                    "An unknown error occurred. Please try again later or contact support at https://support.stripe.com/."
            )
        default:
            error = StripeAPIError(
                status: .init(code: code), type: "invalid_request_error", message: "Injected fault: status \(code).")
        }
        if let retryAfter { error.headers[.retryAfter] = String(retryAfter) }
        if let shouldRetry { error.headers[.stripeShouldRetry] = shouldRetry ? "true" : "false" }
        return error
    }
}
