import APITransport
import Foundation
import Logging

/// Calls Stripe's REST API: authentication, the pinned `Stripe-Version`, idempotency keys on every
/// POST, retries with capped exponential backoff and full jitter, a shared rate limit, and lazy
/// pagination. Errors come back typed as `StripeError`, never carrying the API key.
public final class StripeClient: Sendable {
    public let configuration: StripeClientConfiguration
    /// Shared by every call of this client; pass one in to share it between clients on one key.
    public let rateLimiter: RequestRateLimiter
    private let transport: any HTTPTransport
    private let logger: Logger
    private let observer: (any StripeClientObserver)?
    private let sleep: @Sendable (Duration) async throws -> Void
    private let random: @Sendable () -> Double

    /// - Parameters:
    ///   - rateLimiter: nil makes one at `configuration.requestsPerSecond`.
    ///   - sleep: waits between attempts; throws when the task is cancelled. Tests record instead.
    ///   - random: a number in 0..<1 for the jitter.
    public init(
        configuration: StripeClientConfiguration,
        transport: any HTTPTransport = CurlTransport(),
        logger: Logger = Logger(label: "billingd.stripe"),
        observer: (any StripeClientObserver)? = nil,
        rateLimiter: RequestRateLimiter? = nil,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.configuration = configuration
        self.transport = transport
        self.logger = logger
        self.observer = observer
        self.rateLimiter = rateLimiter ?? RequestRateLimiter(requestsPerSecond: configuration.requestsPerSecond)
        self.sleep = sleep
        self.random = random
    }

    /// Sends one call, retrying what can be retried, and returns the 2xx answer.
    ///
    /// GET and DELETE carry `parameters` in the query string, POST as a form body. Every POST has
    /// an `Idempotency-Key` (`idempotencyKey`, or a new UUID) that all its retries reuse; GET and
    /// DELETE send none.
    /// - Parameters:
    ///   - path: e.g. `/v1/customers/cus_123`; a query already in it is kept.
    ///   - account: a connected account (`acct_…`), sent as `Stripe-Account`.
    public func send(
        _ method: HTTPTransportMethod,
        _ path: String,
        parameters: StripeParameters = [:],
        account: String? = nil,
        idempotencyKey: String? = nil,
        priority: RequestPriority = .interactive
    ) async throws(StripeError) -> StripeResponse {
        var pathOnly = path
        var query = ""
        if let mark = path.firstIndex(of: "?") {
            pathOnly = String(path[..<mark])
            query = String(path[path.index(after: mark)...])
        }
        if !pathOnly.hasPrefix("/") { pathOnly = "/" + pathOnly }

        var body: [UInt8] = []
        let form = parameters.encoded()
        if method == .post {
            body = Array(form.utf8)
        } else if !form.isEmpty {
            query = query.isEmpty ? form : "\(query)&\(form)"
        }
        let url = String(configuration.trimmedBaseURL) + pathOnly + (query.isEmpty ? "" : "?\(query)")

        var headers: [(name: String, value: String)] = [
            ("Authorization", "Bearer \(configuration.apiKey)"),
            ("Stripe-Version", configuration.apiVersion),
            ("Accept", "application/json"),
            ("User-Agent", configuration.userAgent),
        ]
        var sentKey: String?
        if method == .post {
            let key = idempotencyKey.flatMap { $0.isEmpty ? nil : $0 } ?? UUID().uuidString.lowercased()
            sentKey = key
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
            headers.append(("Idempotency-Key", key))
        }
        if let account { headers.append(("Stripe-Account", account)) }

        let request = HTTPTransportRequest(
            method: method, url: url, headers: headers, body: body,
            connectTimeout: configuration.connectTimeout, timeout: configuration.requestTimeout
        )
        let call = Call(method: method, path: pathOnly, route: RouteTemplate.route(for: pathOnly), idempotencyKey: sentKey)
        return try await perform(request, call, priority: priority)
    }

    /// The pages of a list endpoint, fetched lazily; see `StripeListPages`.
    public func list(
        _ path: String,
        parameters: StripeParameters = [:],
        account: String? = nil,
        priority: RequestPriority = .bulk
    ) -> StripeListPages {
        StripeListPages(client: self, path: path, parameters: parameters, account: account, priority: priority)
    }

    /// What the retry loop needs to know about the call besides the request.
    private struct Call {
        let method: HTTPTransportMethod
        let path: String
        let route: String
        let idempotencyKey: String?
    }

    private func perform(
        _ request: HTTPTransportRequest, _ call: Call, priority: RequestPriority
    ) async throws(StripeError) -> StripeResponse {
        let maxAttempts = 1 + configuration.maxRetries
        var attempt = 0
        while true {
            attempt += 1
            let waited: Duration
            do {
                waited = try await rateLimiter.acquire(priority)
            } catch {
                throw cancelled(call, attempts: attempt - 1)
            }
            if waited > .zero { observer?.stripeRateLimitWait(priority: priority, waited: waited) }

            let started = ContinuousClock.now
            let outcome: Result<HTTPTransportResponse, HTTPTransportError>
            do {
                outcome = .success(try await transport.perform(request))
            } catch {
                outcome = .failure(error)
            }
            let duration = started.duration(to: .now)
            let status = try? outcome.get().status
            observer?.stripeRequest(method: call.method, route: call.route, status: status, attempt: attempt, duration: duration)
            log(call, attempt: attempt, outcome: outcome, duration: duration)

            let failure: StripeError
            let decision: RetryPolicy.Decision
            switch outcome {
            case .success(let answer) where (200..<300).contains(answer.status):
                return StripeResponse(
                    status: answer.status, body: answer.body, headers: answer.headers, idempotencyKey: call.idempotencyKey,
                    method: call.method, path: call.path
                )
            case .success(let answer):
                let details = RetryPolicy.ErrorDetails(answer)
                decision = RetryPolicy.decide(status: answer.status, headers: answer.headers, details: details)
                failure = StripeError(
                    kind: RetryPolicy.kind(status: answer.status, type: details.type), status: answer.status,
                    type: details.type, code: details.code, param: details.param, declineCode: details.declineCode,
                    message: redacted(details.message), requestID: answer.headers["request-id"], method: call.method,
                    path: call.path, attempts: attempt, isRetryable: decision.isRetry
                )
            case .failure(let transportError):
                decision = transportError.isRetryable ? .retry(reason: transportError.description, after: nil) : .stop
                failure = StripeError(
                    kind: .transport, message: redacted(transportError.description), method: call.method, path: call.path,
                    attempts: attempt, isRetryable: transportError.isRetryable
                )
            }

            if Task.isCancelled {
                // A transport failure now is most likely the cancelled transfer itself; an HTTP
                // answer is real and says more than "cancelled".
                throw failure.kind == .transport ? cancelled(call, attempts: attempt) : failure
            }
            guard case .retry(let reason, let retryAfter) = decision, attempt < maxAttempts else { throw failure }
            let delay = RetryBackoff.delay(
                attempt: attempt, retryAfter: retryAfter, base: configuration.retryBaseDelay,
                cap: configuration.maxRetryDelay, random: random()
            )
            let why = redacted(reason)
            observer?.stripeRetry(method: call.method, route: call.route, reason: why, delay: delay)
            logger.debug(
                "stripe retry",
                metadata: [
                    "stripe.method": "\(call.method.rawValue)", "stripe.route": "\(call.route)", "stripe.attempt": "\(attempt)",
                    "stripe.reason": "\(why)", "stripe.delay_ms": "\(Self.milliseconds(delay))",
                ]
            )
            do {
                try await sleep(delay)
            } catch {
                throw cancelled(call, attempts: attempt)
            }
        }
    }

    /// One debug line per attempt; the query (customer data) and the key are never logged.
    private func log(
        _ call: Call, attempt: Int, outcome: Result<HTTPTransportResponse, HTTPTransportError>, duration: Duration
    ) {
        guard logger.logLevel <= .debug else { return }
        var metadata: Logger.Metadata = [
            "stripe.method": "\(call.method.rawValue)", "stripe.route": "\(call.route)", "stripe.attempt": "\(attempt)",
            "stripe.duration_ms": "\(Self.milliseconds(duration))",
        ]
        switch outcome {
        case .success(let answer):
            metadata["stripe.status"] = "\(answer.status)"
            if let requestID = answer.headers["request-id"] { metadata["stripe.request_id"] = "\(requestID)" }
        case .failure(let error):
            metadata["stripe.error"] = "\(redacted(error.description))"
        }
        logger.debug("stripe request", metadata: metadata)
    }

    private func cancelled(_ call: Call, attempts: Int) -> StripeError {
        StripeError(
            kind: .cancelled, message: "the calling task was cancelled", method: call.method, path: call.path,
            attempts: attempts, isRetryable: false
        )
    }

    /// Removes the API key, and anything else shaped like a secret or restricted key, from text
    /// that came from outside (answers, transport messages).
    private func redacted(_ text: String) -> String {
        var text = text
        let key = configuration.apiKey
        if !key.isEmpty, text.contains(key) {
            text = text.replacingOccurrences(of: key, with: "[redacted key]")
        }
        for prefix in ["sk_live_", "sk_test_", "rk_live_", "rk_test_"] {
            while let start = text.range(of: prefix) {
                let end = text[start.upperBound...].firstIndex { !($0.isASCII && ($0.isLetter || $0.isNumber)) } ?? text.endIndex
                text.replaceSubrange(start.lowerBound..<end, with: "[redacted key]")
            }
        }
        return text
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
