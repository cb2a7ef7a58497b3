import HTTPTypes
import Hummingbird
import Logging

/// A bearer token of the operators' and finance's side (`BILLINGD_CONSOLE_TOKENS`): it opens the
/// revenue metrics API, never the service API. A label (`finance:TOKEN`) names who used it in
/// the log, never the token itself.
public struct ConsoleToken: Sendable, Equatable {
    public var label: String?
    public var token: String

    public init(label: String? = nil, token: String) {
        self.label = label
        self.token = token
    }

    /// `TOKEN` or `LABEL:TOKEN`; the token at least 16 characters, as the service API's.
    init(parsing item: String, name: String) throws(SettingsError) {
        if item.contains("REPLACE_ME") {
            throw SettingsError.invalid(name, nil, "tokens of your own; one is still the example's placeholder")
        }
        var token = item
        if let colon = item.firstIndex(of: ":") {
            let label = String(item[..<colon])
            guard (1...64).contains(label.count), label.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_.-".contains($0)) }) else {
                // The label is shown; the token is not.
                throw SettingsError.invalid(
                    name, nil, "TOKEN or LABEL:TOKEN, the label 1 to 64 letters, digits, _ . or -; one label is \(label.count) characters of another kind")
            }
            self.label = label
            token = String(item[item.index(after: colon)...])
        } else {
            label = nil
        }
        guard token.utf8.count >= 16 else {
            throw SettingsError.invalid(name, nil, "tokens of at least 16 characters; one of them is \(token.utf8.count) characters long")
        }
        self.token = token
    }
}

/// Admits a request to the revenue metrics API only with `Authorization: Bearer TOKEN` naming a
/// console token (`BILLINGD_CONSOLE_TOKENS`). The app's service API tokens (`BILLINGD_API_TOKENS`)
/// are known but not allowed here: 403 `forbidden`; no token or an unknown one: 401 like the
/// service API, with `WWW-Authenticate: Bearer`. Every comparison is constant-time, against every
/// token of both lists.
public struct ConsoleTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The console's tokens, then the app's: each identified as the grant routes identify a
    /// caller, in constant time over every token of its list, a console token first.
    private let console: CallerTokens
    private let service: CallerTokens
    private let metrics: BillingMetrics
    private let rejections: RejectionLog

    public init(tokens: [ConsoleToken], serviceTokens: [String], metrics: BillingMetrics, rejections: RejectionLog) {
        console = CallerTokens(api: [], console: tokens)
        service = CallerTokens(api: serviceTokens.map { ConsoleToken(token: $0) }, console: [])
        self.metrics = metrics
        self.rejections = rejections
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let authorization = request.headers[.authorization]
        if let caller = console.caller(authorization) {
            var context = context
            context.logger[metadataKey: "console_token"] = "\(caller.label)"
            return try await next(request, context)
        }
        if service.caller(authorization) != nil {
            metrics.count("billingd_metrics_api_unauthorized_total", dimensions: [("authorization", "service_token")])
            rejections.notice(
                "metrics API request refused", reason: "authorization_service_token", metadata: ["path": "\(request.uri.path)"], to: context.logger)
            throw APIError(
                .forbidden, code: "forbidden",
                message: "The metrics API takes a console token (BILLINGD_CONSOLE_TOKENS); the app's service API tokens (BILLINGD_API_TOKENS) are not allowed here.")
        }
        let reason = request.headers[.authorization] == nil ? "missing" : "rejected"
        metrics.count("billingd_metrics_api_unauthorized_total", dimensions: [("authorization", reason)])
        rejections.notice(
            "metrics API request refused", reason: "authorization_\(reason)", metadata: ["path": "\(request.uri.path)"], to: context.logger)
        var response = APIError(
            .unauthorized, code: "unauthorized",
            message: "The metrics API needs `Authorization: Bearer TOKEN` with one of the tokens in BILLINGD_CONSOLE_TOKENS."
        ).response()
        response.headers[.wwwAuthenticate] = #"Bearer realm="billingd""#
        return response
    }
}
