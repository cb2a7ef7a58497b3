import BillingCore

/// What the revenue metrics read from the ledger (issue 32): each subscription's history as the
/// facts it was built from, and the payments and refunds. The figures themselves are
/// ``RevenueMetrics``'s, computed from these in BillingCore; the store only keeps and reads facts,
/// the same on both backends.
///
/// Facts are insert-only and keyed by what carried them (a Stripe event, an App Store
/// transaction), so that every delivery order, duplicates and late events give the same facts,
/// and `replay` rebuilds them.
public protocol MetricsFactStore: Sendable {
    /// Every Stripe subscription of `scope` that has a snapshot, with its snapshots (one per
    /// applied event or reconcile repair, in any order) and its paid invoices.
    func stripeSubscriptions(scope: ServiceScope) async throws -> [StripeSubscriptionFacts]

    /// Every App Store subscription (an original transaction id) of the App Store
    /// `environments` (`Production`, `Sandbox`), with its transactions.
    func appStoreSubscriptions(environments: [String]) async throws -> [AppStoreSubscriptionFacts]

    /// Payments and refunds at instants in `[from, to)`: Stripe's of `scope` (invoices paid, by
    /// `status_transitions.paid_at`; refunds, at the refund's time), the App Store's of
    /// `appStoreEnvironments` (paid transactions at their purchase, refunds at their revocation).
    func revenueEntries(scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64) async throws -> [RevenueEntry]

    /// The same payments and refunds added up into `tally`'s buckets as they are read, never all
    /// in memory at once. A default adds up ``revenueEntries(scope:appStoreEnvironments:from:to:)``.
    func revenue(scope: ServiceScope, appStoreEnvironments: [String], into tally: RevenueTally) async throws -> RevenueTally

    /// The index the overview, movement, churn, trials and series read (see
    /// ``MetricsIndexReads``), brought up to date with the facts under `catalog` first. A default
    /// builds it in memory from every fact.
    func metricsIndex(_ scope: MetricsScope, catalog: PlanCatalog) async throws -> any MetricsIndexReads
}

/// One Stripe subscription's facts.
public struct StripeSubscriptionFacts: Sendable, Equatable {
    public var id: String
    /// The price of its first licensed item in its newest snapshot, and that price's lookup key
    /// and product: the plan catalog names a tier by any of the three.
    public var price: String?
    public var lookupKey: String?
    public var product: String?
    public var snapshots: [StripeSubscriptionSnapshot]
    public var paidInvoices: [PaidInvoice]

    public init(
        id: String, price: String?, lookupKey: String? = nil, product: String? = nil, snapshots: [StripeSubscriptionSnapshot],
        paidInvoices: [PaidInvoice]
    ) {
        self.id = id
        self.price = price
        self.lookupKey = lookupKey
        self.product = product
        self.snapshots = snapshots
        self.paidInvoices = paidInvoices
    }

    /// An invoice of the subscription that was paid, and whether it was refunded since (in
    /// full or in part): a refunded first payment undoes a trial's conversion.
    public struct PaidInvoice: Sendable, Equatable {
        public var paidAt: Int64
        public var refunded: Bool

        public init(paidAt: Int64, refunded: Bool) {
            self.paidAt = paidAt
            self.refunded = refunded
        }
    }
}

/// One App Store subscription's facts.
public struct AppStoreSubscriptionFacts: Sendable, Equatable {
    public var environment: String
    public var originalTransactionID: String
    /// Its transactions, each with its product (an upgrade changes it); `fact.period` is nil,
    /// for the plan catalog to give (else the transaction's length decides).
    public var transactions: [Transaction]
    /// The end of its billing grace period, if Apple announced one.
    public var gracePeriodEnd: Int64?

    public init(environment: String, originalTransactionID: String, transactions: [Transaction], gracePeriodEnd: Int64?) {
        self.environment = environment
        self.originalTransactionID = originalTransactionID
        self.transactions = transactions
        self.gracePeriodEnd = gracePeriodEnd
    }

    public struct Transaction: Sendable, Equatable {
        public var productID: String
        public var fact: AppStoreTransactionFact

        public init(productID: String, fact: AppStoreTransactionFact) {
            self.productID = productID
            self.fact = fact
        }
    }
}

extension MetricsFactStore {
    public func revenue(scope: ServiceScope, appStoreEnvironments: [String], into tally: RevenueTally) async throws -> RevenueTally {
        var tally = tally
        guard let first = tally.buckets.first, let last = tally.buckets.last else { return tally }
        for entry in try await revenueEntries(scope: scope, appStoreEnvironments: appStoreEnvironments, from: first.start, to: last.end) {
            tally.add(entry)
        }
        return tally
    }
}
