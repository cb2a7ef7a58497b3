/// How a `StripeClient` talks to Stripe: key, pinned API version, time limits, retries, rate.
public struct StripeClientConfiguration: Sendable {
    /// The secret or restricted key (`sk_…`, `rk_…`); sent only in the Authorization header.
    public var apiKey: String
    /// `https://api.stripe.com`, or a fake's address; a trailing slash is allowed.
    public var baseURL: String
    /// Sent as `Stripe-Version` on every call, so answers have the shape billingd decodes.
    public var apiVersion: String
    public var connectTimeout: Duration
    /// The limit for one whole attempt.
    public var requestTimeout: Duration
    /// Retries after the first attempt; attempts = 1 + maxRetries.
    public var maxRetries: Int
    /// Token-bucket rate shared by all callers of one client; the burst is max(1, rate).
    public var requestsPerSecond: Double
    /// The longest single wait between two attempts, Retry-After included.
    public var maxRetryDelay: Duration
    /// The first backoff ceiling; attempt n waits a random time up to `retryBaseDelay × 2^(n-1)`.
    public var retryBaseDelay: Duration
    public var userAgent: String

    /// - Parameter requestsPerSecond: nil picks 100 for live keys and 25 for test keys, Stripe's
    ///   documented limits.
    public init(
        apiKey: String,
        baseURL: String = "https://api.stripe.com",
        apiVersion: String,
        connectTimeout: Duration = .seconds(10),
        requestTimeout: Duration = .seconds(80),
        maxRetries: Int = 4,
        requestsPerSecond: Double? = nil,
        maxRetryDelay: Duration = .seconds(30),
        retryBaseDelay: Duration = .milliseconds(500),
        userAgent: String = "billingd/1 (+libcurl)"
    ) {
        self.apiKey = apiKey
        self.baseURL = baseURL
        self.apiVersion = apiVersion
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maxRetries = max(0, maxRetries)
        self.requestsPerSecond = requestsPerSecond ?? (Self.isLive(apiKey) ? 100 : 25)
        self.maxRetryDelay = maxRetryDelay
        self.retryBaseDelay = retryBaseDelay
        self.userAgent = userAgent
    }

    /// Whether the key is a live-mode secret or restricted key.
    public var isLiveKey: Bool { Self.isLive(apiKey) }

    private static func isLive(_ key: String) -> Bool {
        key.hasPrefix("sk_live_") || key.hasPrefix("rk_live_")
    }

    /// The base URL without a trailing slash.
    var trimmedBaseURL: Substring {
        var base = Substring(baseURL)
        while base.hasSuffix("/") { base = base.dropLast() }
        return base
    }
}
