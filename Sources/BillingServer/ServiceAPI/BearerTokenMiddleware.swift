import HTTPTypes
import Hummingbird
import Logging

/// Admits a request to the service API only with `Authorization: Bearer TOKEN` naming one of the
/// configured tokens (`BILLINGD_API_TOKENS`); anything else gets 401 with a JSON error body and
/// `WWW-Authenticate: Bearer`. Tokens are compared in constant time, against every configured
/// token, so neither the timing nor the work done tells how much of a guess was right.
/// A refusal is counted in `billingd_service_api_unauthorized_total{authorization}` and logged
/// through the ``RejectionLog``.
public struct BearerTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    private let tokens: [[UInt8]]
    private let metrics: BillingMetrics
    private let rejections: RejectionLog

    /// - Parameter tokens: the accepted tokens; none accepts nothing.
    public init(tokens: [String], metrics: BillingMetrics, rejections: RejectionLog) {
        self.tokens = tokens.map { Array($0.utf8) }
        self.metrics = metrics
        self.rejections = rejections
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let presented = Self.bearerToken(request.headers[.authorization]), accepts(presented) else {
            let reason = request.headers[.authorization] == nil ? "missing" : "rejected"
            metrics.count("billingd_service_api_unauthorized_total", dimensions: [("authorization", reason)])
            rejections.notice(
                "service API request refused", reason: "authorization_\(reason)", metadata: ["path": "\(request.uri.path)"],
                to: context.logger)
            var response = APIError.jsonResponse(
                status: .unauthorized,
                body: [
                    "error": [
                        "code": "unauthorized",
                        "message": "The service API needs `Authorization: Bearer TOKEN` with one of the tokens in BILLINGD_API_TOKENS.",
                    ]
                ])
            response.headers[.wwwAuthenticate] = #"Bearer realm="billingd""#
            return response
        }
        return try await next(request, context)
    }

    /// Whether `presented` equals one of the tokens.
    package func accepts(_ presented: [UInt8]) -> Bool {
        var matched = false
        for token in tokens {
            // No early exit: every token is compared in full.
            matched = Self.constantTimeEquals(presented, token) || matched
        }
        return matched
    }

    /// The token of an `Authorization: Bearer TOKEN` header (scheme in any case), if that is
    /// what the header holds.
    static func bearerToken(_ header: String?) -> [UInt8]? {
        guard let header else { return nil }
        let bytes = Array(header.utf8)
        guard bytes.count > 7, bytes.count <= 4096,
            String(decoding: bytes[0..<6], as: UTF8.self).lowercased() == "bearer", bytes[6] == UInt8(ascii: " ")
        else { return nil }
        let token = bytes[7...].drop { $0 == UInt8(ascii: " ") }
        return token.isEmpty ? nil : Array(token)
    }

    /// Compares two byte strings in time that depends only on their lengths, never on where
    /// they differ.
    package static func constantTimeEquals(_ presented: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: presented.count ^ expected.count) | (presented.count == expected.count ? 0 : 1)
        for index in 0..<expected.count {
            let byte = index < presented.count ? presented[index] : 0
            difference |= byte ^ expected[index]
        }
        return difference == 0
    }
}
