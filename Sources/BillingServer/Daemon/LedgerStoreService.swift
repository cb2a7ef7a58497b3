import BillingStore
import ServiceLifecycle

/// The ledger store as a service of serve's group, placed first so that it stops last: every
/// other service (the server's group commits, the applier, the outbox, reconcile) has finished
/// with it before it closes, and on PostgreSQL postgres-nio's pool then closes its connections.
///
/// The store is opened, and its pool started, before the group exists: serve's own set-up (the
/// local secret, the App Store PKI) and every command read it first. So this service's part is
/// the store's end; it holds no work of its own.
struct LedgerStoreService: Service {
    let store: any LedgerStore

    func run() async throws {
        // Until the group shuts down gracefully: every other service has stopped by then. A
        // cancelled group (a service failed) leaves the store open, since the others may still
        // be unwinding: serve closes it once the group has returned.
        do { try await gracefulShutdown() } catch { return }
        try await store.close()
    }
}
