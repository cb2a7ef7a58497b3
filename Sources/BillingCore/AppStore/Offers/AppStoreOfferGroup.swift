/// Who may have a promotional offer of an App Store product (`eligibility` in the catalog),
/// judged from the ledger of the product's subscription group.
public enum PromotionalOfferEligibility: String, Sendable, Hashable, CaseIterable {
    /// Subscribed to the group now (a retention offer).
    case existing
    /// Subscribed to the group before, and not now (a win-back offer).
    case lapsed
    /// Anyone (Apple still decides what StoreKit shows).
    case any

    /// Whether a user of `standing` may have the offer.
    public func allows(_ standing: SubscriberStanding) -> Bool {
        switch self {
        case .existing: standing == .subscribed
        case .lapsed: standing == .lapsed
        case .any: true
        }
    }
}

/// Where a user stands in a subscription group, on either store.
public enum SubscriberStanding: String, Sendable, Hashable {
    /// A subscription of the group has not ended (paid, in a trial, in a grace period or in
    /// billing retry).
    case subscribed
    /// Every subscription of the group has ended.
    case lapsed
    /// No subscription of the group, ever.
    case never
}

/// What the catalog says of an App Store product's offers.
public struct AppStoreProductOffers: Sendable, Hashable {
    /// The promotional offer ids (App Store Connect's offer identifiers) billingd may sign.
    public var promotionalOffers: [String]
    public var eligibility: PromotionalOfferEligibility

    public init(promotionalOffers: [String] = [], eligibility: PromotionalOfferEligibility = .any) {
        self.promotionalOffers = promotionalOffers
        self.eligibility = eligibility
    }
}

/// One App Store transaction bought with an introductory offer (`offerType` 1), as the ledger
/// keeps it for a user.
public struct AppStoreIntroductoryOffer: Sendable, Hashable {
    public var environment: String
    public var originalTransactionID: String
    public var transactionID: String
    public var productID: String
    public var subscriptionGroupIdentifier: String?
    /// Unix milliseconds.
    public var purchaseDate: Int64?

    public init(
        environment: String, originalTransactionID: String, transactionID: String, productID: String, subscriptionGroupIdentifier: String?,
        purchaseDate: Int64?
    ) {
        self.environment = environment
        self.originalTransactionID = originalTransactionID
        self.transactionID = transactionID
        self.productID = productID
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.purchaseDate = purchaseDate
    }
}

/// The subscription group of an App Store product as the catalog draws it: the tiers that name
/// the same `subscription_group` as the product's tier (or the product's tier alone when it names
/// none), their App Store products, and the Stripe subscriptions that grant one of those tiers —
/// so a Stripe trial of Pro counts as the group's introductory offer when the catalog ties the
/// App Store's Pro products to the same tier.
public struct AppStoreOfferGroup: Sendable, Hashable {
    public let productID: String
    /// App Store's `subscriptionGroupIdentifier`, when the catalog gives it.
    public let subscriptionGroup: String?
    public let tierIDs: Set<String>
    public let products: Set<String>
    /// The product's offers as the catalog lists them.
    public let offers: AppStoreProductOffers

    /// Nil when the catalog does not sell `productID`.
    public init?(catalog: PlanCatalog, productID: String) {
        guard let tier = catalog.tier(appStoreProduct: productID) else { return nil }
        self.productID = productID
        subscriptionGroup = tier.appStoreSubscriptionGroup
        let tiers = tier.appStoreSubscriptionGroup.map { group in catalog.tiers.filter { $0.appStoreSubscriptionGroup == group } } ?? [tier]
        tierIDs = Set(tiers.map(\.id))
        products = Set(tiers.flatMap(\.appStoreProducts))
        offers = tier.appStoreOffers[productID] ?? AppStoreProductOffers()
    }

    /// Whether an App Store purchase is of the group: one of its products, or one Apple says is
    /// in the catalog's `subscription_group`.
    public func contains(productID: String, subscriptionGroupIdentifier: String?) -> Bool {
        if products.contains(productID) { return true }
        guard let subscriptionGroup, let subscriptionGroupIdentifier else { return false }
        return subscriptionGroup == subscriptionGroupIdentifier
    }

    /// Whether a Stripe subscription grants one of the group's tiers.
    public func contains(_ subscription: LedgerSubscription, catalog: PlanCatalog) -> Bool {
        subscription.items.contains { item in
            catalog.tier(price: item.price, lookupKey: item.lookupKey, product: item.product).map { tierIDs.contains($0.id) } ?? false
        }
    }

    /// Where the user stands in the group at `now` (Unix seconds).
    public func standing(
        subscriptions: [LedgerSubscription], appStore: [AppStoreSubscriptionRecord], catalog: PlanCatalog, now: Int64
    ) -> SubscriberStanding {
        var seen = false
        for record in appStore where contains(productID: record.productID, subscriptionGroupIdentifier: record.subscriptionGroupIdentifier) {
            seen = true
            switch record.status(now: now * 1000) {
            case .active, .gracePeriod, .billingRetry: return .subscribed
            case .expired, .revoked: continue
            }
        }
        for subscription in subscriptions where contains(subscription, catalog: catalog) {
            if [SubscriptionStatus.incomplete, .incompleteExpired].contains(subscription.status) { continue }  // never paid, never subscribed
            seen = true
            if [SubscriptionStatus.active, .trialing, .pastDue].contains(subscription.status) { return .subscribed }
        }
        return seen ? .lapsed : .never
    }

    /// The earlier introductory offer of the group the user had, if any: an App Store transaction
    /// bought with one, else a Stripe subscription of the group that had a trial (its id).
    public func earlierIntroductoryOffer(
        appStore: [AppStoreIntroductoryOffer], subscriptions: [LedgerSubscription], catalog: PlanCatalog
    ) -> String? {
        if let offer = appStore.first(where: { contains(productID: $0.productID, subscriptionGroupIdentifier: $0.subscriptionGroupIdentifier) }) {
            return offer.transactionID
        }
        return subscriptions.first { $0.trialStart != nil && contains($0, catalog: catalog) }?.id
    }
}
