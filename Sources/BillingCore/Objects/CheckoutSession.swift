/// A Checkout Session's status; values Stripe adds later are kept as they come, never rejected.
public struct CheckoutSessionStatus: RawRepresentable, Codable, Hashable, Sendable, ExpressibleByStringLiteral,
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

    public static let open = CheckoutSessionStatus(rawValue: "open")
    public static let complete = CheckoutSessionStatus(rawValue: "complete")
    public static let expired = CheckoutSessionStatus(rawValue: "expired")
}

/// A Stripe Checkout Session; `clientReferenceID` ties it to the app user who started it.
public struct CheckoutSession: Decodable, Sendable, Equatable {
    public var id: String
    public var customer: Expandable?
    public var clientReferenceID: String?
    public var status: CheckoutSessionStatus?
    /// `payment`, `setup` or `subscription`.
    public var mode: String?
    /// `paid`, `unpaid` or `no_payment_required`.
    public var paymentStatus: String?
    public var subscription: Expandable?
    public var invoice: Expandable?
    public var amountSubtotal: Int64?
    public var amountTotal: Int64?
    public var currency: String?
    public var created: Int64?
    public var expiresAt: Int64?
    /// The hosted page; nil once the session is complete or expired.
    public var url: String?
    /// `customer_details.email`, else `customer_email`.
    public var customerEmail: String?
    public var metadata: [String: String]
    public var livemode: Bool?

    public init(
        id: String, customer: Expandable? = nil, clientReferenceID: String? = nil,
        status: CheckoutSessionStatus? = nil, mode: String? = nil, paymentStatus: String? = nil,
        subscription: Expandable? = nil, invoice: Expandable? = nil, amountSubtotal: Int64? = nil,
        amountTotal: Int64? = nil, currency: String? = nil, created: Int64? = nil, expiresAt: Int64? = nil,
        url: String? = nil, customerEmail: String? = nil, metadata: [String: String] = [:], livemode: Bool? = nil
    ) {
        self.id = id
        self.customer = customer
        self.clientReferenceID = clientReferenceID
        self.status = status
        self.mode = mode
        self.paymentStatus = paymentStatus
        self.subscription = subscription
        self.invoice = invoice
        self.amountSubtotal = amountSubtotal
        self.amountTotal = amountTotal
        self.currency = currency
        self.created = created
        self.expiresAt = expiresAt
        self.url = url
        self.customerEmail = customerEmail
        self.metadata = metadata
        self.livemode = livemode
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, customer: wire.customer, clientReferenceID: wire.client_reference_id, status: wire.status,
            mode: wire.mode, paymentStatus: wire.payment_status, subscription: wire.subscription,
            invoice: wire.invoice, amountSubtotal: wire.amount_subtotal, amountTotal: wire.amount_total,
            currency: wire.currency, created: wire.created, expiresAt: wire.expires_at, url: wire.url,
            customerEmail: wire.customer_details?.email ?? wire.customer_email, metadata: wire.metadata.values,
            livemode: wire.livemode)
    }

    private struct Wire: Decodable {
        struct CustomerDetails: Decodable {
            let email: String?
        }
        let id: String
        let customer: Expandable?
        let client_reference_id: String?
        let status: CheckoutSessionStatus?
        let mode: String?
        let payment_status: String?
        let subscription: Expandable?
        let invoice: Expandable?
        let amount_subtotal: Int64?
        let amount_total: Int64?
        let currency: String?
        let created: Int64?
        let expires_at: Int64?
        let url: String?
        let customer_details: CustomerDetails?
        let customer_email: String?
        let metadata: StripeJSON.Metadata?
        let livemode: Bool?
    }
}
