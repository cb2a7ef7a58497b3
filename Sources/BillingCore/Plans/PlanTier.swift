/// One tier of the plan catalog (Free, Pro, Enterprise …): what it is called, how it ranks
/// against the others, which Stripe prices grant it, and what it allows.
public struct PlanTier: Sendable, Hashable {
    /// Stable id the app checks (`pro`); lowercase letters, digits, `_` and `-`.
    public let id: String
    /// Display name (`Pro`).
    public let name: String
    /// Higher wins when several subscriptions grant a tier.
    public let rank: Int64
    public let description: String?
    /// The Stripe prices that grant this tier, by id or lookup key, in the catalog's order.
    public let prices: [PlanPrice]
    /// Stripe products any of whose prices grant this tier.
    public let products: [String]
    /// App Store product ids (`com.example.pro.monthly`) whose purchase grants this tier.
    public let appStoreProducts: [String]
    /// The periods the catalog gives for some of ``appStoreProducts`` (the revenue metrics' monthly amount).
    public let appStorePeriods: [String: AppStorePeriod]
    /// The App Store subscription group of the tier's products (`subscription_group`); tiers
    /// naming the same group form one group for offers.
    public let appStoreSubscriptionGroup: String?
    /// The promotional offers the catalog lists for some of ``appStoreProducts``.
    public let appStoreOffers: [String: AppStoreProductOffers]
    /// Whether the app offered a free sample, a trial or a description of the tier's content
    /// before purchase (`app_store.sample_content_provided`), as told to Apple in refund requests.
    public let appStoreSampleContentProvided: Bool
    /// The meter (by id) whose use tells how much of a purchase of some of ``appStoreProducts``
    /// was consumed (`consumption_meter`), told to Apple in refund requests.
    public let appStoreConsumptionMeters: [String: String]
    /// Feature keys, in the catalog's order.
    public let features: [String]
    /// Limits, in the catalog's order.
    public let limits: [PlanLimit]
    /// How long a `past_due` subscription keeps this tier.
    public let pastDueGrace: PastDueGrace

    public init(
        id: String, name: String, rank: Int64, description: String? = nil, prices: [PlanPrice] = [],
        products: [String] = [], appStoreProducts: [String] = [], appStorePeriods: [String: AppStorePeriod] = [:], features: [String] = [],
        limits: [PlanLimit] = [], pastDueGrace: PastDueGrace = .days(0), appStoreSubscriptionGroup: String? = nil,
        appStoreOffers: [String: AppStoreProductOffers] = [:], appStoreSampleContentProvided: Bool = false,
        appStoreConsumptionMeters: [String: String] = [:]
    ) {
        self.id = id
        self.name = name
        self.rank = rank
        self.description = description
        self.prices = prices
        self.products = products
        self.appStoreProducts = appStoreProducts
        self.appStorePeriods = appStorePeriods
        self.appStoreSubscriptionGroup = appStoreSubscriptionGroup
        self.appStoreOffers = appStoreOffers
        self.appStoreSampleContentProvided = appStoreSampleContentProvided
        self.appStoreConsumptionMeters = appStoreConsumptionMeters
        self.features = features
        self.limits = limits
        self.pastDueGrace = pastDueGrace
    }

    /// The first price of the catalog for this tier billed every `interval` (what Checkout should
    /// sell for "Pro, yearly"); nil when the catalog names none.
    public func price(for interval: RecurringInterval) -> PlanPrice? {
        prices.first { $0.interval == interval }
    }
}

/// A Stripe price that grants a tier: its id, its lookup key, or both.
public struct PlanPrice: Sendable, Hashable {
    /// `price_…`.
    public let id: String?
    /// The price's `lookup_key`, which survives replacing a price by a new one.
    public let lookupKey: String?
    /// `month`, `year` …: what Checkout offers this price as; nil for prices kept only so that
    /// existing subscribers keep their tier.
    public let interval: RecurringInterval?

    public init(id: String? = nil, lookupKey: String? = nil, interval: RecurringInterval? = nil) {
        self.id = id
        self.lookupKey = lookupKey
        self.interval = interval
    }
}

/// A named limit of a tier (`projects_per_month: 100`).
public struct PlanLimit: Sendable, Hashable {
    /// What a limit allows.
    public enum Value: Sendable, Hashable {
        /// A fixed number.
        case count(Int64)
        /// No limit.
        case unlimited
        /// This many per unit of the subscription item's quantity (per seat); `quantity` in the
        /// catalog is `perQuantity(1)`.
        case perQuantity(Int64)
    }

    public let key: String
    public let value: Value

    public init(key: String, value: Value) {
        self.key = key
        self.value = value
    }
}

/// How long a subscription that Stripe marks `past_due` (a renewal payment failed, Stripe is
/// retrying) keeps its tier.
public enum PastDueGrace: Sendable, Hashable, CustomStringConvertible {
    /// This many days from when the unpaid invoice fell due; `days(0)` takes access away at once.
    case days(Int64)
    /// As long as Stripe keeps the subscription `past_due` (until it becomes `unpaid` or
    /// `canceled` under the account's retry settings).
    case unlimited

    public var description: String {
        switch self {
        case .days(let days): "\(days) days"
        case .unlimited: "unlimited"
        }
    }
}

/// A limit after the tier's rules are applied to a subscription: a number, or none.
public enum EntitlementLimit: Sendable, Hashable {
    case count(Int64)
    case unlimited
}
