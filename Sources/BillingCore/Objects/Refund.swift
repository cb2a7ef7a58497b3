/// A refund of a charge, as `refund.created`, `refund.updated`, `refund.failed` and
/// `charge.refund.updated` send it: what the revenue metrics count (its amount, at its own
/// `created`, once it succeeded) and what ties it to the invoice its charge paid.
public struct Refund: Decodable, Sendable, Equatable {
    public var id: String
    /// In the currency's minor unit.
    public var amount: Int64
    public var currency: String
    public var charge: Expandable?
    public var paymentIntent: Expandable?
    /// `pending`, `requires_action`, `succeeded`, `failed` or `canceled`; values Stripe adds later
    /// are kept as they come.
    public var status: String?
    public var created: Int64?

    public init(
        id: String, amount: Int64, currency: String, charge: Expandable? = nil, paymentIntent: Expandable? = nil, status: String? = nil,
        created: Int64? = nil
    ) {
        (self.id, self.amount, self.currency, self.charge, self.paymentIntent) = (id, amount, currency, charge, paymentIntent)
        (self.status, self.created) = (status, created)
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, amount: wire.amount, currency: wire.currency, charge: wire.charge, paymentIntent: wire.payment_intent,
            status: wire.status, created: wire.created)
    }

    /// The status of a refund that went through: the only one the revenue metrics count.
    public static let succeeded = "succeeded"

    /// How far the refund got, for the ordering of two snapshots of one second: a pending refund
    /// (0) is followed by its outcome (1), never the other way round.
    public var statusRank: Int {
        switch status {
        case Self.succeeded, "failed", "canceled": 1
        default: 0
        }
    }

    private struct Wire: Decodable {
        let id: String
        let amount: Int64
        let currency: String
        let charge: Expandable?
        let payment_intent: Expandable?
        let status: String?
        let created: Int64?
    }
}
