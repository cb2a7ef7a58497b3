/// An invoice's status; values Stripe adds later are kept as they come, never rejected.
public struct InvoiceStatus: RawRepresentable, Codable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    public static let draft = InvoiceStatus(rawValue: "draft")
    public static let open = InvoiceStatus(rawValue: "open")
    public static let paid = InvoiceStatus(rawValue: "paid")
    public static let uncollectible = InvoiceStatus(rawValue: "uncollectible")
    public static let void = InvoiceStatus(rawValue: "void")
}

/// A Stripe invoice, decoded from either API shape (before and from 2025-03-31), amounts exact
/// in minor units: `subtotal - discountAmount + taxAmount == total` for exclusive taxes.
public struct Invoice: Decodable, Sendable, Equatable {
    /// When the invoice reached each status, Unix seconds.
    public struct StatusTransitions: Decodable, Sendable, Equatable {
        public var finalizedAt: Int64?
        public var paidAt: Int64?
        public var voidedAt: Int64?
        public var markedUncollectibleAt: Int64?

        public init(
            finalizedAt: Int64? = nil, paidAt: Int64? = nil, voidedAt: Int64? = nil,
            markedUncollectibleAt: Int64? = nil
        ) {
            self.finalizedAt = finalizedAt
            self.paidAt = paidAt
            self.voidedAt = voidedAt
            self.markedUncollectibleAt = markedUncollectibleAt
        }

        private enum CodingKeys: String, CodingKey {
            case finalizedAt = "finalized_at"
            case paidAt = "paid_at"
            case voidedAt = "voided_at"
            case markedUncollectibleAt = "marked_uncollectible_at"
        }
    }

    /// Nil for an upcoming (preview) invoice, which has no id.
    public var id: String?
    public var number: String?
    public var customer: Expandable?
    public var customerEmail: String?
    public var customerName: String?
    public var status: InvoiceStatus?
    public var currency: String
    public var subtotal: Int64
    public var total: Int64
    public var amountDue: Int64
    public var amountPaid: Int64
    public var amountRemaining: Int64
    /// Sum of `total_discount_amounts`.
    public var discountAmount: Int64
    /// Sum of `total_taxes` (new API), else `tax` or the sum of `total_tax_amounts` (old API).
    public var taxAmount: Int64
    public var created: Int64?
    /// Stripe's invoice period (for a subscription's first invoice both equal `created`); the
    /// service period billed is on the lines.
    public var periodStart: Int64?
    public var periodEnd: Int64?
    public var dueDate: Int64?
    /// E.g. `subscription_create`, `subscription_cycle`, `subscription_update`, `manual`, `upcoming`.
    public var billingReason: String?
    public var collectionMethod: String?
    public var hostedInvoiceURL: String?
    public var invoicePDF: String?
    public var livemode: Bool?
    public var attemptCount: Int64?
    public var statusTransitions: StatusTransitions
    /// The top-level `subscription` (old API) or `parent.subscription_details.subscription` (new API).
    public var subscription: Expandable?
    public var metadata: [String: String]
    public var lines: [InvoiceLine]
    /// True when Stripe sent only the first page of lines; fetch the rest before trusting ``lines``.
    public var linesHasMore: Bool
    public var deleted: Bool
    /// The charge and payment intent that paid it: top-level `charge` and `payment_intent` in API
    /// versions before 2025-03-31; later ones name them on the invoice's payments instead
    /// (``InvoicePayment``). A refund of either refunds the invoice.
    public var charge: Expandable?
    public var paymentIntent: Expandable?

    public init(
        id: String?, number: String? = nil, customer: Expandable? = nil, customerEmail: String? = nil,
        customerName: String? = nil, status: InvoiceStatus? = nil, currency: String, subtotal: Int64 = 0,
        total: Int64 = 0, amountDue: Int64 = 0, amountPaid: Int64 = 0, amountRemaining: Int64 = 0,
        discountAmount: Int64 = 0, taxAmount: Int64 = 0, created: Int64? = nil, periodStart: Int64? = nil,
        periodEnd: Int64? = nil, dueDate: Int64? = nil, billingReason: String? = nil,
        collectionMethod: String? = nil, hostedInvoiceURL: String? = nil, invoicePDF: String? = nil,
        livemode: Bool? = nil, attemptCount: Int64? = nil, statusTransitions: StatusTransitions = .init(),
        subscription: Expandable? = nil, metadata: [String: String] = [:], lines: [InvoiceLine] = [],
        linesHasMore: Bool = false, deleted: Bool = false, charge: Expandable? = nil, paymentIntent: Expandable? = nil
    ) {
        self.id = id
        self.number = number
        self.customer = customer
        self.customerEmail = customerEmail
        self.customerName = customerName
        self.status = status
        self.currency = currency
        self.subtotal = subtotal
        self.total = total
        self.amountDue = amountDue
        self.amountPaid = amountPaid
        self.amountRemaining = amountRemaining
        self.discountAmount = discountAmount
        self.taxAmount = taxAmount
        self.created = created
        self.periodStart = periodStart
        self.periodEnd = periodEnd
        self.dueDate = dueDate
        self.billingReason = billingReason
        self.collectionMethod = collectionMethod
        self.hostedInvoiceURL = hostedInvoiceURL
        self.invoicePDF = invoicePDF
        self.livemode = livemode
        self.attemptCount = attemptCount
        self.statusTransitions = statusTransitions
        self.subscription = subscription
        self.metadata = metadata
        self.lines = lines
        self.linesHasMore = linesHasMore
        self.deleted = deleted
        self.charge = charge
        self.paymentIntent = paymentIntent
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        let deleted = wire.deleted ?? false
        // A deleted-invoice stub is `{"id", "object", "deleted": true}`; a live invoice always has a currency.
        guard let currency = wire.currency ?? (deleted ? "" : nil) else {
            throw StripeJSON.missing("currency", in: decoder)
        }
        self.init(
            id: wire.id, number: wire.number, customer: wire.customer, customerEmail: wire.customer_email,
            customerName: wire.customer_name, status: wire.status, currency: currency,
            subtotal: wire.subtotal ?? 0, total: wire.total ?? 0, amountDue: wire.amount_due ?? 0,
            amountPaid: wire.amount_paid ?? 0, amountRemaining: wire.amount_remaining ?? 0,
            discountAmount: wire.total_discount_amounts.sum ?? 0,
            taxAmount: wire.total_taxes.sum ?? wire.tax ?? wire.total_tax_amounts.sum ?? 0,
            created: wire.created, periodStart: wire.period_start, periodEnd: wire.period_end,
            dueDate: wire.due_date, billingReason: wire.billing_reason, collectionMethod: wire.collection_method,
            hostedInvoiceURL: wire.hosted_invoice_url, invoicePDF: wire.invoice_pdf, livemode: wire.livemode,
            attemptCount: wire.attempt_count, statusTransitions: wire.status_transitions ?? .init(),
            subscription: wire.subscription ?? wire.parent?.subscription_details?.subscription,
            metadata: wire.metadata.values, lines: wire.lines?.data ?? [],
            linesHasMore: wire.lines?.has_more ?? false, deleted: deleted, charge: wire.charge, paymentIntent: wire.payment_intent)
    }

    private struct Wire: Decodable {
        struct Parent: Decodable {
            struct SubscriptionDetails: Decodable {
                let subscription: Expandable?
            }
            let subscription_details: SubscriptionDetails?
        }
        let id: String?
        let number: String?
        let customer: Expandable?
        let customer_email: String?
        let customer_name: String?
        let status: InvoiceStatus?
        let currency: String?
        let subtotal: Int64?
        let total: Int64?
        let amount_due: Int64?
        let amount_paid: Int64?
        let amount_remaining: Int64?
        let total_discount_amounts: [StripeJSON.AmountEntry]?
        let total_taxes: [StripeJSON.AmountEntry]?
        let tax: Int64?
        let total_tax_amounts: [StripeJSON.AmountEntry]?
        let created: Int64?
        let period_start: Int64?
        let period_end: Int64?
        let due_date: Int64?
        let billing_reason: String?
        let collection_method: String?
        let hosted_invoice_url: String?
        let invoice_pdf: String?
        let livemode: Bool?
        let attempt_count: Int64?
        let status_transitions: StatusTransitions?
        let subscription: Expandable?
        let parent: Parent?
        let metadata: StripeJSON.Metadata?
        let lines: StripeJSON.List<InvoiceLine>?
        let deleted: Bool?
        let charge: Expandable?
        let payment_intent: Expandable?
    }
}

/// One line of an invoice, decoded from either API shape.
public struct InvoiceLine: Decodable, Sendable, Equatable {
    public var id: String
    /// The line's amount before discounts and exclusive taxes, minor units.
    public var amount: Int64
    public var currency: String
    public var description: String?
    public var quantity: Int64?
    /// The service period billed by this line.
    public var periodStart: Int64?
    public var periodEnd: Int64?
    /// `price.id` (old API) or `pricing.price_details.price` (new API).
    public var priceID: String?
    /// `subscription` (old API) or `parent.subscription_item_details.subscription` /
    /// `parent.invoice_item_details.subscription` (new API).
    public var subscription: String?
    public var proration: Bool

    public init(
        id: String, amount: Int64, currency: String, description: String? = nil, quantity: Int64? = nil,
        periodStart: Int64? = nil, periodEnd: Int64? = nil, priceID: String? = nil, subscription: String? = nil,
        proration: Bool = false
    ) {
        self.id = id
        self.amount = amount
        self.currency = currency
        self.description = description
        self.quantity = quantity
        self.periodStart = periodStart
        self.periodEnd = periodEnd
        self.priceID = priceID
        self.subscription = subscription
        self.proration = proration
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        // New API: the details named by `parent.type` first, then the other kind.
        let parent = wire.parent
        let details = parent?.type == "invoice_item_details"
            ? [parent?.invoice_item_details, parent?.subscription_item_details]
            : [parent?.subscription_item_details, parent?.invoice_item_details]
        self.init(
            id: wire.id, amount: wire.amount, currency: wire.currency, description: wire.description,
            quantity: wire.quantity, periodStart: wire.period?.start, periodEnd: wire.period?.end,
            priceID: wire.price?.id ?? wire.pricing?.price_details?.price?.id,
            subscription: wire.subscription?.id ?? details.lazy.compactMap { $0?.subscription?.id }.first,
            proration: wire.proration ?? details.lazy.compactMap { $0?.proration }.first ?? false)
    }

    private struct Wire: Decodable {
        struct Period: Decodable {
            let start: Int64?
            let end: Int64?
        }
        struct Pricing: Decodable {
            struct PriceDetails: Decodable {
                let price: Expandable?
            }
            let price_details: PriceDetails?
        }
        struct Parent: Decodable {
            struct Details: Decodable {
                let subscription: Expandable?
                let proration: Bool?
            }
            let type: String?
            let subscription_item_details: Details?
            let invoice_item_details: Details?
        }
        let id: String
        let amount: Int64
        let currency: String
        let description: String?
        let quantity: Int64?
        let period: Period?
        let price: Expandable?
        let pricing: Pricing?
        let subscription: Expandable?
        let parent: Parent?
        let proration: Bool?
    }
}
