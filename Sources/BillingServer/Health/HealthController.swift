import BillingStore
import Hummingbird
import Logging

/// `GET /healthz` (the process answers) and `GET /readyz` (the ledger accepts writes), and
/// `HEAD` of both for checkers that send it (the same status and headers, without the body).
public struct HealthController: Sendable {
    let store: any LedgerStore

    public init(store: any LedgerStore) {
        self.store = store
    }

    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        let healthy: @Sendable (Request, Context) async throws -> Response = { _, _ in
            APIError.jsonResponse(status: .ok, body: ["status": "ok"])
        }
        let ready: @Sendable (Request, Context) async throws -> Response = { _, context in
            do {
                try await store.checkWritable()
                return APIError.jsonResponse(status: .ok, body: ["status": "ready"])
            } catch {
                context.logger.error("readiness check failed", metadata: ["error": "\(error)"])
                throw APIError(
                    .serviceUnavailable, code: "database_not_writable",
                    message: "The ledger database does not accept writes: check disk space and permissions.")
            }
        }
        // The HTTP encoder leaves the body out of an answer to HEAD.
        router.get("/healthz", use: healthy)
        router.head("/healthz", use: healthy)
        router.get("/readyz", use: ready)
        router.head("/readyz", use: ready)
    }
}
