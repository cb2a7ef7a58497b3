import AppStoreAPI
import BillingCore
import BillingStore
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import StripeAPI

/// Everything the HTTP server needs, built once by `serve` (or by a test).
public struct BillingServerDependencies: Sendable {
    public var store: any LedgerStore
    public var verifier: SignatureVerifier
    public var committer: GroupCommitter
    public var metrics: BillingMetrics
    public var webhook: WebhookController.Configuration
    /// Adds `POST /bench/noop`, the HTTP ceiling the ingest benchmark compares against.
    public var benchmarkRoutes: Bool
    public var now: @Sendable () -> Date
    /// When set, `GET /metrics` answers only with this bearer token.
    public var metricsToken: String?
    /// Bearer tokens of the service API under `/v1/`, with their labels; the API is off when empty.
    public var labeledAPITokens: [ConsoleToken]
    /// The service API's tokens alone (setting them drops the labels).
    public var apiTokens: [String] {
        get { labeledAPITokens.map(\.token) }
        set { labeledAPITokens = newValue.map { ConsoleToken(token: $0) } }
    }
    /// The plan catalog (`BILLINGD_PLANS`, see `PlanCatalogLoader`); just a free tier without one.
    public var plans: PlanCatalog
    /// The mode and account the service API answers from (see `ServiceScope.forAPIKey`).
    public var scope: ServiceScope
    /// Stripe for the service API's Checkout, portal and cancel; nil without `STRIPE_API_KEY`
    /// (those endpoints then answer 503 `stripe_not_configured`).
    public var stripe: StripeClient?
    /// Verifies App Store data; nil when App Store support is off (no `APPSTORE_BUNDLE_ID`):
    /// `POST /webhooks/appstore` is then not served.
    public var appStoreVerifier: AppStoreVerifier?
    /// Who keeps a purchase a second user restores (`APPSTORE_OWNERSHIP`).
    public var appStoreOwnership: AppStoreOwnershipRule = .keep
    /// App Store Server API clients by environment: restores by history and legacy receipts.
    public var appStoreClients: [AppStoreEnvironment: AppStoreClient] = [:]
    /// Checks that Apple signed a legacy receipt; without roots none verifies (and claims nothing).
    public var appStoreReceiptVerifier = AppStoreReceiptVerifier()
    /// Signs App Store offers (`APPSTORE_OFFER_*`, else the API key); nil: those endpoints answer 503.
    public var appStoreOfferSigner: AppStoreOfferSigner?
    /// Logs rejected requests, a flood of them in a few lines; the application runs it.
    public var rejections: RejectionLog
    /// Tracks a full store (503 `store_full`, `/readyz`, `billingd_store_full`); `serve` runs it
    /// as a service and shares it with the applier.
    public var space: StoreSpaceWatch
    /// Bearer tokens of the revenue metrics API under `/v1/metrics/`; the API is off when empty.
    public var consoleTokens: [ConsoleToken] = []
    /// The metrics' reporting currency and its rates; nil: figures per currency only.
    public var exchangeRates: ExchangeRates?
    /// What the metrics API reads; nil: the store's own facts (``LedgerStore/metrics``).
    public var metricsFacts: (any MetricsFactStore)?
    /// The operator console's parts beyond its tokens (``consoleTokens``; off without them).
    public var console = ConsoleParts()

    public init(
        store: any LedgerStore, verifier: SignatureVerifier, committer: GroupCommitter,
        metrics: BillingMetrics, webhook: WebhookController.Configuration = .init(),
        benchmarkRoutes: Bool = false, now: @escaping @Sendable () -> Date = Date.init, apiTokens: [String] = [],
        plans: PlanCatalog = .freeOnly, scope: ServiceScope = .test, stripe: StripeClient? = nil
    ) {
        self.store = store
        self.verifier = verifier
        self.committer = committer
        self.metrics = metrics
        self.webhook = webhook
        self.benchmarkRoutes = benchmarkRoutes
        self.now = now
        self.metricsToken = nil
        self.labeledAPITokens = apiTokens.map { ConsoleToken(token: $0) }
        self.plans = plans
        self.scope = scope
        self.stripe = stripe
        self.rejections = RejectionLog(logger: Logger(label: "billingd"))
        self.space = StoreSpaceWatch(store: store, metrics: metrics, logger: Logger(label: "billingd"))
    }
}

/// What the operator console (`/console`) needs beside the store and the console tokens.
public struct ConsoleParts: Sendable {
    /// `BILLINGD_CONSOLE_SECURE_COOKIE`.
    public var secureCookie = false
    /// The app's webhook endpoints (`BILLINGD_APP_WEBHOOK_URL`).
    public var outboxEndpoints: [String] = []
    /// Wakes the applier after a retry from the console.
    public var inboxRequeued: @Sendable () -> Void = {}
    /// Wakes the outbox sender after a retry or an enable from the console.
    public var outboxRequeued: @Sendable () -> Void = {}
    /// Runs the console's dry-run reconciles; nil without a Stripe key.
    public var reconcile: ConsoleReconcileRunner?
    /// Counts wrong tokens at the sign-in.
    public var throttle = ConsoleSignInThrottle()
    /// The overview's figures, kept current by serve's revenue gauges; nil: kept by the console's visits.
    public var overviewFigures: ConsoleOverviewFigures?

    public init() {}
}

/// Builds billingd's router and Hummingbird application.
public enum BillingApplication {
    /// The router with every route billingd serves.
    public static func router(_ dependencies: BillingServerDependencies) -> Router<BillingRequestContext> {
        let router = Router(context: BillingRequestContext.self)
        router.add(middleware: RequestMetricsMiddleware(metrics: dependencies.metrics))
        let routeMethods = RouteMethods()
        router.add(middleware: JSONErrorMiddleware(routes: routeMethods, space: dependencies.space))
        WebhookController(
            verifier: dependencies.verifier, committer: dependencies.committer, metrics: dependencies.metrics,
            rejections: dependencies.rejections, space: dependencies.space, configuration: dependencies.webhook, now: dependencies.now
        ).addRoutes(to: router)
        if let verifier = dependencies.appStoreVerifier {
            AppStoreWebhookController(
                verifier: verifier, committer: dependencies.committer, metrics: dependencies.metrics,
                rejections: dependencies.rejections, space: dependencies.space, configuration: dependencies.webhook, now: dependencies.now
            ).addRoutes(to: router)
        }
        HealthController(store: dependencies.store, space: dependencies.space).addRoutes(to: router)
        OpenAPIDocument.addRoutes(to: router)
        let users = UserController.Configuration(catalog: dependencies.plans, scope: dependencies.scope, now: dependencies.now)
        ServiceAPI(
            store: dependencies.store, tokens: dependencies.apiTokens, metrics: dependencies.metrics,
            rejections: dependencies.rejections, users: users, stripe: dependencies.stripe,
            appStore: .init(
                verifier: dependencies.appStoreVerifier, ownership: dependencies.appStoreOwnership, users: users,
                clients: dependencies.appStoreClients, receiptVerifier: dependencies.appStoreReceiptVerifier,
                offerSigner: dependencies.appStoreOfferSigner)
        ).addRoutes(to: router)
        GrantController(
            store: dependencies.store, tokens: CallerTokens(api: dependencies.labeledAPITokens, console: dependencies.consoleTokens),
            configuration: users, metrics: dependencies.metrics, rejections: dependencies.rejections
        ).addRoutes(to: router)
        TimelineController(
            store: dependencies.store, tokens: CallerTokens(api: dependencies.labeledAPITokens, console: dependencies.consoleTokens),
            configuration: users, metrics: dependencies.metrics, rejections: dependencies.rejections
        ).addRoutes(to: router)
        MetricsController(
            facts: dependencies.metricsFacts ?? dependencies.store.metrics,
            configuration: .init(
                tokens: dependencies.consoleTokens, serviceTokens: dependencies.apiTokens,
                reader: .init(scope: dependencies.scope, catalog: dependencies.plans, exchangeRates: dependencies.exchangeRates, now: dependencies.now)),
            metrics: dependencies.metrics, rejections: dependencies.rejections
        ).addRoutes(to: router)
        ConsoleController(
            store: dependencies.store, facts: dependencies.metricsFacts,
            configuration: .init(
                tokens: dependencies.consoleTokens, secureCookie: dependencies.console.secureCookie, scope: dependencies.scope,
                catalog: dependencies.plans, exchangeRates: dependencies.exchangeRates, outboxEndpoints: dependencies.console.outboxEndpoints,
                now: dependencies.now, inboxRequeued: dependencies.console.inboxRequeued, outboxRequeued: dependencies.console.outboxRequeued,
                reconcile: dependencies.console.reconcile, overviewFigures: dependencies.console.overviewFigures),
            throttle: dependencies.console.throttle, rejections: dependencies.rejections
        ).addRoutes(to: router)
        let metrics = dependencies.metrics
        let metricsToken = dependencies.metricsToken.map { Array($0.utf8) }
        router.get("/metrics") { request, _ in
            if let metricsToken {
                // BILLINGD_METRICS_TOKEN restricts the scrape to Prometheus's bearer token.
                guard let presented = BearerTokenMiddleware<BillingRequestContext>.bearerToken(request.headers[.authorization]),
                    BearerTokenMiddleware<BillingRequestContext>.constantTimeEquals(presented, metricsToken)
                else {
                    metrics.count("billingd_metrics_unauthorized_total")
                    throw APIError(
                        .unauthorized, code: "unauthorized",
                        message: "GET /metrics needs `Authorization: Bearer TOKEN` with BILLINGD_METRICS_TOKEN.")
                }
            }
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.render())))
        }
        if dependencies.benchmarkRoutes {
            router.post("/bench/noop") { request, _ in
                _ = try await request.body.collect(upTo: dependencies.webhook.maximumBodySize)
                return APIError.jsonResponse(status: .ok, body: ["received": true])
            }
        }
        routeMethods.set(router.routes.map { (path: $0.path.description, method: $0.method.rawValue) })
        return router
    }

    /// The application: the HTTP server plus the given long-running services, which it runs
    /// and shuts down with it.
    /// - Parameter limits: timeouts of idle and slow connections, and how many are served at once, in all and per client.
    public static func application(
        _ dependencies: BillingServerDependencies, host: String, port: Int, limits: ConnectionLimits = .init(),
        services: [any Service] = [], logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(dependencies),
            // The connection caps are the channel's own (ConnectionAdmission), not a cap on
            // accepting: a client beyond them must not wait in the backlog behind slow ones.
            server: .billingd(limits, metrics: dependencies.metrics),
            configuration: .init(address: .hostname(host, port: port), serverName: "billingd"),
            // The rejection log's summaries stop with the server.
            services: [dependencies.rejections] + services,
            onServerRunning: onServerRunning,
            logger: logger)
    }
}
