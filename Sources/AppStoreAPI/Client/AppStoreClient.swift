import APITransport
import BillingCore
import Foundation
import Logging

/// Calls the App Store Server API: an ES256 token per Apple's rules (reused until shortly before
/// it expires), retries with jittered backoff on network errors, 429 (honouring `Retry-After`)
/// and 5xx, the shared token bucket with interactive calls first, and every signed answer
/// verified by the ledger's `AppStoreVerifier` before a caller sees it.
public final class AppStoreClient: Sendable {
    public let configuration: AppStoreClientConfiguration
    public let rateLimiter: RequestRateLimiter
    /// Checks every signed answer; also the verifier for what else arrives from Apple.
    public let verifier: AppStoreVerifier
    private let transport: any HTTPTransport
    private let tokens: AppStoreTokenIssuer
    private let logger: Logger
    private let sleep: @Sendable (Duration) async throws -> Void
    private let random: @Sendable () -> Double

    /// - Parameters:
    ///   - verifier: checks every signed answer (chain to a configured root, bundle, environment).
    ///   - now: Unix seconds for the token's `iat` and `exp`.
    public init(
        configuration: AppStoreClientConfiguration,
        verifier: AppStoreVerifier,
        transport: any HTTPTransport = CurlTransport(maxConnections: 8),
        logger: Logger = Logger(label: "billingd.appstore.api"),
        rateLimiter: RequestRateLimiter? = nil,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.configuration = configuration
        self.verifier = verifier
        self.transport = transport
        self.logger = logger
        self.rateLimiter = rateLimiter ?? RequestRateLimiter(requestsPerSecond: configuration.requestsPerSecond)
        self.tokens = AppStoreTokenIssuer(configuration: configuration, now: now)
        self.sleep = sleep
        self.random = random
    }

    /// Sends one call, retrying what can be retried, and returns the 2xx body.
    /// - Parameters:
    ///   - path: with its ids, e.g. `/inApps/v1/transactions/2000000123456789`.
    ///   - route: the same with ids replaced, for logs and errors.
    ///   - query: already encoded, without `?`.
    package func send(
        _ method: HTTPTransportMethod, path: String, route: String, query: String = "", json body: [UInt8] = [],
        priority: RequestPriority
    ) async throws(AppStoreAPIError) -> [UInt8] {
        try await exchange(method, path: path, route: route, query: query, json: body, priority: priority).body
    }

    /// ``send(_:path:route:query:json:priority:)``, answering the 2xx status with the body.
    package func exchange(
        _ method: HTTPTransportMethod, path: String, route: String, query: String = "", json body: [UInt8] = [],
        priority: RequestPriority
    ) async throws(AppStoreAPIError) -> (status: Int, body: [UInt8]) {
        let url = String(configuration.trimmedBaseURL) + path + (query.isEmpty ? "" : "?\(query)")
        let maxAttempts = 1 + configuration.maxRetries
        var attempt = 0
        var refreshedToken = false
        while true {
            attempt += 1
            do {
                _ = try await rateLimiter.acquire(priority)
            } catch {
                throw AppStoreAPIError(kind: .cancelled, message: "the calling task was cancelled", route: route, attempts: attempt - 1)
            }
            let token: String
            do {
                token = try await tokens.token()
            } catch {
                throw AppStoreAPIError(kind: .signing, message: "could not sign a token with the App Store key", route: route, attempts: attempt)
            }
            var headers: [(name: String, value: String)] = [
                ("Authorization", "Bearer \(token)"), ("Accept", "application/json"), ("User-Agent", configuration.userAgent),
            ]
            if method == .post || method == .put { headers.append(("Content-Type", "application/json")) }
            let request = HTTPTransportRequest(
                method: method, url: url, headers: headers, body: body, connectTimeout: configuration.connectTimeout,
                timeout: configuration.requestTimeout)

            let started = ContinuousClock.now
            let outcome: Result<HTTPTransportResponse, HTTPTransportError>
            do {
                outcome = .success(try await transport.perform(request))
            } catch {
                outcome = .failure(error)
            }
            log(method, route: route, attempt: attempt, outcome: outcome, duration: started.duration(to: .now))

            let failure: AppStoreAPIError
            var retryAfter: Duration?
            var retry = false
            switch outcome {
            case .success(let answer) where (200..<300).contains(answer.status):
                return (answer.status, answer.body)
            case .success(let answer):
                let (code, message) = AppStoreAPIError.Body.read(answer)
                retryAfter = answer.headers["retry-after"].flatMap(RetryBackoff.retryAfter)
                let kind: AppStoreAPIError.Kind
                switch answer.status {
                case 401: kind = .authentication
                case 404: kind = .notFound
                case 429: kind = .rateLimited; retry = true
                case 500...: kind = .server; retry = true
                default: kind = .invalidRequest
                }
                // A refused token may only be stale (a clock step, a rotated key): one fresh try.
                if answer.status == 401, !refreshedToken {
                    refreshedToken = true
                    await tokens.discard()
                    retry = true
                }
                failure = AppStoreAPIError(kind: kind, status: answer.status, errorCode: code, message: message, route: route, attempts: attempt)
            case .failure(let error):
                retry = error.isRetryable
                failure = AppStoreAPIError(kind: .transport, message: error.description, route: route, attempts: attempt)
            }
            if Task.isCancelled {
                throw failure.kind == .transport
                    ? AppStoreAPIError(kind: .cancelled, message: "the calling task was cancelled", route: route, attempts: attempt) : failure
            }
            guard retry, attempt < maxAttempts else { throw failure }
            let delay = RetryBackoff.delay(
                attempt: attempt, retryAfter: retryAfter, base: configuration.retryBaseDelay, cap: configuration.maxRetryDelay,
                random: random())
            logger.debug(
                "appstore retry",
                metadata: [
                    "appstore.route": "\(route)", "appstore.attempt": "\(attempt)", "appstore.reason": "\(failure.status.map { "HTTP \($0)" } ?? failure.message)",
                    "appstore.delay_ms": "\(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)",
                ])
            do {
                try await sleep(delay)
            } catch {
                throw AppStoreAPIError(kind: .cancelled, message: "the calling task was cancelled", route: route, attempts: attempt)
            }
        }
    }

    /// One debug line per attempt: route and status, never the token or the ids in the path.
    private func log(
        _ method: HTTPTransportMethod, route: String, attempt: Int, outcome: Result<HTTPTransportResponse, HTTPTransportError>,
        duration: Duration
    ) {
        guard logger.logLevel <= .debug else { return }
        var metadata: Logger.Metadata = [
            "appstore.method": "\(method.rawValue)", "appstore.route": "\(route)", "appstore.attempt": "\(attempt)",
            "appstore.duration_ms": "\(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)",
        ]
        switch outcome {
        case .success(let answer): metadata["appstore.status"] = "\(answer.status)"
        case .failure(let error): metadata["appstore.error"] = "\(error.description)"
        }
        logger.debug("appstore request", metadata: metadata)
    }

    /// Decodes a 2xx body into one of Apple's documented shapes.
    func decode<T: Decodable>(_ type: T.Type, _ body: [UInt8], route: String) throws(AppStoreAPIError) -> T {
        do {
            return try JSONDecoder().decode(type, fromUntrusted: body)
        } catch {
            throw AppStoreAPIError(kind: .decoding, message: "the answer is not a valid \(T.self)", route: route)
        }
    }

    /// A path segment as given, refusing what could change the path (order ids are letters and
    /// digits, tokens base64-ish): only ASCII letters, digits, `-`, `_` and `.`, and never only
    /// dots, which a URL resolves to the same or the parent path (`/lookup/..` is `/`).
    static func segment(_ id: String, route: String) throws(AppStoreAPIError) -> String {
        guard !id.isEmpty, id.count <= 128, id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }),
            !id.allSatisfy({ $0 == "." })
        else {
            throw AppStoreAPIError(kind: .invalidRequest, message: "\(quoted(id)) is not a valid identifier", route: route, attempts: 0)
        }
        return id
    }

    /// A transaction id as a path segment: decimal digits only (``AppStoreTransactionID``).
    static func transactionSegment(_ id: String, route: String) throws(AppStoreAPIError) -> String {
        guard AppStoreTransactionID.isWellFormed(id) else {
            throw AppStoreAPIError(
                kind: .invalidRequest,
                message: "\(quoted(id)) is not an App Store transaction id (1 to \(AppStoreTransactionID.maximumLength) digits); no request was made",
                route: route, attempts: 0)
        }
        return id
    }

    /// At most 40 characters of an identifier from outside, printable ASCII only, for a message.
    private static func quoted(_ id: String) -> String {
        "\"" + String(id.prefix(40).map { $0.isASCII && !$0.isWhitespace && $0.asciiValue.map { $0 >= 0x20 && $0 < 0x7f } == true ? $0 : "?" }) + "\""
    }
}
