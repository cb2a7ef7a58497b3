import APITransport
import AppStoreAPI
import BillingCore
import BillingStore
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import StripeAPI
import Synchronization
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
        /// How long the services cancelled after ``BillingDaemon/shutdownGrace`` may take before
        /// the process ends with a fatal error: `serve`'s 5 s, so that a stop ends inside the
        /// unit's `TimeoutStopSec` even when a service ignores cancellation. Nil waits for them
        /// instead: a test running daemons inside its own busy process, where a crowded thread
        /// pool can delay every task by seconds, passes nil so that a slow stop is its own
        /// test's failure (or the suite's time limit, which names it) rather than the end of
        /// every test in the process.
        public var cancellationLimit: Duration?
        /// How long a webhook delivery waits for its group commit before it is answered 503
        /// `store_unavailable` (the store retries later): `serve`'s 20 s, inside Stripe's and
        /// Apple's own time limits. A test whose daemons share a crowded thread pool with hundreds
        /// of others raises it, so that a refusal there means the store failed, not that the
        /// machine was busy.
        public var storeDeadline: Duration

        public init(
            local: (any LocalStandIns)? = nil, benchmarkRoutes: Bool = false, gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
            schedulerInitialDelay: Duration = .seconds(15), onListening: @escaping @Sendable (Int) async -> Void = { _ in },
            closesStore: Bool = false, cancellationLimit: Duration? = .seconds(5), storeDeadline: Duration = .seconds(20)
        ) {
            self.local = local
            self.benchmarkRoutes = benchmarkRoutes
            self.gracefulShutdownSignals = gracefulShutdownSignals
            self.schedulerInitialDelay = schedulerInitialDelay
            self.onListening = onListening
            self.closesStore = closesStore
            self.cancellationLimit = cancellationLimit
            self.storeDeadline = storeDeadline
        }
    }

    /// How long a graceful stop (SIGTERM) waits for the services to finish their work in
    /// progress before cancelling it. With the 5 s cancellation may take, a stop ends within
    /// 25 s, inside the 30 s deploy/billingd.service allows (`TimeoutStopSec`).
    public static let shutdownGrace: Duration = .seconds(20)

    /// What `/metrics` renders.
    public let metrics: BillingMetrics
    /// What the start-up line says is on (see ``startupSummary(_:secrets:local:catalog:stripe:appStore:appStoreAPI:)``).
    public let startup: [String: String]
    private let group: ServiceGroup
    private let shutdownWatch: ShutdownWatch
    private let logger: Logger

    /// Builds the daemon, area by area (BillingDaemon+Areas.swift, BillingDaemon+Builders.swift).
    /// Throws ``SettingsError`` for settings that cannot work together (no webhook secret outside
    /// local mode, an unreadable App Store key or root), and ``PlanCatalogLoadError`` for a plan
    /// catalog that does not load.
    public init(settings: Settings, store: any LedgerStore, options: Options = .init(), logger: Logger) async throws {
        // The catalog first: a catalog error must not print after the local mode banner.
        let catalog = try settings.plans.catalogPath.map { path throws(PlanCatalogLoadError) in try PlanCatalogLoader.load(path: path) }
        // Every transaction that changes the ledger keeps each touched user's announced view
        // current, even without an app webhook URL, so that turning webhooks on later announces
        // only later changes.
        let store = store.announcing(.serviceViews(catalog: catalog ?? .freeOnly, endpoints: settings.outbox.webhookURLs))
        let webhook = try await StripeWebhookParts.build(settings.stripe, local: options.local, store: store, logger: logger)

        let metrics = BillingMetrics()
        let space = StoreSpaceWatch(store: store, metrics: metrics, logger: logger, hint: Self.spaceHint(settings))
        let revenue = RevenueMetricsReader(
            facts: store.metrics,
            configuration: .init(scope: Self.scope(settings), catalog: catalog ?? .freeOnly, exchangeRates: settings.console.exchangeRates))
        // The console's overview figures ride on the gauges' recomputations (after the applier
        // applied, at most every few seconds, and on their timer): one refresh of the metrics
        // index and one overview now serve both. Local mode's generated token turns it on later.
        let overviewFigures = settings.console.tokens.isEmpty && options.local == nil ? nil : ConsoleOverviewFigures(reader: revenue)
        let gauges = RevenueGauges(reader: revenue, consoleOverview: overviewFigures, metrics: metrics, logger: logger)
        let applier = ApplierService(
            applier: store.applier(.init(apiVersion: settings.stripe.apiVersion)), inbox: store.inbox, metrics: metrics, logger: logger,
            space: space, didApply: { gauges.changed() })
        let outbox = try OutboxParts.build(settings.outbox, store: store, metrics: metrics, space: space, logger: logger)
        // A group commit that left deliveries queued, and reconcile storing recovered events, wake
        // the applier instead of leaving them to its next look; one that queued outbound events
        // wakes the sender.
        let committer = GroupCommitter(applier: applier.inboxApplier, didCommit: { [sender = outbox.sender] ingested in
            applier.ingested(ingested)
            sender?.wake()
        })
        // What can fail on the App Store settings, before anything is started.
        var appStore = try await AppStoreParts.build(
            settings.appStore, local: webhook.isLocal ? options.local : nil, store: store, logger: logger)
        // Local mode's stand-ins first in the group, so that they stop last.
        let local = try await LocalModeParts.start(
            options.local, settings: settings, secretIsLocal: webhook.isLocal, appStoreClients: appStore.clients,
            localRoot: appStore.localRoot, verifier: appStore.verifier, catalog: catalog ?? .freeOnly, store: store, logger: logger)
        let stripe = StripeAPIParts.build(settings.stripe, local: local.stripe, metrics: metrics, logger: logger)
        appStore.adopt(local.appStore, logger: logger)

        var services = local.services + [.init(service: space), .init(service: applier), .init(service: gauges)] + outbox.services
        if let responder = appStore.consumptionResponder(
            settings.appStore, store: store, catalog: catalog, usageScope: Self.scope(settings), metrics: metrics, space: space, logger: logger)
        {
            services.append(.init(service: responder))
        }
        if let scheduler = Self.reconcileScheduler(
            settings, store: store, stripe: stripe.client, livemode: stripe.livemode, appStoreClients: appStore.clients,
            applier: applier, catalog: catalog, initialDelay: options.schedulerInitialDelay, metrics: metrics, logger: logger)
        {
            services.append(.init(service: scheduler))
        }
        if let usageReport = Self.usageReportScheduler(
            settings, store: store, stripe: stripe.client, livemode: stripe.livemode, metrics: metrics, logger: logger)
        {
            services.append(.init(service: usageReport))
        }
        if let days = settings.database.retentionBodiesDays {
            services.append(.init(service: BodyCompactionService(store: store, days: days, space: space, logger: logger)))
        }

        var dependencies = BillingServerDependencies(
            store: store, verifier: webhook.verifier(settings.stripe), committer: committer, metrics: metrics,
            benchmarkRoutes: options.benchmarkRoutes, apiTokens: settings.serviceAPI.tokens)
        dependencies.webhook.storeDeadline = options.storeDeadline
        dependencies.metricsToken = settings.metrics.token
        dependencies.consoleTokens = settings.console.tokens
        dependencies.labeledAPITokens = settings.serviceAPI.labeledTokens
        // Local mode without console tokens: a generated one, printed with the console's URL.
        var localConsoleToken: String?
        if let local = options.local, settings.console.tokens.isEmpty {
            let token = try await local.consoleToken(in: store)
            dependencies.consoleTokens = [ConsoleToken(label: "local", token: token)]
            localConsoleToken = token
        }
        dependencies.console.secureCookie = settings.console.secureCookie
        dependencies.console.overviewFigures = overviewFigures
        dependencies.console.outboxEndpoints = settings.outbox.webhookURLs
        dependencies.console.inboxRequeued = { applier.wake() }
        dependencies.console.outboxRequeued = { [sender = outbox.sender] in sender?.wake() }
        if !dependencies.consoleTokens.isEmpty,
            let reconciler = Self.stripeReconciler(
                store: store, stripe: stripe.client, livemode: stripe.livemode, applier: applier, catalog: catalog, logger: logger)
        {
            let runner = ConsoleReconcileRunner(reconciler: reconciler, logger: logger)
            dependencies.console.reconcile = runner
            services.append(.init(service: runner))
        }
        dependencies.exchangeRates = settings.console.exchangeRates
        dependencies.rejections = RejectionLog(logger: logger)
        dependencies.space = space
        dependencies.stripe = stripe.serviceClient
        dependencies.scope = Self.scope(settings)
        appStore.addRoutes(to: &dependencies, settings.appStore, logger: logger)
        if let catalog { dependencies.plans = catalog }
        Self.noteUnreportedMeters(dependencies.plans, stripe: stripe.client, settings: settings, logger: logger)

        var startup = Self.startupSummary(
            settings, secrets: webhook.secrets.count, local: webhook.isLocal, catalog: catalog, stripe: stripe.client != nil,
            appStore: appStore.verifier != nil, appStoreAPI: appStore.clients.keys.map(\.rawValue).sorted())
        if let localStripe = local.stripe { startup["stripe_api"] = "local fake at \(localStripe.baseURL)" }
        if let localAppStore = local.appStore { startup["app_store_api"] = "local fake at \(localAppStore.baseURL)" }
        let application = Self.application(
            settings.server, dependencies: dependencies, startup: startup, local: local, webhookSecret: webhook.secrets[0],
            localConsoleToken: localConsoleToken, onListening: options.onListening, logger: logger)
        // Reverse start order on shutdown: the server stops taking deliveries first, then the
        // usage report stops sending (the calls in flight are recorded), then the scheduler stops
        // its run at the next page, then the applier finishes its batch; the store closes last
        // (``Options/closesStore``), or the caller closes it.
        services.append(.init(service: application))
        // Last, so the first told: it notes when the stop began.
        let shutdownWatch = ShutdownWatch()
        services.append(.init(service: shutdownWatch))
        if options.closesStore { services.insert(.init(service: LedgerStoreService(store: store)), at: 0) }
        self.metrics = metrics
        self.startup = startup
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: options.gracefulShutdownSignals, logger: logger)
        // A stop ends even while the database is unreachable: a service still waiting on it
        // after the grace is cancelled (its work is redone after the restart: nothing it held
        // was acknowledged), and one that ignores cancellation ends the process.
        configuration.maximumGracefulShutdownDuration = Self.shutdownGrace
        configuration.maximumCancellationDuration = options.cancellationLimit
        self.group = ServiceGroup(configuration: configuration)
        self.shutdownWatch = shutdownWatch
        self.logger = logger
    }

    /// The mode the service API answers in: the Stripe key's; an App Store-only app (no Stripe
    /// key) that accepts Production data answers in live mode.
    public static func scope(_ settings: Settings) -> ServiceScope {
        let appStoreLive = settings.stripe.apiKey == nil && settings.appStore.bundleID != nil && settings.appStore.appAppleID != nil
            && settings.appStore.environments.contains(.production)
        return .forAPIKey(isLive: settings.stripe.apiKeyIsLive ?? (appStoreLive ? true : nil))
    }

    /// Where an operator frees space when the store is full, for ``StoreSpaceWatch``'s error line.
    static func spaceHint(_ settings: Settings) -> String {
        if let postgres = settings.database.postgres {
            return "free space on the PostgreSQL server's data disk (\(postgres.redacted)), or raise its quota"
        }
        let directory = URL(fileURLWithPath: settings.database.sqlitePath).standardizedFileURL.deletingLastPathComponent().path
        return "free space on the disk holding \(directory) (the ledger, its -wal file and backups written there), e.g. `df -h \(directory)`"
    }

    /// Says when the catalog's Stripe meters will not be reported by serve.
    static func noteUnreportedMeters(_ plans: PlanCatalog, stripe: StripeClient?, settings: Settings, logger: Logger) {
        guard plans.meters.contains(where: { $0.stripeMeter != nil }) else { return }
        if stripe == nil {
            logger.warning("meters with stripe_meter are in the plan catalog but STRIPE_API_KEY is not set: their usage is recorded and waits to be reported")
        } else if settings.usage.reportInterval == nil {
            logger.notice("BILLINGD_USAGE_REPORT_INTERVAL is off: usage is not reported to Stripe Billing Meters by serve; run `billingd usage report` from cron")
        }
    }

    /// The HTTP server: the routes of `dependencies` on `settings`' address and limits. Once it
    /// listens it logs the start-up line, points local mode's stand-ins at it, and calls
    /// `onListening`.
    static func application(
        _ settings: Settings.Server, dependencies: BillingServerDependencies, startup: [String: String], local: LocalModeParts,
        webhookSecret: String, localConsoleToken: String? = nil, onListening: @escaping @Sendable (Int) async -> Void, logger: Logger
    ) -> some Service {
        // Where this machine reaches the server: loopback when it listens on every address.
        let reachableHost = ["0.0.0.0", "::", "[::]"].contains(settings.host) ? "127.0.0.1" : settings.host
        let (localStripe, localAppStore) = (local.stripe, local.appStore)
        return BillingApplication.application(
            dependencies, host: settings.host, port: settings.port, limits: settings.connectionLimits, logger: logger
        ) { channel in
            let port = channel.localAddress?.port ?? settings.port
            var metadata = startup.mapValues { Logger.MetadataValue.string($0) }
            metadata["address"] = "http://\(settings.host):\(port)"
            logger.notice("billingd listening", metadata: metadata)
            if let localConsoleToken {
                // Local mode's own generated token, for a newcomer to open the console at once.
                logger.warning(
                    "LOCAL MODE: operator console at http://\(reachableHost):\(port)/console; sign in with the local console token \(localConsoleToken) (generated and kept in the database; set BILLINGD_CONSOLE_TOKENS for your own)")
            }
            await localStripe?.deliver(to: "http://\(reachableHost):\(port)/webhooks/stripe", secret: webhookSecret)
            await localAppStore?.deliver(to: "http://\(reachableHost):\(port)/webhooks/appstore")
            await onListening(port)
        }
    }

    /// Runs every service until a graceful-shutdown signal, ``shutdown()`` or cancellation, and
    /// returns once each has stopped in reverse start order.
    public func run() async throws {
        try await group.run()
        if let began = shutdownWatch.began, ContinuousClock.now - began >= Self.shutdownGrace {
            logger.warning(
                "the stop took its whole grace and cancelled the work still waiting",
                metadata: ["grace": "\(Self.shutdownGrace)", "hint": "was the database reachable? nothing cancelled had been acknowledged"])
        }
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
            "metrics_api": settings.console.tokens.isEmpty ? "off (no BILLINGD_CONSOLE_TOKENS)" : "on, \(settings.console.tokens.count) token(s)",
            "console": settings.console.tokens.isEmpty ? (local ? "on at /console, local token" : "off (no BILLINGD_CONSOLE_TOKENS)") : "on at /console",
            "plans": catalog.map { "\(settings.plans.catalogPath ?? "") (\($0.tiers.count) tiers, \($0.meters.count) meters)" } ?? "none: one free tier",
            "stripe_api": stripe ? (settings.stripe.apiKeyIsLive == true ? "live key" : "test key") : "off (no STRIPE_API_KEY)",
            "app_store": appStore ? "on (\(settings.appStore.environments.map(\.rawValue).sorted().joined(separator: ",")))" : "off",
            "app_store_api": appStoreAPI.isEmpty ? "off" : appStoreAPI.joined(separator: ","),
        ]
        let scheduled = stripe || !appStoreAPI.isEmpty
        summary["reconcile"] = scheduled ? every(settings.reconcile.interval) : "off (no API credentials)"
        summary["events_sweep"] = stripe ? every(settings.stripe.eventsSweepInterval) : "off"
        summary["usage_report"] = stripe ? every(settings.usage.reportInterval) : "off"
        summary["refund_requests"] = appStoreAPI.isEmpty
            ? "off (no App Store API key)"
            : "answered (\(appStoreAPI.joined(separator: ",")); refund preference \(settings.appStore.refundPreference))"
        summary["app_webhooks"] = settings.outbox.webhookURLs.isEmpty ? "off" : "\(settings.outbox.webhookURLs.count) endpoint(s)"
        return summary
    }
}

/// Notes when a graceful shutdown began (``BillingDaemon/run()`` says when it took the whole
/// grace).
final class ShutdownWatch: Service, Sendable {
    private let state = Mutex<ContinuousClock.Instant?>(nil)
    var began: ContinuousClock.Instant? { state.withLock { $0 } }

    func run() async throws {
        try? await gracefulShutdown()
        state.withLock { $0 = .now }
    }
}
