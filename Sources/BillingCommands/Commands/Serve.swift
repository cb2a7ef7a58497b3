import ArgumentParser
import BillingLocal
import BillingServer
import BillingStore
import Logging

/// `billingd serve`: the long-running daemon.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Receive Stripe webhooks, apply them to the ledger and answer the service API.",
        discussion: """
            Listens on BILLINGD_HOST:BILLINGD_PORT with POST /webhooks/stripe, GET /healthz, GET /readyz and GET /metrics. A delivery is answered 2xx only once it is committed to the ledger database and fsynced, applied to the ledger in the same transaction; one that does not decode is refused (400 not_an_event), and one whose ledger write fails is kept and retried by the applier with backoff. SIGTERM or SIGINT stops accepting, finishes what is in flight and closes the database.

            To try billingd without a Stripe account, run `billingd serve --local`: it generates a webhook secret, keeps it in the database, and `billingd trigger EVENT_TYPE` signs sample events with it.
            """)

    @OptionGroup var global: GlobalOptions

    @Flag(name: .long, help: "Local mode for trying billingd: without STRIPE_WEBHOOK_SECRET, use a generated secret kept in the database (see `billingd trigger`).")
    var local = false

    @Flag(name: .long, help: .hidden)
    var benchmarkRoutes = false

    func run() async throws {
        let settings = try global.settings()
        let logger = global.logger("billingd", settings: settings)
        // A PostgreSQL pool as large as the HTTP server's concurrent ledger work needs: group
        // commits, the applier, the outbox sender, reconcile and the service API's reads.
        let store = try await global.openStore(settings, connections: settings.database.connections, commits: settings.database.commits)
        let daemon: BillingDaemon
        do {
            daemon = try await BillingDaemon(
                settings: settings, store: store, options: .init(local: local ? LocalMode() : nil, benchmarkRoutes: benchmarkRoutes, closesStore: true), logger: logger)
        } catch {
            try? await store.close()
            switch error {
            case let error as SettingsError: throw CommandFailure.configuration(error.description)
            // The error names BILLINGD_PLANS and the file.
            case let error as PlanCatalogLoadError: throw CommandFailure.configuration("\(error)")
            default: throw error
            }
        }
        do {
            // A graceful stop closes the store in the group, once its other services have
            // stopped; a failed group leaves it to this close (a second close does nothing).
            try await daemon.run()
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
        logger.notice("billingd stopped cleanly")
    }
}
