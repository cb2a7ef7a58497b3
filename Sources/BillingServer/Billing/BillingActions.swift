import APITransport
import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Logging
import StripeAPI

/// The writes the service API and the CLI make in Stripe for an app user: start a Checkout
/// session, open the Customer Portal, cancel the subscription. Each applies Stripe's answer to
/// the ledger under the version guard before returning, so that a read right after sees it.
///
/// Throws ``APIError`` for everything a client can act on (bad plan, already subscribed,
/// Stripe's refusals and outages); other errors are the ledger's.
public struct BillingActions: Sendable {
    /// A created Checkout session: where to send the buyer, and until when the link works.
    public struct CheckoutSessionResult: Sendable, Equatable {
        public let id: String
        public let url: String
        /// Unix seconds.
        public let expiresAt: Int64?
        public let customer: String
        /// Whether billingd created the customer for this session.
        public let customerCreated: Bool
        /// The price sold, after resolving the plan or lookup key.
        public let price: String
    }

    /// A created Customer Portal session.
    public struct PortalSessionResult: Sendable, Equatable, Decodable {
        public let id: String
        public let url: String
    }

    let ledger: any UserLedgerStore
    let reconciliation: any LedgerReconciliationStore
    let client: StripeClient
    let customers: CustomerDirectory
    let catalog: PlanCatalog
    let now: @Sendable () -> Date

    /// - Parameters:
    ///   - catalog: decides what `plan` means and which subscriptions already grant it.
    ///   - now: the time plan resolution judges subscriptions at.
    public init(store: any LedgerStore, client: StripeClient, catalog: PlanCatalog, now: @escaping @Sendable () -> Date = Date.init) {
        ledger = store.users
        reconciliation = store.reconciliation
        self.client = client
        customers = CustomerDirectory(store: store, client: client)
        self.catalog = catalog
        self.now = now
    }

    private var nowSeconds: Int64 { Int64(now().timeIntervalSince1970) }

    // MARK: - Checkout

    /// Creates a subscription-mode Checkout session for the user, creating their customer first
    /// if they have none.
    ///
    /// Refused with 409 `already_subscribed` when one of the user's subscriptions already grants
    /// the tier the price grants (or, for a price in no tier, already holds that price): a second
    /// subscription would bill twice. Another tier is allowed; changing plans belongs in the
    /// Customer Portal.
    public func checkout(_ input: CheckoutInput, logger: Logger) async throws -> CheckoutSessionResult {
        let account = input.scope.account.isEmpty ? nil : input.scope.account
        let price = try await resolve(input.plan, account: account, scope: input.scope)
        let billing = try await ledger.billing(of: input.user, in: input.scope)
        try refuseIfSubscribed(billing, to: price, user: input.user)

        let customer: CustomerDirectory.Found
        if let known = billing.primaryCustomer {
            customer = .init(id: known.id, created: false)
        } else {
            customer = try await customers.customer(of: input.user, in: input.scope, email: input.email, logger: logger)
        }

        let parameters = Self.checkoutParameters(input, price: price.id, customer: customer.id)
        let response: StripeResponse
        do {
            response = try await client.send(
                .post, "/v1/checkout/sessions", parameters: parameters, account: account,
                idempotencyKey: input.idempotencyKey.map {
                    StripeIdempotencyKeys.forwarded($0, action: "checkout", user: input.user, scope: input.scope)
                })
        } catch {
            throw APIError.stripe(error, doing: "create the Checkout session")
        }
        let snapshot = try decode(.checkoutSession, response, what: "Checkout session")
        guard case .checkoutSession(let session) = snapshot.object, let url = session.url else {
            throw APIError(
                .badGateway, code: "stripe_bad_answer", message: "Stripe created Checkout session \(snapshot.objectID) without a URL.",
                stripeRequestID: response.requestID)
        }
        await record(snapshot, scope: input.scope, logger: logger)
        logger.info(
            "created Checkout session",
            metadata: ["session": "\(session.id)", "customer": "\(customer.id)", "price": "\(price.id)", "scope": "\(input.scope)"])
        return CheckoutSessionResult(
            id: session.id, url: url, expiresAt: session.expiresAt, customer: customer.id, customerCreated: customer.created,
            price: price.id)
    }

    /// The form billingd sends to `POST /v1/checkout/sessions`.
    static func checkoutParameters(_ input: CheckoutInput, price: String, customer: String) -> StripeParameters {
        var parameters: StripeParameters = [
            "mode": "subscription",
            "customer": .string(customer),
        ]
        // Stripe takes at most 200 characters here; longer user ids are tied by metadata alone.
        if input.user.count <= 200 { parameters["client_reference_id"] = .string(input.user) }
        parameters["line_items"] = [["price": .string(price), "quantity": .integer(input.quantity)]]
        parameters["success_url"] = .string(input.successURL)
        parameters["cancel_url"] = .string(input.cancelURL)
        if let allow = input.allowPromotionCodes { parameters["allow_promotion_codes"] = .bool(allow) }
        var subscriptionData: StripeParameters = [:]
        if let days = input.trialDays { subscriptionData["trial_period_days"] = .integer(days) }
        subscriptionData["metadata"] = ["app_user_id": .string(input.user)]
        parameters["subscription_data"] = .dictionary(subscriptionData)
        parameters["metadata"] = ["app_user_id": .string(input.user)]
        return parameters
    }

    /// A price Stripe confirmed exists, with the tier it grants.
    struct ResolvedPrice: Sendable {
        let id: String
        let lookupKey: String?
        let product: String?
        let tier: PlanTier?
    }

    /// The Stripe price a plan choice means, read from Stripe (so that a lookup key moved to a
    /// new price, or a price archived since, is seen now), checked active and recurring.
    func resolve(_ choice: PlanChoice, account: String?, scope: ServiceScope) async throws -> ResolvedPrice {
        let fetched: Price
        switch choice {
        case .tier(let id, let interval):
            guard let tier = catalog.tier(id: id) else {
                let forSale = catalog.tiers.filter { !$0.prices.isEmpty }.map(\.id)
                throw APIError(
                    .badRequest, code: "unknown_plan",
                    message: "No tier of the plan catalog has the id \"\(CheckoutInput.printable(id))\"; tiers for sale: \(forSale.isEmpty ? "none (set BILLINGD_PLANS)" : forSale.joined(separator: ", ")).")
            }
            let priced = tier.prices.filter { $0.interval != nil }
            guard !priced.isEmpty else {
                throw APIError(
                    .badRequest, code: "plan_not_for_sale",
                    message: "Tier \(tier.id) has no price with an interval in the plan catalog, so there is nothing to sell; it is the free tier or kept for existing subscribers.")
            }
            let chosen: PlanPrice
            if let interval {
                guard let match = tier.price(for: interval) else {
                    throw APIError(
                        .badRequest, code: "unknown_plan",
                        message: "Tier \(tier.id) has no \(interval.rawValue)ly price in the plan catalog; it is sold by \(Set(priced.compactMap { $0.interval?.rawValue }).sorted().joined(separator: ", ")).")
                }
                chosen = match
            } else {
                chosen = tier.price(for: .month) ?? priced[0]
            }
            if let priceID = chosen.id {
                fetched = try await price(id: priceID, account: account, scope: scope)
            } else if let lookupKey = chosen.lookupKey {
                fetched = try await price(lookupKey: lookupKey, account: account, scope: scope)
            } else {
                throw APIError(.badRequest, code: "plan_not_for_sale", message: "Tier \(tier.id)'s price names neither an id nor a lookup key.")
            }
        case .price(let id):
            fetched = try await price(id: id, account: account, scope: scope)
        case .lookupKey(let key):
            fetched = try await price(lookupKey: key, account: account, scope: scope)
        }
        guard fetched.active != false else {
            throw APIError(
                .badRequest, code: "price_inactive",
                message: "Price \(fetched.id) is archived (inactive) in Stripe, and Checkout sells only active prices. Activate it, or point the plan catalog or the request at its replacement.")
        }
        guard fetched.recurring != nil || fetched.type == "recurring" else {
            throw APIError(
                .badRequest, code: "price_not_recurring",
                message: "Price \(fetched.id) is a one-time price; a subscription Checkout session needs a recurring price.")
        }
        let tier = catalog.tier(price: fetched.id, lookupKey: fetched.lookupKey, product: fetched.product?.id)
        return ResolvedPrice(id: fetched.id, lookupKey: fetched.lookupKey, product: fetched.product?.id, tier: tier)
    }

    private func price(id: String, account: String?, scope: ServiceScope) async throws -> Price {
        let response: StripeResponse
        do {
            response = try await client.send(.get, "/v1/prices/\(id)", account: account)
        } catch {
            if error.isMissingResource {
                throw APIError(
                    .badRequest, code: "unknown_price", message: "Stripe has no price \(id) in \(scope).", stripeRequestID: error.requestID)
            }
            throw APIError.stripe(error, doing: "read price \(id)")
        }
        guard case .price(let price) = try decode(.price, response, what: "price").object else {
            throw APIError(.badGateway, code: "stripe_bad_answer", message: "Stripe's answer for price \(id) is not a price.")
        }
        return price
    }

    private func price(lookupKey: String, account: String?, scope: ServiceScope) async throws -> Price {
        let page: StripeListPage
        do {
            let response = try await client.send(
                .get, "/v1/prices", parameters: ["lookup_keys": [.string(lookupKey)], "limit": 1], account: account)
            page = try StripeListPage(response: response)
        } catch {
            throw APIError.stripe(error, doing: "look up the price with lookup key \(lookupKey)")
        }
        guard let object = page.objects.first else {
            throw APIError(
                .badRequest, code: "unknown_price",
                message: "No Stripe price in \(scope) has the lookup key \"\(CheckoutInput.printable(lookupKey))\".",
                stripeRequestID: page.requestID)
        }
        let snapshot: LedgerSnapshot
        do {
            snapshot = try APISnapshot.decode(.price, json: object.bytes, fetchedAt: page.date ?? nowSeconds, requestID: page.requestID)
        } catch {
            throw APIError(
                .badGateway, code: "stripe_bad_answer", message: "Stripe's price for lookup key \(lookupKey) could not be read: \(error)",
                stripeRequestID: page.requestID)
        }
        guard case .price(let price) = snapshot.object else {
            throw APIError(.badGateway, code: "stripe_bad_answer", message: "Stripe's answer for lookup key \(lookupKey) is not a price.")
        }
        return price
    }

    /// 409 when a subscription of the user already grants what the price would.
    func refuseIfSubscribed(_ billing: UserBilling, to price: ResolvedPrice, user: String) throws {
        let now = nowSeconds
        for subscription in billing.subscriptions {
            let alone = catalog.resolve([subscription], now: now)
            guard alone.entitled else { continue }
            let holds: Bool
            let what: String
            if let tier = price.tier {
                holds = alone.plan == tier.id
                what = "the \(tier.name) plan (\(tier.id))"
            } else {
                holds = subscription.items.contains { $0.price == price.id }
                what = "price \(price.id)"
            }
            guard holds else { continue }
            throw APIError(
                .conflict, code: "already_subscribed",
                message: "This user already has \(what) through subscription \(subscription.id) (\(alone.why.rawValue)). To change plan, quantity or payment method, or to renew a canceling subscription, open the Customer Portal (POST /v1/portal-sessions).")
        }
    }

    // MARK: - Customer Portal

    /// Creates a Customer Portal session for the user's customer; 404 `user_not_found` when the
    /// user has none (they never checked out).
    public func portal(_ input: PortalInput, logger: Logger) async throws -> PortalSessionResult {
        guard let customer = try await ledger.customers(of: input.user, in: input.scope).first else {
            throw APIError(
                .notFound, code: "user_not_found",
                message: "No Stripe customer is tied to this app user in \(input.scope) (by metadata.app_user_id or a Checkout client_reference_id); start a Checkout session first.")
        }
        let response: StripeResponse
        do {
            response = try await client.send(
                .post, "/v1/billing_portal/sessions", parameters: Self.portalParameters(input, customer: customer.id),
                account: input.scope.account.isEmpty ? nil : input.scope.account,
                idempotencyKey: input.idempotencyKey.map {
                    StripeIdempotencyKeys.forwarded($0, action: "portal", user: input.user, scope: input.scope)
                })
        } catch {
            throw APIError.stripe(error, doing: "create the Customer Portal session")
        }
        do {
            return try response.decode(PortalSessionResult.self)
        } catch {
            throw APIError.stripe(error, doing: "create the Customer Portal session")
        }
    }

    /// The form billingd sends to `POST /v1/billing_portal/sessions`.
    static func portalParameters(_ input: PortalInput, customer: String) -> StripeParameters {
        ["customer": .string(customer), "return_url": .string(input.returnURL)]
    }

    // MARK: - Cancel

    /// Cancels the subscription that gives the user their access (the one plan resolution picks),
    /// at the end of the paid period by default or at once, and answers the user's subscription
    /// view from the ledger with Stripe's answer applied.
    public func cancel(_ input: CancelInput, logger: Logger) async throws -> SubscriptionView {
        let billing = try await ledger.billing(of: input.user, in: input.scope)
        let resolution = billing.resolve(catalog, now: nowSeconds)
        guard resolution.entitled, let subscription = resolution.subscription else {
            throw APIError(
                .notFound, code: "no_subscription",
                message: resolution.grant != nil && resolution.entitled
                    ? "This user's access comes from promotional grant \(resolution.grant?.id ?? ""), not a subscription; revoke it with DELETE /v1/users/{user}/grants/{id}."
                    : billing.isKnown
                    ? "This user has no subscription that gives access now (\(resolution.why.rawValue)), so there is nothing to cancel."
                    : "No Stripe customer is tied to this app user in \(input.scope), so there is no subscription to cancel.")
        }
        let account = input.scope.account.isEmpty ? nil : input.scope.account
        let path = "/v1/subscriptions/\(subscription.id)"
        let response: StripeResponse
        do {
            if input.atPeriodEnd {
                response = try await client.send(
                    .post, path, parameters: Self.cancelParameters(atPeriodEnd: true), account: account,
                    idempotencyKey: input.idempotencyKey.map {
                        StripeIdempotencyKeys.forwarded($0, action: "cancel", user: input.user, scope: input.scope)
                    })
            } else {
                response = try await client.send(.delete, path, account: account)
            }
        } catch {
            if error.isMissingResource {
                throw APIError(
                    .notFound, code: "no_subscription",
                    message: "Stripe no longer has subscription \(subscription.id) (the ledger is behind; a reconcile will catch up): \(error.message)",
                    stripeRequestID: error.requestID)
            }
            throw APIError.stripe(error, doing: "cancel subscription \(subscription.id)")
        }
        let snapshot = try decode(.subscription, response, what: "subscription")
        let applied = await record(snapshot, scope: input.scope, logger: logger)
        var after = try await ledger.billing(of: input.user, in: input.scope)
        if !applied, case .subscription(let canceled) = snapshot.object {
            // The ledger could not take it now; answer with Stripe's state all the same.
            after = after.replacing(LedgerSubscription(canceled))
        }
        logger.info(
            "canceled subscription",
            metadata: ["subscription": "\(subscription.id)", "at_period_end": "\(input.atPeriodEnd)", "scope": "\(input.scope)"])
        return SubscriptionView(billing: after, catalog: catalog, now: nowSeconds)
    }

    /// The form billingd sends to `POST /v1/subscriptions/{id}` to cancel at period end.
    static func cancelParameters(atPeriodEnd: Bool) -> StripeParameters {
        ["cancel_at_period_end": .bool(atPeriodEnd)]
    }

    // MARK: - Ledger

    private func decode(_ kind: LedgerObjectKind, _ response: StripeResponse, what: String) throws -> LedgerSnapshot {
        do {
            return try APISnapshot.decode(kind, response: response)
        } catch {
            throw APIError(
                .badGateway, code: "stripe_bad_answer", message: "Stripe's answer (a \(what)) could not be read: \(error)",
                stripeRequestID: response.requestID)
        }
    }

    /// Writes an object Stripe just answered with to the ledger under the version guard; false
    /// (logged) when the ledger could not take it, the webhook will bring it later.
    @discardableResult
    private func record(_ snapshot: LedgerSnapshot, scope: ServiceScope, logger: Logger) async -> Bool {
        do {
            try await reconciliation.applyFetched(snapshot, account: scope.account, livemode: scope.livemode)
            return true
        } catch {
            logger.warning(
                "could not write Stripe's answer to the ledger; its webhook will",
                metadata: ["object": "\(snapshot.objectID)", "error": "\(error)"])
            return false
        }
    }
}
