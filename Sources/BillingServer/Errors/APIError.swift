import BillingCore
import Foundation
import HTTPTypes
import Hummingbird

/// An error a client sees, whatever the endpoint: an HTTP status and a JSON body
/// `{"error": {"code", "message", …}}`, with `Retry-After` when trying again later may work. It
/// renders itself (Hummingbird's `HTTPResponseError`), and it stays typed until then: its
/// ``Reason`` is what the metrics count, its code only what the body names.
public struct APIError: HTTPResponseError, Sendable, Equatable, CustomStringConvertible {
    /// Why the request was refused, as far as anything but the body cares.
    public enum Reason: Sendable, Equatable {
        /// The body was larger than the endpoint takes (413 `body_too_large`).
        case bodyTooLarge
        /// The `Stripe-Signature` header did not verify a webhook delivery.
        case signature(SignatureError)
        /// A verified webhook body is not a Stripe event billingd can take.
        case event(EventDecodingError)
        /// A delivery could not be stored durably (503 `store_unavailable`): the sender retries it.
        case storeUnavailable
        /// The store has no room left (503 `store_full`, with `Retry-After`): the sender retries
        /// once space is freed (see ``StoreSpaceWatch``).
        case storeFull
        /// Any other refusal, named by its stable code.
        case other(code: String)

        /// The stable, machine-readable code the body names (e.g. `signature_mismatch`).
        public var code: String {
            switch self {
            case .bodyTooLarge: "body_too_large"
            case .signature(let error): error.code
            case .event(let error): error.code
            case .storeUnavailable: "store_unavailable"
            case .storeFull: "store_full"
            case .other(let code): code
            }
        }
    }

    public let status: HTTPResponse.Status
    public let reason: Reason
    /// What happened and what to do, for a person.
    public let message: String
    /// Seconds after which the same request may succeed (`Retry-After`).
    public let retryAfter: Int?
    /// The `Request-Id` of Stripe's answer, to quote to Stripe support (`stripe_request_id`).
    public let stripeRequestID: String?
    /// More members of the error object (e.g. `field`).
    public let extra: [String: String]

    public init(
        _ status: HTTPResponse.Status, reason: Reason, message: String, retryAfter: Int? = nil, stripeRequestID: String? = nil,
        extra: [String: String] = [:]
    ) {
        self.status = status
        self.reason = reason
        self.message = message
        self.retryAfter = retryAfter
        self.stripeRequestID = stripeRequestID
        self.extra = extra
    }

    /// A refusal with no meaning beyond its code.
    public init(
        _ status: HTTPResponse.Status, code: String, message: String, retryAfter: Int? = nil, stripeRequestID: String? = nil,
        extra: [String: String] = [:]
    ) {
        self.init(status, reason: .other(code: code), message: message, retryAfter: retryAfter, stripeRequestID: stripeRequestID, extra: extra)
    }

    /// Stable, machine-readable reason (e.g. `signature_mismatch`), as the body names it.
    public var code: String { reason.code }

    public var description: String { "\(message) (\(code))" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response()
    }

    /// Seconds a client is told to wait (`Retry-After`) while the store is full: long enough
    /// for an operator to free space, short enough that the app's own writes resume soon after.
    public static let storeFullRetryAfter = 30

    /// 503 `store_full` with `Retry-After`: nothing of the request was stored, for want of space.
    /// - Parameter retried: who tries again, for the message ("Stripe will retry it").
    public static func storeFull(_ retried: String) -> APIError {
        APIError(
            .serviceUnavailable, reason: .storeFull,
            message: "The ledger store is full, so nothing was stored; \(retried) once the operator frees space.",
            retryAfter: storeFullRetryAfter)
    }

    /// The JSON error response, for a caller that answers with it rather than throw it.
    public func response() -> Response {
        var response = Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    /// The body: `{"error": {"code", "message", …}}`, members sorted.
    var body: ByteBuffer {
        var error: [String: Any] = ["code": code, "message": message]
        if let stripeRequestID { error["stripe_request_id"] = stripeRequestID }
        for (key, value) in extra { error[key] = value }
        return Self.jsonBytes(["error": error])
    }

    /// A JSON response with the given status.
    static func jsonResponse(status: HTTPResponse.Status, body: [String: Any]) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: jsonBytes(body)))
    }

    /// The bytes of an error body, `{"error":{"code":…,"message":…}}`, for answers written
    /// below the router (see ``RequestGuard``).
    static func errorBody(code: String, message: String) -> ByteBuffer {
        jsonBytes(["error": ["code": code, "message": message]])
    }

    private static func jsonBytes(_ body: [String: Any]) -> ByteBuffer {
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data("{}".utf8)
        return ByteBuffer(bytes: data)
    }
}
