import BillingCore
import Crypto

/// How an `AppStoreClient` talks to the App Store Server API: the In-App Purchase key, the app,
/// the environment's base URL, time limits, retries and rate.
public struct AppStoreClientConfiguration: Sendable {
    /// The issuer id from App Store Connect → Users and Access → Integrations → In-App Purchase.
    public var issuerID: String
    /// The key's id (the `kid` of every token).
    public var keyID: String
    /// The `.p8` key; it signs tokens and is never logged or put into an error.
    public var privateKey: P256.Signing.PrivateKey
    /// The app's bundle id (the `bid` claim).
    public var bundleID: String
    /// Production or Sandbox: picks the base URL, and every signed answer must be from it.
    public var environment: AppStoreEnvironment
    /// Apple's base URL for the environment, or a fake's address; a trailing slash is allowed.
    public var baseURL: String
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
    /// How long one token is valid; Apple refuses more than 60 minutes.
    public var tokenLifetime: Duration
    public var userAgent: String

    /// Apple's base URL of the App Store Server API for an environment.
    public static func appleBaseURL(_ environment: AppStoreEnvironment) -> String {
        environment == .production ? "https://api.storekit.apple.com" : "https://api.storekit-sandbox.apple.com"
    }

    /// - Parameters:
    ///   - baseURL: nil for Apple's address for `environment`.
    ///   - requestsPerSecond: Apple's limits are per endpoint and per hour (the lowest, Get
    ///     Notification History, allows about 1 a second sustained); 20 a second stays well inside
    ///     them for the calls reconcile makes, and a 429 is waited out either way.
    public init(
        issuerID: String, keyID: String, privateKey: P256.Signing.PrivateKey, bundleID: String,
        environment: AppStoreEnvironment, baseURL: String? = nil, connectTimeout: Duration = .seconds(10),
        requestTimeout: Duration = .seconds(30), maxRetries: Int = 4, requestsPerSecond: Double = 20,
        maxRetryDelay: Duration = .seconds(60), retryBaseDelay: Duration = .milliseconds(500),
        tokenLifetime: Duration = .seconds(300), userAgent: String = "billingd/1 (+libcurl)"
    ) {
        self.issuerID = issuerID
        self.keyID = keyID
        self.privateKey = privateKey
        self.bundleID = bundleID
        self.environment = environment
        self.baseURL = baseURL ?? Self.appleBaseURL(environment)
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maxRetries = max(0, maxRetries)
        self.requestsPerSecond = requestsPerSecond
        self.maxRetryDelay = maxRetryDelay
        self.retryBaseDelay = retryBaseDelay
        self.tokenLifetime = min(max(tokenLifetime, .seconds(60)), .seconds(3600))
        self.userAgent = userAgent
    }

    /// The base URL without a trailing slash.
    var trimmedBaseURL: Substring {
        var base = Substring(baseURL)
        while base.hasSuffix("/") { base = base.dropLast() }
        return base
    }
}
