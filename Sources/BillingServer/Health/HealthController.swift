import BillingStore
import Hummingbird
import Logging

/// `GET /healthz` (the process answers) and `GET /readyz` (the ledger accepts writes).
public struct HealthController: Sendable {
    let store: any LedgerStore

    public init(store: any LedgerStore) {
        self.store = store
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/healthz") { _, _ in
            APIError.jsonResponse(status: .ok, body: ["status": "ok"])
        }
        router.get("/readyz") { _, context in
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
    }
}
