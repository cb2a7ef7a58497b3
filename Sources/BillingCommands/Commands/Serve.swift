import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation
import Logging
import ServiceLifecycle
import StripeAPI
import UnixSignals

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
        let store = try global.openDatabase(settings)

        // The catalog first: a catalog error must not print after the local mode banner.
        var catalog: PlanCatalog?
        if let plansPath = settings.plansPath {
            do {
                catalog = try PlanCatalogLoader.load(path: plansPath)
            } catch {
                throw ValidationError("\(error)")  // the error names BILLINGD_PLANS and the file
            }
        }

        var secrets = settings.webhookSecrets
        let isLocal = secrets.isEmpty && local
        if secrets.isEmpty {
            guard local else {
                throw ValidationError(
                    "STRIPE_WEBHOOK_SECRET is not set. Set it to your endpoint's signing secret (whsec_…, from the Stripe dashboard or `stripe listen`), or run `billingd serve --local` to try billingd with a generated secret.")
            }
            secrets = [try await LocalMode.secret(in: store, creating: true)!]
            logger.warning(
                "LOCAL MODE: no STRIPE_WEBHOOK_SECRET; accepting events signed with a generated local secret. Send one with `billingd trigger customer.subscription.created`. Do not expose this to the internet.")
        }

        let metrics = BillingMetrics()
        let inbox = store.inbox
        let applier = ApplierService(
            applier: store.applier(.init(apiVersion: settings.stripeAPIVersion)),
            inbox: inbox, metrics: metrics, logger: logger)
        let committer = GroupCommitter(applier: applier.inboxApplier, didCommit: { applier.ingested($0) })
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: applier)]
        let stripe = StripeClients.client(settings, logger: logger, observer: StripeMetricsObserver(metrics: metrics))
        let appStoreClients = try AppStoreClients.make(settings, logger: logger)
        let appStoreReconcilers = [AppStoreEnvironment.production, .sandbox].compactMap { appStoreClients[$0] }.map { client in
            AppStoreReconciler(
                store: store, client: client, logger: logger, inbox: inbox, applier: applier.inboxApplier, eventsStored: { applier.wake() })
        }
        if stripe != nil || !appStoreReconcilers.isEmpty {
            let reconciler = stripe.map { stripe in
                Reconciler(
                    store: store, client: stripe, livemode: settings.apiKeyIsLive ?? false, logger: logger,
                    inbox: inbox, applier: applier.inboxApplier, catalog: catalog, eventsStored: { applier.wake() })
            }
            services.append(.init(service: ReconcileScheduler(
                reconciler: reconciler, appStore: appStoreReconcilers, store: store,
                configuration: .init(sweepInterval: settings.eventsSweepInterval, reconcileInterval: settings.reconcileInterval),
                metrics: metrics, logger: logger)))
        }
        if let stripe, let interval = settings.usageReportInterval {
            let reporter = UsageReporter(
                store: store, client: stripe, livemode: settings.apiKeyIsLive ?? false, logger: logger, metrics: metrics)
            services.append(.init(service: UsageReportScheduler(reporter: reporter, interval: interval, logger: logger)))
        }
        if stripe == nil {
            logger.notice("no STRIPE_API_KEY: the Stripe reconcile scheduler (missed-events sweep, daily reconcile) and the usage report to Stripe Billing Meters are off")
        }
        var dependencies = BillingServerDependencies(
            store: store,
            verifier: SignatureVerifier(secrets: secrets, tolerance: settings.signatureTolerance),
            committer: committer, metrics: metrics, benchmarkRoutes: benchmarkRoutes, apiTokens: settings.apiTokens)
        dependencies.metricsToken = settings.metricsToken
        dependencies.stripe = stripe
        let localPKI = isLocal ? try await AppStoreSupport.localPKI(in: store, creating: true) : nil
        dependencies.appStoreVerifier = try AppStoreSupport.verifier(settings, localPKI: localPKI)
        dependencies.appStoreOwnership = settings.appStoreOwnership
        dependencies.appStoreClients = appStoreClients
        // The mode the service API answers in: the Stripe key's; an App Store-only app (no Stripe
        // key) that accepts Production data answers in live mode.
        let appStoreLive = settings.apiKey == nil && settings.appStoreBundleID != nil && settings.appStoreAppAppleID != nil
            && settings.appStoreEnvironments.contains(.production)
        dependencies.scope = .forAPIKey(isLive: settings.apiKeyIsLive ?? (appStoreLive ? true : nil))
        if dependencies.appStoreVerifier != nil {
            logger.notice(
                "App Store on: POST /webhooks/appstore",
                metadata: [
                    "bundle_id": "\(settings.appStoreBundleID ?? AppStoreSupport.localBundleID)",
                    "environments": "\(settings.appStoreEnvironments.map(\.rawValue).sorted().joined(separator: ","))",
                    "ownership": "\(settings.appStoreOwnership.rawValue)",
                    "local_pki": "\(localPKI != nil)",
                ])
        }
        if let catalog { dependencies.plans = catalog }
        if dependencies.plans.meters.contains(where: { $0.stripeMeter != nil }) {
            if stripe == nil {
                logger.warning("meters with stripe_meter are in the plan catalog but STRIPE_API_KEY is not set: their usage is recorded and waits to be reported")
            } else if settings.usageReportInterval == nil {
                logger.notice("BILLINGD_USAGE_REPORT_INTERVAL is off: usage is not reported to Stripe Billing Meters by serve; run `billingd usage report` from cron")
            }
        }
        let startup = Self.startupSummary(
            settings, secrets: secrets.count, local: isLocal, catalog: catalog, stripe: stripe != nil,
            appStore: dependencies.appStoreVerifier != nil, appStoreAPI: appStoreClients.keys.map(\.rawValue).sorted())
        let limits = ConnectionLimits(
            idleTimeout: settings.idleTimeout, headerTimeout: settings.headerTimeout, bodyTimeout: settings.bodyTimeout,
            maximumConnections: settings.maximumConnections)
        let application = BillingApplication.application(
            dependencies, host: settings.host, port: settings.port, limits: limits, logger: logger
        ) { _ in
            logger.notice("billingd listening", metadata: startup.mapValues { .string($0) })
        }
        // Reverse start order on shutdown: the server stops taking deliveries first, then the
        // usage report stops sending (the calls in flight are recorded), then the scheduler stops
        // its run at the next page, then the applier finishes its batch, then the database is closed.
        services.append(.init(service: application))
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        try store.close()
        logger.notice("billingd stopped cleanly")
    }

    /// What the start-up line says is on: where it listens and stores, the service API, the plan
    /// catalog, Stripe, the App Store, and what runs on a schedule.
    static func startupSummary(
        _ settings: Settings, secrets: Int, local: Bool, catalog: PlanCatalog?, stripe: Bool, appStore: Bool, appStoreAPI: [String]
    ) -> [String: String] {
        func every(_ interval: Duration?) -> String {
            guard let seconds = interval?.components.seconds else { return "off" }
            if seconds % 3600 == 0 { return "every \(seconds / 3600)h" }
            return seconds % 60 == 0 ? "every \(seconds / 60)m" : "every \(seconds)s"
        }
        var summary = [
            "address": "http://\(settings.host):\(settings.port)",
            "database": URL(fileURLWithPath: settings.databasePath).standardizedFileURL.path,
            "webhook_secrets": local ? "local (generated)" : "\(secrets)",
            "service_api": settings.apiTokens.isEmpty ? "off (no BILLINGD_API_TOKENS)" : "on, \(settings.apiTokens.count) token(s)",
            "plans": catalog.map { "\(settings.plansPath ?? "") (\($0.tiers.count) tiers, \($0.meters.count) meters)" } ?? "none: one free tier",
            "stripe_api": stripe ? (settings.apiKeyIsLive == true ? "live key" : "test key") : "off (no STRIPE_API_KEY)",
            "app_store": appStore ? "on (\(settings.appStoreEnvironments.map(\.rawValue).sorted().joined(separator: ",")))" : "off",
            "app_store_api": appStoreAPI.isEmpty ? "off" : appStoreAPI.joined(separator: ","),
        ]
        let scheduled = stripe || !appStoreAPI.isEmpty
        summary["reconcile"] = scheduled ? every(settings.reconcileInterval) : "off (no API credentials)"
        summary["events_sweep"] = stripe ? every(settings.eventsSweepInterval) : "off"
        summary["usage_report"] = stripe ? every(settings.usageReportInterval) : "off"
        return summary
    }
}

/// The generated webhook secret of local mode, kept in the ledger's `meta` table so that
/// `serve --local` and `trigger` agree without the user copying it around.
enum LocalMode {
    static let metaKey = "local_webhook_secret"

    static func secret(in store: any LedgerStore, creating: Bool) async throws -> String? {
        if let existing = try await store.metaValue(metaKey) { return existing }
        guard creating else { return nil }
        var generator = SystemRandomNumberGenerator()
        let random = (0..<24).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        let secret = "whsec_local_\(random)"
        try await store.setMetaValue(metaKey, secret)
        return secret
    }
}
