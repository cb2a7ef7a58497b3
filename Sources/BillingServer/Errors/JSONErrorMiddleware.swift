import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// Gives every error a JSON body: ``APIError``s render themselves, other HTTP errors (413 …)
/// keep their status with a JSON body, a body that could not be read is the client's 4xx
/// (``RequestBody/clientError(_:limit:)``), and anything unexpected is logged and becomes a 500
/// without internals. A path billingd serves asked with a method it does not take is 405 with
/// `Allow` (RFC 9110 §15.5.6), not 404: the route exists. A write the store refused for want of
/// space (``StoreFull``), on any route, is 503 `store_full` with `Retry-After`, and the watch is told.
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let routes: RouteMethods
    let space: StoreSpaceWatch

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            throw error
        } catch let error as any HTTPResponseError {
            guard error.status == .notFound else {
                throw APIError(error.status, code: "http_\(error.status.code)", message: error.status.reasonPhrase)
            }
            let allowed = routes.methods(for: request.uri.path)
            guard !allowed.isEmpty else {
                throw APIError(.notFound, code: "not_found", message: "No route for \(request.method) \(request.uri.path).")
            }
            let allow = allowed.joined(separator: ", ")
            var response = try APIError(
                .methodNotAllowed, code: "method_not_allowed", message: "\(request.uri.path) answers \(allow), not \(request.method)."
            ).response(from: request, context: context)
            response.headers[.allow] = allow
            return response
        } catch {
            if let clientError = RequestBody.clientError(error) { throw clientError }
            if space.refused(error, writer: "api") { throw APIError.storeFull("try again after Retry-After") }
            context.logger.error("unhandled error", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            throw APIError(.internalServerError, code: "internal_error", message: "billingd hit an internal error; see its log.")
        }
    }
}

/// The methods each of the router's paths answers, set once the routes are added.
final class RouteMethods: Sendable {
    private struct Route {
        /// Path segments; a capture (`{user}` in Hummingbird's description) or a wildcard is nil
        /// and matches any one segment.
        let segments: [String?]
        let method: String
    }

    private let routes = Mutex<[Route]>([])

    /// Takes the router's routes (`Router.routes`).
    func set(_ descriptions: [(path: String, method: String)]) {
        let parsed = descriptions.map { description in
            Route(
                segments: description.path.split(separator: "/").map { $0.contains("{") || $0 == "*" ? nil : String($0) },
                method: description.method)
        }
        routes.withLock { $0 = parsed }
    }

    /// The methods a route of `path` answers, sorted; empty when no route has that path.
    func methods(for path: String) -> [String] {
        let segments = path.split(separator: "/")
        let methods = routes.withLock { routes in
            routes.filter { route in
                route.segments.count == segments.count
                    && zip(route.segments, segments).allSatisfy { pattern, segment in pattern == nil || pattern! == segment }
            }.map(\.method)
        }
        return Set(methods).sorted()
    }
}
