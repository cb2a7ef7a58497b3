import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StripeAPI

/// Why a Checkout, portal or cancel action was refused, as the client sees it: an HTTP status, a
/// stable code and a message that says what to do, rendered as `{"error": {"code", "message"}}`
/// (plus `stripe_request_id` when Stripe answered), with `Retry-After` when trying again later
/// may work; the CLI prints the message.
extension APIError {
    // MARK: - Common refusals

    static func missingField(_ name: String, _ hint: String = "") -> APIError {
        APIError(.badRequest, code: "missing_field", message: "The field \"\(name)\" is required\(hint.isEmpty ? "." : "; \(hint)")")
    }

    static func invalidField(_ name: String, _ expected: String) -> APIError {
        APIError(.badRequest, code: "invalid_field", message: "The field \"\(name)\" is not valid: expected \(expected).")
    }

    static func invalidURL(_ name: String, _ value: String) -> APIError {
        APIError(
            .badRequest, code: "invalid_url",
            message: "The field \"\(name)\" (\(CheckoutInput.printable(value))) is not an absolute http(s) URL; give one such as https://app.example.com/billing/done.")
    }

    static let stripeNotConfigured = APIError(
        .serviceUnavailable, code: "stripe_not_configured",
        message: "billingd has no Stripe API key, so it cannot create Checkout or portal sessions or cancel subscriptions. Set STRIPE_API_KEY (sk_… or a restricted rk_… key with write access to customers, Checkout Sessions, portal sessions and subscriptions) and restart billingd.")

    /// Seconds a client should wait after Stripe was unreachable or overloaded past retries.
    static let stripeRetryAfter = 5

    /// What a failed Stripe call means for the client: its own mistake (4xx), the operator's
    /// (502: the key), or a passing problem (503 with Retry-After). Never carries the API key.
    static func stripe(_ error: StripeError, doing action: String) -> APIError {
        let requestID = error.requestID
        let suffix = requestID.map { " (Stripe request \($0))" } ?? ""
        switch error.kind {
        case .invalidRequest, .api, .notFound:
            return APIError(
                .badRequest, code: "stripe_rejected",
                message: "Stripe refused to \(action): \(error.message)\(error.param.map { " [param: \($0)]" } ?? "")\(suffix)",
                stripeRequestID: requestID)
        case .idempotency:
            return APIError(
                .conflict, code: "idempotency_conflict",
                message: "Stripe refused the idempotency key while trying to \(action): it was used with other parameters, or the first request with it is still running. Send a new Idempotency-Key for a different request.\(suffix)",
                stripeRequestID: requestID)
        case .authentication, .permission:
            return APIError(
                .badGateway, code: "stripe_auth_failed",
                message: "Stripe did not accept billingd's API key while trying to \(action) (HTTP \(error.status.map(String.init) ?? "?")). This is an operator problem: check STRIPE_API_KEY (expired, rolled, or a restricted key without this permission).\(suffix)",
                stripeRequestID: requestID)
        case .decoding:
            return APIError(
                .badGateway, code: "stripe_bad_answer",
                message: "Stripe's answer while trying to \(action) could not be read: \(error.message)\(suffix)", stripeRequestID: requestID)
        case .rateLimited, .server, .transport, .cancelled:
            return APIError(
                .serviceUnavailable, code: "stripe_unavailable",
                message: "Stripe could not be reached or was overloaded while trying to \(action), after \(error.attempts) attempt(s). Try again in a few seconds.\(suffix)",
                retryAfter: stripeRetryAfter, stripeRequestID: requestID)
        }
    }
}
