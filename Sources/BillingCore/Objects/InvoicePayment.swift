/// One payment applied to an invoice (API 2025-03-31 on), as sent by `invoice_payment.paid`.
public struct InvoicePayment: Decodable, Sendable, Equatable {
    public var id: String
    public var invoice: Expandable?
    public var amountPaid: Int64?
    public var amountRequested: Int64?
    public var currency: String?
    /// E.g. `open`, `paid`, `canceled`.
    public var status: String?
    public var created: Int64?
    /// `status_transitions.paid_at`.
    public var paidAt: Int64?
    public var isDefault: Bool?
    public var livemode: Bool?
    /// What paid it: `payment.charge` and `payment.payment_intent`. A refund of either refunds
    /// the invoice.
    public var charge: Expandable?
    public var paymentIntent: Expandable?

    public init(
        id: String, invoice: Expandable? = nil, amountPaid: Int64? = nil, amountRequested: Int64? = nil,
        currency: String? = nil, status: String? = nil, created: Int64? = nil, paidAt: Int64? = nil,
        isDefault: Bool? = nil, livemode: Bool? = nil, charge: Expandable? = nil, paymentIntent: Expandable? = nil
    ) {
        self.id = id
        self.invoice = invoice
        self.amountPaid = amountPaid
        self.amountRequested = amountRequested
        self.currency = currency
        self.status = status
        self.created = created
        self.paidAt = paidAt
        self.isDefault = isDefault
        self.livemode = livemode
        self.charge = charge
        self.paymentIntent = paymentIntent
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, invoice: wire.invoice, amountPaid: wire.amount_paid, amountRequested: wire.amount_requested,
            currency: wire.currency, status: wire.status, created: wire.created,
            paidAt: wire.status_transitions?.paid_at, isDefault: wire.is_default, livemode: wire.livemode,
            charge: wire.payment?.charge, paymentIntent: wire.payment?.payment_intent)
    }

    private struct Wire: Decodable {
        struct StatusTransitions: Decodable {
            let paid_at: Int64?
        }
        struct Payment: Decodable {
            let charge: Expandable?
            let payment_intent: Expandable?
        }
        let id: String
        let invoice: Expandable?
        let amount_paid: Int64?
        let amount_requested: Int64?
        let currency: String?
        let status: String?
        let created: Int64?
        let status_transitions: StatusTransitions?
        let is_default: Bool?
        let livemode: Bool?
        let payment: Payment?
    }
}
