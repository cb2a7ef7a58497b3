import APITransport
import Foundation

/// Which failed answers are worth another attempt, how long to wait, and what kind of error each is.
enum RetryPolicy {
    enum Decision: Equatable {
        case retry(reason: String, after: Duration?)
        case stop

        var isRetry: Bool { self != .stop }
    }

    /// 409 codes that mean "another request holds this object or key; try again".
    static let conflictCodes: Set<String> = ["lock_timeout", "idempotency_key_in_use"]

    /// `Stripe-Should-Retry` decides when present; otherwise 429, 5xx, and 409 lock or idempotency
    /// conflicts are retried, and every other status is final.
    static func decide(status: Int, headers: [String: String], details: ErrorDetails) -> Decision {
        let retryAfter = headers["retry-after"].flatMap(RetryBackoff.retryAfter)
        let label = "HTTP \(status)" + (details.code.map { " \($0)" } ?? "")
        switch headers["stripe-should-retry"]?.lowercased() {
        case "false": return .stop
        case "true": return .retry(reason: "\(label), Stripe-Should-Retry: true", after: retryAfter)
        default: break
        }
        if status == 429 || status >= 500 { return .retry(reason: label, after: retryAfter) }
        if status == 409, details.type == "idempotency_error" || details.code.map(conflictCodes.contains) == true {
            return .retry(reason: label, after: retryAfter)
        }
        return .stop
    }

    static func kind(status: Int, type: String?) -> StripeError.Kind {
        if type == "idempotency_error" { return .idempotency }
        switch status {
        case 401: return .authentication
        case 403: return .permission
        case 404: return .notFound
        case 429: return .rateLimited
        case 500...: return .server
        case 400: return type == nil || type == "invalid_request_error" ? .invalidRequest : .api
        default: return type == "invalid_request_error" ? .invalidRequest : .api
        }
    }

    /// Stripe's `{"error":{…}}`, or a readable stand-in when the body is something else.
    struct ErrorDetails {
        var type: String?
        var code: String?
        var param: String?
        var declineCode: String?
        var message: String

        private struct Body: Decodable {
            struct Inner: Decodable {
                let type: String?
                let code: String?
                let param: String?
                let message: String?
                let decline_code: String?
            }
            let error: Inner
        }

        init(_ answer: HTTPTransportResponse) {
            if let body = try? JSONDecoder().decode(Body.self, from: Data(answer.body)) {
                type = body.error.type
                code = body.error.code
                param = body.error.param
                declineCode = body.error.decline_code
                message = body.error.message ?? "HTTP \(answer.status) with no error message"
            } else if answer.body.isEmpty {
                message = "HTTP \(answer.status) with an empty body"
            } else {
                message = "HTTP \(answer.status) with a body that is not a Stripe error: \(Self.snippet(answer.body))"
            }
        }

        /// The first 200 bytes as one printable line.
        static func snippet(_ body: [UInt8]) -> String {
            let head = String(decoding: body.prefix(200), as: UTF8.self)
            var text = String(String.UnicodeScalarView(head.unicodeScalars.map { scalar in
                scalar.properties.generalCategory == .control || scalar == "\u{FFFD}" ? " " : scalar
            }))
            while text.contains("  ") { text = text.replacingOccurrences(of: "  ", with: " ") }
            text = text.trimmingCharacters(in: .whitespaces)
            return body.count > 200 ? text + "…" : text
        }
    }
}
