import BillingCore
import BillingStore
import Foundation
import Hummingbird
import Logging
import Synchronization

/// The per-user reads of the service API, answered from the ledger alone (no Stripe call):
///
/// - `GET /v1/users/{user}/subscription`: ``SubscriptionView``
/// - `GET /v1/users/{user}/entitlements`: ``EntitlementsView``
/// - `GET /v1/users/{user}/invoices?limit=&starting_after=`: ``InvoiceListView``
/// - `GET /v1/users/{user}/payment-methods`: ``PaymentMethodListView``
///
/// A user billingd knows no customer of has never paid: the subscription and entitlements
/// answer the default tier (200, `subscribed: false`), because "is this user Pro?" has an
/// answer for every user the app has. Invoices and payment methods answer 404 `user_not_found`
/// for them: a billing history can only be asked of a customer, and an empty list would hide a
/// wrong user id.
public struct UserController: Sendable {
    /// What the user endpoints answer from.
    public struct Configuration: Sendable {
        public var catalog: PlanCatalog
        /// The mode and account answered when a request names no `account`.
        public var scope: ServiceScope
        public var now: @Sendable () -> Date

        public init(catalog: PlanCatalog = .freeOnly, scope: ServiceScope = .test, now: @escaping @Sendable () -> Date = Date.init) {
            self.catalog = catalog
            self.scope = scope
            self.now = now
        }
    }

    let ledger: any UserLedgerStore
    let usage: any UsageStore
    let configuration: Configuration
    let unmappedPrices: UnmappedPriceWarnings

    public init(store: any LedgerStore, configuration: Configuration) {
        ledger = store.users
        usage = store.usage
        self.configuration = configuration
        unmappedPrices = UnmappedPriceWarnings()
    }

    public func addRoutes<Methods: RouterMethods>(to router: Methods) {
        router.get("users/:user/subscription") { request, context in
            let resolved = try await resolve(request, context: context, stripeEntitlements: false)
            return SubscriptionView(user: resolved.request.user, scope: resolved.request.scope, resolution: resolved.resolution).response()
        }
        router.get("users/:user/entitlements") { request, context in
            let resolved = try await resolve(request, context: context, stripeEntitlements: true)
            let user = resolved.request
            let usage = try await UsageController.states(
                usage, catalog: configuration.catalog, of: user.user, in: user.scope,
                resolution: resolved.resolution, now: Int64(configuration.now().timeIntervalSince1970))
            return EntitlementsView(user: user.user, scope: user.scope, resolution: resolved.resolution, usage: usage).response()
        }
        router.get("users/:user/invoices") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope, allowed: ["limit", "starting_after"])
            let parameters = request.uri.queryParameters
            let limit = try UserRequest.limit(parameters)
            let startingAfter = try UserRequest.startingAfter(parameters)
            let page: UserInvoicePage?
            do {
                page = try await ledger.invoices(of: user.user, in: user.scope, limit: limit, startingAfter: startingAfter)
            } catch UserLedgerError.unknownInvoice(let id) {
                throw APIError(
                    .badRequest, code: "invalid_parameter",
                    message: "starting_after=\(id) is not an invoice of this user; use the id of the last invoice of the previous page.")
            }
            guard let page else { throw Self.userNotFound(user) }
            return InvoiceListView(user: user.user, scope: user.scope, page: page).response()
        }
        router.get("users/:user/payment-methods") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            guard let methods = try await ledger.paymentMethods(of: user.user, in: user.scope) else {
                throw Self.userNotFound(user)
            }
            return PaymentMethodListView(user: user.user, scope: user.scope, methods: methods).response()
        }
    }

    /// The user's billing and access, for the subscription and entitlements endpoints.
    func resolve(
        _ request: Request, context: some RequestContext, stripeEntitlements: Bool
    ) async throws -> (request: UserRequest, resolution: PlanResolution) {
        let user = try UserRequest(request, context: context, scope: configuration.scope)
        let billing = try await ledger.billing(of: user.user, in: user.scope, stripeEntitlements: stripeEntitlements)
        let resolution = billing.resolve(configuration.catalog, now: Int64(configuration.now().timeIntervalSince1970))
        if let price = resolution.unmappedPrice, unmappedPrices.isFirst(price) {
            context.logger.warning(
                "a subscription grants access through a price that no tier of the plan catalog names; the user gets plan null with the default tier's features and limits. Add the price (or its lookup key or product) to BILLINGD_PLANS.",
                metadata: ["price": "\(price)", "subscription": "\(resolution.subscription?.id ?? "")"])
        }
        return (user, resolution)
    }

    static func userNotFound(_ request: UserRequest) -> APIError {
        APIError(
            .notFound, code: "user_not_found",
            message: "No Stripe customer is tied to this app user in \(request.scope) (by metadata.app_user_id or a Checkout client_reference_id).")
    }
}

/// Remembers which unmapped prices were already logged, so that each is warned about once per
/// process rather than on every read.
final class UnmappedPriceWarnings: Sendable {
    private let seen = Mutex<Set<String>>([])
    /// Beyond this many distinct prices, stop remembering (and warning): the log has said enough.
    private static let capacity = 1000

    /// Whether `price` is seen for the first time (and should be logged).
    func isFirst(_ price: String) -> Bool {
        seen.withLock { seen in
            guard seen.count < Self.capacity else { return false }
            return seen.insert(price).inserted
        }
    }
}
