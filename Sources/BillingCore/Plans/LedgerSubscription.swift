/// What tier resolution needs of one subscription, as the ledger keeps it (or as Stripe just
/// returned it): status, the dates that bound access, and the items' prices and quantities.
public struct LedgerSubscription: Sendable, Equatable {
    /// One price on the subscription.
    public struct Item: Sendable, Equatable {
        public var id: String
        public var price: String?
        public var product: String?
        public var lookupKey: String?
        public var quantity: Int64?
        /// Unit amount in minor units of ``currency``.
        public var unitAmount: Int64?
        public var currency: String?
        public var interval: RecurringInterval?
        public var intervalCount: Int64?
        /// The item's own period (API 2025-03-31 and later), else the subscription's.
        public var currentPeriodStart: Int64?
        public var currentPeriodEnd: Int64?

        public init(
            id: String, price: String? = nil, product: String? = nil, lookupKey: String? = nil, quantity: Int64? = nil,
            unitAmount: Int64? = nil, currency: String? = nil, interval: RecurringInterval? = nil, intervalCount: Int64? = nil,
            currentPeriodStart: Int64? = nil, currentPeriodEnd: Int64? = nil
        ) {
            self.id = id
            self.price = price
            self.product = product
            self.lookupKey = lookupKey
            self.quantity = quantity
            self.unitAmount = unitAmount
            self.currency = currency
            self.interval = interval
            self.intervalCount = intervalCount
            self.currentPeriodStart = currentPeriodStart
            self.currentPeriodEnd = currentPeriodEnd
        }
    }

    public var id: String
    public var customer: String
    public var status: SubscriptionStatus
    public var created: Int64?
    public var currency: String?
    public var cancelAtPeriodEnd: Bool
    public var cancelAt: Int64?
    public var canceledAt: Int64?
    public var endedAt: Int64?
    public var trialStart: Int64?
    public var trialEnd: Int64?
    /// The subscription's period (old API), or the earliest start and latest end of its items'.
    public var currentPeriodStart: Int64?
    public var currentPeriodEnd: Int64?
    public var latestInvoice: String?
    public var defaultPaymentMethod: String?
    /// When the unpaid latest invoice fell due, if it is still open: its `due_date` (invoices
    /// sent for payment) or its creation (charged automatically). Where a `past_due` grace
    /// period starts counting.
    public var unpaidInvoiceDueAt: Int64?
    public var items: [Item]

    public init(
        id: String, customer: String, status: SubscriptionStatus, created: Int64? = nil, currency: String? = nil,
        cancelAtPeriodEnd: Bool = false, cancelAt: Int64? = nil, canceledAt: Int64? = nil, endedAt: Int64? = nil,
        trialStart: Int64? = nil, trialEnd: Int64? = nil, currentPeriodStart: Int64? = nil, currentPeriodEnd: Int64? = nil,
        latestInvoice: String? = nil, defaultPaymentMethod: String? = nil, unpaidInvoiceDueAt: Int64? = nil, items: [Item] = []
    ) {
        self.id = id
        self.customer = customer
        self.status = status
        self.created = created
        self.currency = currency
        self.cancelAtPeriodEnd = cancelAtPeriodEnd
        self.cancelAt = cancelAt
        self.canceledAt = canceledAt
        self.endedAt = endedAt
        self.trialStart = trialStart
        self.trialEnd = trialEnd
        self.currentPeriodStart = currentPeriodStart
        self.currentPeriodEnd = currentPeriodEnd
        self.latestInvoice = latestInvoice
        self.defaultPaymentMethod = defaultPaymentMethod
        self.unpaidInvoiceDueAt = unpaidInvoiceDueAt
        self.items = items
    }

    /// The subscription as Stripe sent it, in either API shape: items without their own period
    /// (before 2025-03-31) take the subscription's.
    public init(_ subscription: Subscription, unpaidInvoiceDueAt: Int64? = nil) {
        self.init(
            id: subscription.id, customer: subscription.customer.id, status: subscription.status, created: subscription.created,
            currency: subscription.currency, cancelAtPeriodEnd: subscription.cancelAtPeriodEnd, cancelAt: subscription.cancelAt,
            canceledAt: subscription.canceledAt, endedAt: subscription.endedAt, trialStart: subscription.trialStart,
            trialEnd: subscription.trialEnd, currentPeriodStart: subscription.currentPeriodStart,
            currentPeriodEnd: subscription.currentPeriodEnd, latestInvoice: subscription.latestInvoice?.id,
            defaultPaymentMethod: subscription.defaultPaymentMethod?.id, unpaidInvoiceDueAt: unpaidInvoiceDueAt,
            items: subscription.items.map { item in
                Item(
                    id: item.id, price: item.price?.id, product: item.price?.product?.id, lookupKey: item.price?.lookupKey,
                    quantity: item.quantity, unitAmount: item.price?.unitAmount, currency: item.price?.currency,
                    interval: item.price?.recurring?.interval, intervalCount: item.price?.recurring?.intervalCount,
                    currentPeriodStart: item.currentPeriodStart ?? subscription.currentPeriodStart,
                    currentPeriodEnd: item.currentPeriodEnd ?? subscription.currentPeriodEnd)
            })
    }
}
