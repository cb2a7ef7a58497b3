/// A charge, as `charge.refunded` sends it: only what tells the app of a refund of a
/// subscription's payment. The ledger keeps no charges; the refund is announced, not stored.
public struct Charge: Decodable, Sendable, Equatable {
    public var id: String
    public var customer: Expandable?
    /// The invoice the charge paid. API versions before 2025-03-31 send it; later ones moved the
    /// link to the invoice's payments, and a charge names no invoice there.
    public var invoice: Expandable?
    public var paymentIntent: Expandable?
    /// In the currency's minor unit.
    public var amount: Int64
    /// All refunded so far, in the minor unit.
    public var amountRefunded: Int64
    public var currency: String
    /// Whether the whole amount is refunded.
    public var refunded: Bool

    public init(
        id: String, customer: Expandable? = nil, invoice: Expandable? = nil, paymentIntent: Expandable? = nil, amount: Int64,
        amountRefunded: Int64, currency: String, refunded: Bool
    ) {
        (self.id, self.customer, self.invoice, self.paymentIntent) = (id, customer, invoice, paymentIntent)
        (self.amount, self.amountRefunded, self.currency, self.refunded) = (amount, amountRefunded, currency, refunded)
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, customer: wire.customer, invoice: wire.invoice, paymentIntent: wire.payment_intent, amount: wire.amount,
            amountRefunded: wire.amount_refunded ?? 0, currency: wire.currency, refunded: wire.refunded ?? false)
    }

    private struct Wire: Decodable {
        let id: String
        let customer: Expandable?
        let invoice: Expandable?
        let payment_intent: Expandable?
        let amount: Int64
        let amount_refunded: Int64?
        let currency: String
        let refunded: Bool?
    }
}
