import HTTPTypes
import Hummingbird
import Logging

/// Gives every error a JSON body: ``APIError``s render themselves, other HTTP errors (404,
/// 405, 413 …) keep their status with a JSON body, a body that could not be read is the
/// client's 4xx (``RequestBody/clientError(_:limit:)``), and anything unexpected is logged and
/// becomes a 500 without internals.
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            throw error
        } catch let error as any HTTPResponseError {
            let code = error.status == .notFound ? "not_found" : "http_\(error.status.code)"
            let message = error.status == .notFound
                ? "No route for \(request.method) \(request.uri.path)."
                : error.status.reasonPhrase
            throw APIError(error.status, code: code, message: message)
        } catch {
            if let clientError = RequestBody.clientError(error) { throw clientError }
            context.logger.error("unhandled error", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            throw APIError(.internalServerError, code: "internal_error", message: "billingd hit an internal error; see its log.")
        }
    }
}
