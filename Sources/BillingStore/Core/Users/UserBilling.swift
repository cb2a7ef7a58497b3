import BillingCore

/// A Stripe customer tied to an app user.
public struct LinkedCustomer: Sendable, Equatable {
    public var id: String
    /// The customer carries `metadata.app_user_id` of the user (billingd created it, or it was
    /// created elsewhere with that metadata).
    public var byMetadata: Bool
    /// A completed Checkout session with the user's `client_reference_id` created or used it.
    public var byCheckout: Bool
    /// Nil when the ledger has only the Checkout link, not the customer itself yet.
    public var created: Int64?
    /// `invoice_settings.default_payment_method`.
    public var defaultPaymentMethod: String?

    public init(id: String, byMetadata: Bool, byCheckout: Bool, created: Int64? = nil, defaultPaymentMethod: String? = nil) {
        self.id = id
        self.byMetadata = byMetadata
        self.byCheckout = byCheckout
        self.created = created
        self.defaultPaymentMethod = defaultPaymentMethod
    }

    /// Preference order: tied by metadata before tied only by Checkout, then the newer, then by id.
    static func isPreferred(_ a: LinkedCustomer, over b: LinkedCustomer) -> Bool {
        if a.byMetadata != b.byMetadata { return a.byMetadata }
        if (a.created ?? 0) != (b.created ?? 0) { return (a.created ?? 0) > (b.created ?? 0) }
        return a.id < b.id
    }
}

/// Everything the ledger knows that decides a user's plan, read in one transaction.
public struct UserBilling: Sendable, Equatable {
    public var user: String
    public var scope: ServiceScope
    /// The user's customers, preferred first (see ``primaryCustomer``); deleted ones left out.
    public var customers: [LinkedCustomer]
    /// Every subscription of those customers, in any status.
    public var subscriptions: [LedgerSubscription]
    /// Active Stripe Entitlements of those customers (feature lookup keys).
    public var stripeEntitlements: [String]
    /// The App Store purchases tied to the user in the scope's mode (platform account only:
    /// the App Store knows no Stripe accounts).
    public var appStoreSubscriptions: [AppStoreSubscriptionRecord]
    /// The user's promotional grants in the scope, newest first, revoked and expired ones too.
    public var grants: [PromotionalGrant]

    public init(
        user: String, scope: ServiceScope, customers: [LinkedCustomer], subscriptions: [LedgerSubscription],
        stripeEntitlements: [String], appStoreSubscriptions: [AppStoreSubscriptionRecord] = [], grants: [PromotionalGrant] = []
    ) {
        self.user = user
        self.scope = scope
        self.customers = customers
        self.subscriptions = subscriptions
        self.stripeEntitlements = stripeEntitlements
        self.appStoreSubscriptions = appStoreSubscriptions
        self.grants = grants
    }

    /// Whether any customer is tied to the user; a user without one has never paid.
    public var isKnown: Bool { !customers.isEmpty }

    /// The customer to use for the user's next Checkout or portal session: one billingd tied by
    /// metadata if any, the newest first.
    public var primaryCustomer: LinkedCustomer? { customers.first }

    /// The user's access under `catalog` at `now` (Unix seconds).
    public func resolve(_ catalog: PlanCatalog, now: Int64) -> PlanResolution {
        catalog.resolve(subscriptions, appStore: appStoreSubscriptions, grants: grants, stripeEntitlements: stripeEntitlements, now: now)
    }

    /// The same billing with one subscription replaced (or added) by a newer state, e.g. the one
    /// Stripe just returned for a cancel, before its webhook reaches the ledger.
    public func replacing(_ subscription: LedgerSubscription) -> UserBilling {
        var copy = self
        if let index = copy.subscriptions.firstIndex(where: { $0.id == subscription.id }) {
            var updated = subscription
            // Stripe's answer does not say whether the latest invoice is still open; the ledger does.
            if updated.unpaidInvoiceDueAt == nil, updated.latestInvoice == copy.subscriptions[index].latestInvoice {
                updated.unpaidInvoiceDueAt = copy.subscriptions[index].unpaidInvoiceDueAt
            }
            copy.subscriptions[index] = updated
        } else {
            copy.subscriptions.append(subscription)
        }
        return copy
    }
}

/// One invoice of a user's billing history.
public struct UserInvoice: Sendable, Equatable {
    public var id: String
    public var number: String?
    public var customer: String?
    public var subscription: String?
    public var status: String?
    public var currency: String
    public var subtotal: Int64
    public var discount: Int64
    public var tax: Int64
    public var total: Int64
    public var amountDue: Int64
    public var amountPaid: Int64
    public var amountRemaining: Int64
    public var created: Int64?
    public var finalizedAt: Int64?
    public var paidAt: Int64?
    public var voidedAt: Int64?
    public var dueDate: Int64?
    /// The service period billed: from the earliest line start to the latest line end, else the
    /// invoice's own period.
    public var periodStart: Int64?
    public var periodEnd: Int64?
    public var billingReason: String?
    public var collectionMethod: String?
    public var hostedInvoiceURL: String?
    public var invoicePDF: String?

    public init(
        id: String, number: String? = nil, customer: String? = nil, subscription: String? = nil, status: String? = nil,
        currency: String, subtotal: Int64 = 0, discount: Int64 = 0, tax: Int64 = 0, total: Int64 = 0, amountDue: Int64 = 0,
        amountPaid: Int64 = 0, amountRemaining: Int64 = 0, created: Int64? = nil, finalizedAt: Int64? = nil,
        paidAt: Int64? = nil, voidedAt: Int64? = nil, dueDate: Int64? = nil, periodStart: Int64? = nil,
        periodEnd: Int64? = nil, billingReason: String? = nil, collectionMethod: String? = nil,
        hostedInvoiceURL: String? = nil, invoicePDF: String? = nil
    ) {
        self.id = id
        self.number = number
        self.customer = customer
        self.subscription = subscription
        self.status = status
        self.currency = currency
        self.subtotal = subtotal
        self.discount = discount
        self.tax = tax
        self.total = total
        self.amountDue = amountDue
        self.amountPaid = amountPaid
        self.amountRemaining = amountRemaining
        self.created = created
        self.finalizedAt = finalizedAt
        self.paidAt = paidAt
        self.voidedAt = voidedAt
        self.dueDate = dueDate
        self.periodStart = periodStart
        self.periodEnd = periodEnd
        self.billingReason = billingReason
        self.collectionMethod = collectionMethod
        self.hostedInvoiceURL = hostedInvoiceURL
        self.invoicePDF = invoicePDF
    }
}

/// A page of a user's invoices, newest first.
public struct UserInvoicePage: Sendable, Equatable {
    public var invoices: [UserInvoice]
    /// More invoices follow the last one of this page.
    public var hasMore: Bool
}

/// One payment method of a user; of a card only brand, last 4 and expiry.
public struct UserPaymentMethod: Sendable, Equatable {
    public var id: String
    public var customer: String
    /// `card`, `sepa_debit`, `us_bank_account` …
    public var type: String
    public var brand: String?
    public var last4: String?
    public var expMonth: Int64?
    public var expYear: Int64?
    public var created: Int64?
    /// The customer's default for invoices, or else the default of their newest live subscription.
    public var isDefault: Bool

    public init(
        id: String, customer: String, type: String, brand: String? = nil, last4: String? = nil, expMonth: Int64? = nil,
        expYear: Int64? = nil, created: Int64? = nil, isDefault: Bool = false
    ) {
        self.id = id
        self.customer = customer
        self.type = type
        self.brand = brand
        self.last4 = last4
        self.expMonth = expMonth
        self.expYear = expYear
        self.created = created
        self.isDefault = isDefault
    }
}

/// Why a user query was refused.
public enum UserLedgerError: Error, Equatable, CustomStringConvertible {
    /// `starting_after` names no invoice of this user.
    case unknownInvoice(String)

    public var description: String {
        switch self {
        case .unknownInvoice(let id): "\(id) is not an invoice of this user"
        }
    }
}
