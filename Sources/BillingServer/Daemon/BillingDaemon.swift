import APITransport
import AppStoreAPI
import BillingCore
import BillingStore
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import StripeAPI
import UnixSignals

/// `billingd serve` as a value: the HTTP server, the applier, the reconcile scheduler and the
/// usage report, wired to one another and to an open store from the settings, in one
/// ServiceGroup. `serve` only parses its arguments and opens the store; tests run the same daemon
/// in process, wake-ups and shutdown order included.
public struct BillingDaemon: Sendable {
    public struct Options: Sendable {
        /// Local mode (`serve --local`, BillingLocal's stand-ins): without STRIPE_WEBHOOK_SECRET,
        /// accept a generated secret kept in the store and trust the local App Store PKI; without
        /// a Stripe key or an In-App Purchase key, run stand-ins of their APIs. Nil, as in every
        /// production configuration: no stand-in can start.
        public var local: (any LocalStandIns)?
        /// Adds `POST /bench/noop`, the ceiling the ingest benchmark compares against.
        public var benchmarkRoutes: Bool
        /// Signals that stop the daemon gracefully; a test passes none and calls ``shutdown()``.
        public var gracefulShutdownSignals: [UnixSignal]
        /// How long after start the reconcile scheduler first looks at what is due.
        public var schedulerInitialDelay: Duration
        /// Called once the server listens, with the port it bound (BILLINGD_PORT=0 takes a free one).
        public var onListening: @Sendable (Int) async -> Void
        /// The store is the group's first service, so the last to stop: after a graceful shutdown
        /// it closes (on PostgreSQL, its pool) once every other service has stopped; a group that
        /// failed leaves it to the caller. `serve` sets it; a test that reads the ledger after the
        /// daemon stopped leaves it off and closes the store itself.
        public var closesStore: Bool

        public init(
            local: (any LocalStandIns)? = nil, benchmarkRoutes: Bool = false, gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
            schedulerInitialDelay: Duration = .seconds(15), onListening: @escaping @Sendable (Int) async -> Void = { _ in },
            closesStore: Bool = false
        ) {
            self.local = local
            self.benchmarkRoutes = benchmarkRoutes
            self.gracefulShutdownSignals = gracefulShutdownSignals
            self.schedulerInitialDelay = schedulerInitialDelay
            self.onListening = onListening
            self.closesStore = closesStore
        }
    }

    /// What `/metrics` renders.
    public let metrics: BillingMetrics
    /// What the start-up line says is on (see ``startupSummary(_:secrets:local:catalog:stripe:appStore:appStoreAPI:)``).
    public let startup: [String: String]
    private let group: ServiceGroup

    /// Builds the daemon. Throws ``SettingsError`` for settings that cannot work together (no
    /// webhook secret outside local mode, an unreadable App Store key or root), and
    /// ``PlanCatalogLoadError`` for a plan catalog that does not load.
    public init(settings: Settings, store: any LedgerStore, options: Options = .init(), logger: Logger) async throws {
        // The catalog first: a catalog error must not print after the local mode banner.
        let catalog = try settings.plans.catalogPath.map { path throws(PlanCatalogLoadError) in try PlanCatalogLoader.load(path: path) }
        // Every transaction that changes the ledger keeps each touched user's announced view
        // current, even without an app webhook URL, so that turning webhooks on later announces
        // only later changes.
        let store = store.announcing(.serviceViews(catalog: catalog ?? .freeOnly, endpoints: settings.outbox.webhookURLs))

        var secrets = settings.stripe.webhookSecrets
        let isLocal = secrets.isEmpty && options.local != nil
        if secrets.isEmpty {
            guard let local = options.local else {
                throw SettingsError.missing(
                    "STRIPE_WEBHOOK_SECRET",
                    "Set it to your endpoint's signing secret (whsec_…, from the Stripe dashboard or `stripe listen`), or run `billingd serve --local` to try billingd with a generated secret.")
            }
            secrets = [try await local.webhookSecret(in: store)]
            logger.warning(
                "LOCAL MODE: no STRIPE_WEBHOOK_SECRET; accepting events signed with a generated local secret. Send one with `billingd trigger customer.subscription.created`. Do not expose this to the internet.")
        }

        let metrics = BillingMetrics()
        let inbox = store.inbox
        let applier = ApplierService(
            applier: store.applier(.init(apiVersion: settings.stripe.apiVersion)), inbox: inbox, metrics: metrics, logger: logger)
        let sender = try Self.outboxSender(settings, store: store, metrics: metrics, logger: logger)
        // A group commit that left deliveries queued, and reconcile storing recovered events, wake
        // the applier instead of leaving them to its next look; one that queued outbound events
        // wakes the sender.
        let committer = GroupCommitter(applier: applier.inboxApplier, didCommit: { ingested in
            applier.ingested(ingested)
            sender?.wake()
        })
        // What can fail on the settings, before anything is started.
        var appStoreClients = try settings.appStore.clients(logger: logger)
        let localRoot = isLocal ? try await options.local?.appStoreRoot(in: store) : nil
        let appStoreVerifier = try AppStoreSupport.verifier(settings.appStore, localRoot: localRoot)
        let appStoreReceiptVerifier = try AppStoreSupport.receiptVerifier(settings.appStore, localRoot: localRoot)

        // Local mode's stand-ins first in the group, so that they stop last.
        let localStandIns = try await LocalModeParts.start(
            options.local, settings: settings, secretIsLocal: isLocal, appStoreClients: appStoreClients, localRoot: localRoot,
            verifier: appStoreVerifier, catalog: catalog ?? .freeOnly, store: store, logger: logger)
        let localStripe = localStandIns.stripe
        let localAppStore = localStandIns.appStore
        if let localAppStore { appStoreClients[.sandbox] = localAppStore.client }
        var services = localStandIns.services
        services.append(.init(service: applier))
        if let sender { services.append(.init(service: sender)) }
        services.append(.init(service: OutboxReviewer(store: store.outbox, logger: logger, queued: { sender?.wake() })))
        let stripeObserver = StripeMetricsObserver(metrics: metrics)
        let stripe = settings.stripe.client(logger: logger, observer: stripeObserver)
        let livemode = settings.stripe.apiKeyIsLive ?? false
        if let scheduler = Self.reconcileScheduler(
            settings, store: store, stripe: stripe, livemode: livemode, appStoreClients: appStoreClients, applier: applier,
            catalog: catalog, initialDelay: options.schedulerInitialDelay, metrics: metrics, logger: logger)
        {
            services.append(.init(service: scheduler))
        }
        if let usageReport = Self.usageReportScheduler(settings, store: store, stripe: stripe, livemode: livemode, metrics: metrics, logger: logger) {
            services.append(.init(service: usageReport))
        }
        if let localStripe {
            logger.warning(
                "LOCAL MODE: no STRIPE_API_KEY; Checkout, Portal and cancel go to a Stripe fake on \(localStripe.baseURL), selling the plan catalog's \(localStripe.prices) price(s). Open a Checkout URL to pay it; the fake's webhooks come back here.")
        } else if stripe == nil {
            logger.notice("no STRIPE_API_KEY: the Stripe reconcile scheduler (missed-events sweep, daily reconcile) and the usage report to Stripe Billing Meters are off")
        }

        if let localAppStore {
            logger.warning(
                "LOCAL MODE: no App Store In-App Purchase key; the App Store Server API goes to an App Store fake on \(localAppStore.baseURL) (Sandbox: a month lasts five minutes). `billingd appstore trigger SUBSCRIBED --user user_42` buys through it; its notifications come back here.")
        }

        var dependencies = BillingServerDependencies(
            store: store,
            verifier: SignatureVerifier(secrets: secrets, tolerance: settings.stripe.signatureTolerance),
            committer: committer, metrics: metrics, benchmarkRoutes: options.benchmarkRoutes, apiTokens: settings.serviceAPI.tokens)
        dependencies.metricsToken = settings.metrics.token
        dependencies.rejections = RejectionLog(logger: logger)
        dependencies.stripe = stripe ?? localStripe?.client(logger: logger, observer: stripeObserver)
        dependencies.appStoreVerifier = appStoreVerifier
        dependencies.appStoreOwnership = settings.appStore.ownership
        dependencies.appStoreClients = appStoreClients
        dependencies.appStoreReceiptVerifier = appStoreReceiptVerifier
        // The mode the service API answers in: the Stripe key's; an App Store-only app (no Stripe
        // key) that accepts Production data answers in live mode.
        let appStoreLive = settings.stripe.apiKey == nil && settings.appStore.bundleID != nil && settings.appStore.appAppleID != nil
            && settings.appStore.environments.contains(.production)
        dependencies.scope = .forAPIKey(isLive: settings.stripe.apiKeyIsLive ?? (appStoreLive ? true : nil))
        if dependencies.appStoreVerifier != nil {
            logger.notice(
                "App Store on: POST /webhooks/appstore",
                metadata: [
                    "bundle_id": "\(settings.appStore.bundleID ?? AppStoreSupport.localBundleID)",
                    "environments": "\(settings.appStore.environments.map(\.rawValue).sorted().joined(separator: ","))",
                    "ownership": "\(settings.appStore.ownership.rawValue)",
                    "local_pki": "\(localRoot != nil)",
                ])
        }
        if let catalog { dependencies.plans = catalog }
        if dependencies.plans.meters.contains(where: { $0.stripeMeter != nil }) {
            if stripe == nil {
                logger.warning("meters with stripe_meter are in the plan catalog but STRIPE_API_KEY is not set: their usage is recorded and waits to be reported")
            } else if settings.usage.reportInterval == nil {
                logger.notice("BILLINGD_USAGE_REPORT_INTERVAL is off: usage is not reported to Stripe Billing Meters by serve; run `billingd usage report` from cron")
            }
        }

        var startup = Self.startupSummary(
            settings, secrets: secrets.count, local: isLocal, catalog: catalog, stripe: stripe != nil,
            appStore: dependencies.appStoreVerifier != nil, appStoreAPI: appStoreClients.keys.map(\.rawValue).sorted())
        if let localStripe { startup["stripe_api"] = "local fake at \(localStripe.baseURL)" }
        if let localAppStore { startup["app_store_api"] = "local fake at \(localAppStore.baseURL)" }
        let webhookSecret = secrets[0]
        let summary = startup
        // Where this machine reaches the server: loopback when it listens on every address.
        let reachableHost = ["0.0.0.0", "::", "[::]"].contains(settings.server.host) ? "127.0.0.1" : settings.server.host
        let onListening = options.onListening
        let application = BillingApplication.application(
            dependencies, host: settings.server.host, port: settings.server.port, limits: settings.server.connectionLimits, logger: logger
        ) { channel in
            let port = channel.localAddress?.port ?? settings.server.port
            var metadata = summary.mapValues { Logger.MetadataValue.string($0) }
            metadata["address"] = "http://\(settings.server.host):\(port)"
            logger.notice("billingd listening", metadata: metadata)
            await localStripe?.deliver(to: "http://\(reachableHost):\(port)/webhooks/stripe", secret: webhookSecret)
            await localAppStore?.deliver(to: "http://\(reachableHost):\(port)/webhooks/appstore")
            await onListening(port)
        }
        // Reverse start order on shutdown: the server stops taking deliveries first, then the
        // usage report stops sending (the calls in flight are recorded), then the scheduler stops
        // its run at the next page, then the applier finishes its batch; the store closes last
        // (``Options/closesStore``), or the caller closes it.
        services.append(.init(service: application))
        if options.closesStore { services.insert(.init(service: LedgerStoreService(store: store)), at: 0) }
        self.metrics = metrics
        self.startup = startup
        self.group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: options.gracefulShutdownSignals, logger: logger))
    }

    /// The outbox sender for BILLINGD_APP_WEBHOOK_URL; nil when it is not set.
    static func outboxSender(_ settings: Settings, store: any LedgerStore, metrics: BillingMetrics, logger: Logger) throws -> OutboxSender? {
        guard !settings.outbox.webhookURLs.isEmpty else { return nil }
        var configuration = OutboxSender.Configuration(signer: try settings.outbox.signer())
        configuration.connectTimeout = settings.outbox.connectTimeout
        configuration.timeout = settings.outbox.timeout
        return OutboxSender(store: store.outbox, configuration: configuration, metrics: metrics, logger: logger)
    }

    /// Runs every service until a graceful-shutdown signal, ``shutdown()`` or cancellation, and
    /// returns once each has stopped in reverse start order.
    public func run() async throws {
        try await group.run()
    }

    /// Stops the daemon as SIGTERM would.
    public func shutdown() async {
        await group.triggerGracefulShutdown()
    }

    /// What the start-up line says is on: where it listens and stores, the service API, the plan
    /// catalog, Stripe, the App Store, and what runs on a schedule.
    public static func startupSummary(
        _ settings: Settings, secrets: Int, local: Bool, catalog: PlanCatalog?, stripe: Bool, appStore: Bool, appStoreAPI: [String]
    ) -> [String: String] {
        func every(_ interval: Duration?) -> String {
            guard let seconds = interval?.components.seconds else { return "off" }
            if seconds % 3600 == 0 { return "every \(seconds / 3600)h" }
            return seconds % 60 == 0 ? "every \(seconds / 60)m" : "every \(seconds)s"
        }
        var summary = [
            "address": "http://\(settings.server.host):\(settings.server.port)",
            // The PostgreSQL URL without its password, else the SQLite file.
            "database": settings.database.postgres?.redacted ?? URL(fileURLWithPath: settings.database.sqlitePath).standardizedFileURL.path,
            "webhook_secrets": local ? "local (generated)" : "\(secrets)",
            "service_api": settings.serviceAPI.tokens.isEmpty ? "off (no BILLINGD_API_TOKENS)" : "on, \(settings.serviceAPI.tokens.count) token(s)",
            "plans": catalog.map { "\(settings.plans.catalogPath ?? "") (\($0.tiers.count) tiers, \($0.meters.count) meters)" } ?? "none: one free tier",
            "stripe_api": stripe ? (settings.stripe.apiKeyIsLive == true ? "live key" : "test key") : "off (no STRIPE_API_KEY)",
            "app_store": appStore ? "on (\(settings.appStore.environments.map(\.rawValue).sorted().joined(separator: ",")))" : "off",
            "app_store_api": appStoreAPI.isEmpty ? "off" : appStoreAPI.joined(separator: ","),
        ]
        let scheduled = stripe || !appStoreAPI.isEmpty
        summary["reconcile"] = scheduled ? every(settings.reconcile.interval) : "off (no API credentials)"
        summary["events_sweep"] = stripe ? every(settings.stripe.eventsSweepInterval) : "off"
        summary["usage_report"] = stripe ? every(settings.usage.reportInterval) : "off"
        summary["app_webhooks"] = settings.outbox.webhookURLs.isEmpty ? "off" : "\(settings.outbox.webhookURLs.count) endpoint(s)"
        return summary
    }
}
