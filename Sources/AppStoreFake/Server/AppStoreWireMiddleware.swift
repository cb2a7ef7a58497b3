import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Apple's wire rules around every route: records the request, applies an injected fault, checks
/// the bearer token (401 with an empty body for any problem), reads the body under a limit, and
/// renders every error as Apple's JSON.
struct AppStoreWireMiddleware: RouterMiddleware {
    typealias Context = FakeRequestContext

    let store: FakeAppStore
    let tokens: BearerTokenVerifier
    /// Request bodies larger than this are refused; Apple's requests are a few hundred bytes.
    var maximumBodySize = 1 << 16

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await respond(to: request, context: context, next: next)
        } catch let error as AppStoreFake.APIError {
            return try error.response(from: request, context: context)
        } catch let error as HTTPError where error.status == .notFound {
            // An unknown path: Apple's gateway answers 404 without a body.
            return Response(status: .notFound)
        } catch let error as HTTPError where error.status == .methodNotAllowed {
            return Response(status: .methodNotAllowed)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            return try AppStoreFake.APIError.generalBadRequest.response(from: request, context: context)
        }
    }

    private func respond(
        to request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: maximumBodySize)
        let authorization = request.headers[.authorization]
        let refusal = tokens.refusal(of: authorization, now: AppStoreFake.Clock.wallClock() / 1000)
        let recorded = AppStoreFake.RecordedRequest(
            method: request.method.rawValue, path: request.uri.path, query: request.uri.query,
            headers: request.headers.map { ($0.name.canonicalName, $0.value) }, body: Array(buffer: body),
            receivedAt: store.clock.now)
        if let fault = await store.receive(recorded, refusal: refusal) {
            switch fault.effect {
            case .error(let error):
                throw error
            case .delay(let duration):
                try await Task.sleep(for: duration)
            case .dropConnection:
                try? await context.channel.close()
                throw ConnectionDropped()
            }
        }
        if let refusal {
            context.logger.info(
                "bearer token refused", metadata: ["reason": "\(refusal)", "path": "\(request.uri.path)"])
            throw AppStoreFake.APIError.unauthorized
        }
        var context = context
        context.body = Array(buffer: body)
        return try await next(request, context)
    }
}

/// Thrown after a `.dropConnection` fault closed the channel; nothing is written back.
struct ConnectionDropped: Error {}
