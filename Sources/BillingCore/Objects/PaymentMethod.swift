/// What billingd keeps of a card: brand, last 4 digits, expiry and fingerprint, never the number.
public struct Card: Decodable, Sendable, Equatable {
    /// E.g. `visa`, `mastercard`, `amex`.
    public var brand: String?
    public var last4: String?
    public var expMonth: Int64?
    public var expYear: Int64?
    /// Stable across customers for the same card number; lets duplicates be spotted without the number.
    public var fingerprint: String?
    /// `credit`, `debit`, `prepaid` or `unknown`.
    public var funding: String?
    /// Two-letter country code of the issuer.
    public var country: String?

    public init(
        brand: String? = nil, last4: String? = nil, expMonth: Int64? = nil, expYear: Int64? = nil,
        fingerprint: String? = nil, funding: String? = nil, country: String? = nil
    ) {
        self.brand = brand
        self.last4 = last4
        self.expMonth = expMonth
        self.expYear = expYear
        self.fingerprint = fingerprint
        self.funding = funding
        self.country = country
    }

    // Only these members are read; anything else Stripe sends about the card is never decoded.
    private enum CodingKeys: String, CodingKey {
        case brand
        case last4
        case expMonth = "exp_month"
        case expYear = "exp_year"
        case fingerprint
        case funding
        case country
    }
}

/// A Stripe payment method; billing details (e-mail, address) are deliberately not decoded.
public struct PaymentMethod: Decodable, Sendable, Equatable {
    public var id: String
    /// E.g. `card`, `sepa_debit`, `us_bank_account`, `link`.
    public var type: String
    /// Nil once detached from its customer.
    public var customer: Expandable?
    public var created: Int64?
    public var livemode: Bool?
    /// Set when ``type`` is `card`.
    public var card: Card?
    public var metadata: [String: String]

    public init(
        id: String, type: String, customer: Expandable? = nil, created: Int64? = nil, livemode: Bool? = nil,
        card: Card? = nil, metadata: [String: String] = [:]
    ) {
        self.id = id
        self.type = type
        self.customer = customer
        self.created = created
        self.livemode = livemode
        self.card = card
        self.metadata = metadata
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, type: wire.type, customer: wire.customer, created: wire.created, livemode: wire.livemode,
            card: wire.card, metadata: wire.metadata.values)
    }

    private struct Wire: Decodable {
        let id: String
        let type: String
        let customer: Expandable?
        let created: Int64?
        let livemode: Bool?
        let card: Card?
        let metadata: StripeJSON.Metadata?
    }
}
