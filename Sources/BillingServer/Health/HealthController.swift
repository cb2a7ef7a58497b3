import BillingCore
import BillingStore
import Hummingbird
import Logging

/// `GET /healthz` (the process answers) and `GET /readyz` (the ledger accepts writes), and
/// `HEAD` of both for checkers that send it (the same status and headers, without the body).
///
/// While the store is full (``StoreSpaceWatch``) `/readyz` checks for room rather than for a
/// write (``LedgerStore/checkSpace()``): 503 `store_full` until there is room for a delivery,
/// then 200, which ends the episode.
public struct HealthController: Sendable {
    let store: any LedgerStore
    let space: StoreSpaceWatch
    let deadline: Duration

    /// - Parameter deadline: how long `/readyz` waits for the store's write before it answers
    ///   503: a balancer's check gives up after a few seconds, and a database that does not
    ///   answer would otherwise hold the check until the pool gives up, a minute later.
    public init(store: any LedgerStore, space: StoreSpaceWatch, deadline: Duration = .seconds(5)) {
        self.store = store
        self.space = space
        self.deadline = deadline
    }

    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        let healthy: @Sendable (Request, Context) async throws -> Response = { _, _ in
            APIError.jsonResponse(status: .ok, body: ["status": "ok"])
        }
        let ready: @Sendable (Request, Context) async throws -> Response = { _, context in
            do {
                try await withDeadline(deadline) { [store, space] in
                    if space.isFull { try await space.checkSpace() } else { try await store.checkWritable() }
                }
                return APIError.jsonResponse(status: .ok, body: ["status": "ready"])
            } catch {
                // The watch logs a full store once per episode; a check is not a refused write.
                if space.isFull || space.refused(error, writer: "readiness") {
                    throw APIError.storeFull("a balancer may send traffic again")
                }
                context.logger.error("readiness check failed", metadata: ["error": "\(error)"])
                throw APIError(
                    .serviceUnavailable, code: "database_not_writable",
                    message: "The ledger database did not accept a write within \(deadline): check that it is up, its disk space and permissions.")
            }
        }
        // The HTTP encoder leaves the body out of an answer to HEAD.
        router.get("/healthz", use: healthy)
        router.head("/healthz", use: healthy)
        router.get("/readyz", use: ready)
        router.head("/readyz", use: ready)
    }
}
