import BillingStore
import Hummingbird
import StripeAPI

/// The service API for the app's backend, under `/v1/` behind a bearer token. It is off — its
/// routes are not registered at all — when no token is configured (`BILLINGD_API_TOKENS`).
public struct ServiceAPI: Sendable {
    let store: any LedgerStore
    let tokens: [String]
    let export: InvoiceExportController.Configuration
    let users: UserController.Configuration
    /// Checkout, portal and cancel call Stripe with it; nil (no STRIPE_API_KEY) makes them 503.
    let stripe: StripeClient?
    let appStore: AppStoreController.Configuration
    /// Count and log the requests refused for their token.
    let metrics: BillingMetrics
    let rejections: RejectionLog

    public init(
        store: any LedgerStore, tokens: [String], metrics: BillingMetrics, rejections: RejectionLog,
        export: InvoiceExportController.Configuration = .init(), users: UserController.Configuration = .init(), stripe: StripeClient? = nil,
        appStore: AppStoreController.Configuration = .init(verifier: nil)
    ) {
        self.store = store
        self.tokens = tokens
        self.metrics = metrics
        self.rejections = rejections
        self.export = export
        self.users = users
        self.stripe = stripe
        self.appStore = appStore
    }

    /// Whether the API is on: at least one token is configured.
    public var isEnabled: Bool { !tokens.isEmpty }

    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        guard isEnabled else { return }
        let v1 = router.group("v1").add(middleware: BearerTokenMiddleware<Context>(tokens: tokens, metrics: metrics, rejections: rejections))
        InvoiceExportController(store: store, configuration: export).addRoutes(to: v1)
        UserController(store: store, configuration: users).addRoutes(to: v1)
        SessionController(store: store, stripe: stripe, configuration: users).addRoutes(to: v1)
        AppStoreController(store: store, configuration: appStore).addRoutes(to: v1)
        UsageController(store: store, configuration: users).addRoutes(to: v1)
    }
}
