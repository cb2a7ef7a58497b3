import HTTPTypes
import Hummingbird
import Logging

/// Who presented a bearer token: the app (a `BILLINGD_API_TOKENS` token) or an operator (a
/// `BILLINGD_CONSOLE_TOKENS` token), named by the token's label, never by the token.
public struct TokenCaller: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case api
        case console
    }

    public var kind: Kind
    /// The token's label, or `token<N>` (its 1-based position in its list) for a token without one.
    public var label: String

    /// `api:LABEL` or `console:LABEL`: what a grant records as its giver or revoker.
    public var name: String { "\(kind.rawValue):\(label)" }
}

/// The tokens of both lists, for routes that the app and operators may both call (promotional
/// grants). Identifying a token compares it in constant time with every token of both lists, so
/// neither the timing nor the work done tells which list or how much of a guess was right.
public struct CallerTokens: Sendable {
    private let tokens: [(token: [UInt8], caller: TokenCaller)]

    public init(api: [ConsoleToken], console: [ConsoleToken]) {
        func entries(_ list: [ConsoleToken], _ kind: TokenCaller.Kind) -> [([UInt8], TokenCaller)] {
            list.enumerated().map { index, token in
                (Array(token.token.utf8), TokenCaller(kind: kind, label: token.label ?? "token\(index + 1)"))
            }
        }
        tokens = (entries(api, .api) + entries(console, .console)).map { (token: $0.0, caller: $0.1) }
    }

    /// Whether any token is configured (else the routes are not served).
    public var isEmpty: Bool { tokens.isEmpty }

    /// The caller of an `Authorization` header, nil when it names no configured token.
    public func caller(_ authorization: String?) -> TokenCaller? {
        guard let presented = BearerTokenMiddleware<BasicRequestContext>.bearerToken(authorization) else { return nil }
        var found: TokenCaller?
        for entry in tokens {
            // No early exit: every token is compared in full.
            if BearerTokenMiddleware<BasicRequestContext>.constantTimeEquals(presented, entry.token), found == nil {
                found = entry.caller
            }
        }
        return found
    }
}

/// Admits a request only with a token of either list (``CallerTokens``); anything else gets 401
/// with a JSON error body and `WWW-Authenticate: Bearer`, counted in
/// `billingd_service_api_unauthorized_total{authorization}` and logged through the ``RejectionLog``.
/// The caller's name (kind and label) goes into the request's log metadata as `caller`.
public struct CallerTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let tokens: CallerTokens
    let metrics: BillingMetrics
    let rejections: RejectionLog

    public init(tokens: CallerTokens, metrics: BillingMetrics, rejections: RejectionLog) {
        self.tokens = tokens
        self.metrics = metrics
        self.rejections = rejections
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let caller = tokens.caller(request.headers[.authorization]) else {
            let reason = request.headers[.authorization] == nil ? "missing" : "rejected"
            metrics.count("billingd_service_api_unauthorized_total", dimensions: [("authorization", reason)])
            rejections.notice(
                "service API request refused", reason: "authorization_\(reason)", metadata: ["path": "\(request.uri.path)"],
                to: context.logger)
            var response = APIError(
                .unauthorized, code: "unauthorized",
                message: "This endpoint needs `Authorization: Bearer TOKEN` with one of the tokens in BILLINGD_API_TOKENS or BILLINGD_CONSOLE_TOKENS."
            ).response()
            response.headers[.wwwAuthenticate] = #"Bearer realm="billingd""#
            return response
        }
        var context = context
        context.logger[metadataKey: "caller"] = "\(caller.name)"
        return try await next(request, context)
    }
}
