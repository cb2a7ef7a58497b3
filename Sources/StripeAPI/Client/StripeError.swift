import APITransport

/// Why a Stripe call failed, after any retries: Stripe's own error fields when it answered, a
/// description of the transport failure when it did not. Never holds the API key.
public struct StripeError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Stripe refused for a reason in `type`/`code` (e.g. `card_error`), or an unexpected status.
        case api
        /// 401: the key is wrong, expired or revoked.
        case authentication
        /// 403: the key may not do this (restricted key, Connect permissions).
        case permission
        /// 429 after every retry.
        case rateLimited
        /// 404: no such object or route.
        case notFound
        /// 400 (or 402) `invalid_request_error`: the parameters are wrong.
        case invalidRequest
        /// `idempotency_error`: the key was reused with other parameters, or is still in use.
        case idempotency
        /// 5xx after every retry.
        case server
        /// No HTTP answer: timeout, refused connection, dropped connection, TLS failure.
        case transport
        /// A 2xx answer whose body is not what was expected.
        case decoding
        /// The caller's task was cancelled.
        case cancelled
    }

    public let kind: Kind
    /// The HTTP status when there was an answer.
    public let status: Int?
    /// Stripe's `error.type`: `api_error`, `card_error`, `idempotency_error`, `invalid_request_error`…
    public let type: String?
    /// Stripe's `error.code`, e.g. `resource_missing`, `lock_timeout`.
    public let code: String?
    public let param: String?
    /// Stripe's `error.decline_code` for card errors.
    public let declineCode: String?
    /// Stripe's `error.message`, or a description of what went wrong.
    public let message: String
    /// The `Request-Id` of the last answer.
    public let requestID: String?
    public let method: HTTPTransportMethod
    /// The request path without query.
    public let path: String
    /// Attempts made, retries included.
    public let attempts: Int
    /// Whether the same call may succeed later (rate limits, server errors, lost connections),
    /// as opposed to needing a change (bad parameters, wrong key).
    public let isRetryable: Bool

    public init(
        kind: Kind, status: Int? = nil, type: String? = nil, code: String? = nil, param: String? = nil,
        declineCode: String? = nil, message: String, requestID: String? = nil, method: HTTPTransportMethod, path: String,
        attempts: Int = 1, isRetryable: Bool? = nil
    ) {
        self.kind = kind
        self.status = status
        self.type = type
        self.code = code
        self.param = param
        self.declineCode = declineCode
        self.message = message
        self.requestID = requestID
        self.method = method
        self.path = path
        self.attempts = attempts
        self.isRetryable = isRetryable ?? [.rateLimited, .server, .transport].contains(kind)
    }

    /// One line, e.g. `POST /v1/customers: HTTP 400 invalid_request_error parameter_unknown
    /// (param: foo): Received unknown parameter: foo (request req_123)`.
    public var description: String {
        var text = "Stripe \(method.rawValue) \(path): "
        if let status { text += "HTTP \(status) " }
        switch kind {
        case .transport: text += "transport failure "
        case .decoding: text += "undecodable answer "
        case .cancelled: text += "cancelled "
        default: break
        }
        if let type { text += "\(type) " }
        if let code { text += "\(code) " }
        var details: [String] = []
        if let param { details.append("param: \(param)") }
        if let declineCode { details.append("decline: \(declineCode)") }
        if !details.isEmpty { text += "(\(details.joined(separator: ", "))) " }
        if text.hasSuffix(" ") { text.removeLast() }
        text += ": \(message)"
        if attempts > 1 { text += " [after \(attempts) attempts]" }
        if let requestID { text += " (request \(requestID))" }
        return text
    }

    /// A copy with another attempt count.
    func with(attempts: Int) -> StripeError {
        StripeError(
            kind: kind, status: status, type: type, code: code, param: param, declineCode: declineCode, message: message,
            requestID: requestID, method: method, path: path, attempts: attempts, isRetryable: isRetryable
        )
    }
}

// MARK: - What Stripe's answer means

extension StripeError {
    /// Stripe has no such object: a 404, or `resource_missing` (an object named by a parameter).
    public var isMissingResource: Bool {
        kind == .notFound || code == "resource_missing"
    }

    /// A meter event with this identifier was already accepted, Stripe's proof that an earlier
    /// attempt got through. The v2 API answers `duplicate_meter_event`; v1 answers a 400 with no
    /// code whose message says so, the one answer whose text has to be read.
    public var isDuplicateMeterEvent: Bool {
        status == 400 && (code == "duplicate_meter_event" || message.contains("already exists with identifier"))
    }

    /// A meter event's timestamp is outside the window Stripe accepts (too old or ahead of its clock).
    public var isMeterEventTimestampRefused: Bool {
        param == "timestamp" || code == "timestamp_too_far_in_past" || code == "timestamp_in_future"
    }

    /// A meter event's timestamp is ahead of Stripe's clock: unlike a too old one, it may be
    /// accepted later.
    public var isMeterEventTimestampInFuture: Bool {
        code == "timestamp_in_future"
    }
}
