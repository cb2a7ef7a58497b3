/// A Stripe customer, or the `{"id", "deleted": true}` stub Stripe returns for a deleted one.
public struct Customer: Decodable, Sendable, Equatable {
    public var id: String
    public var created: Int64?
    public var email: String?
    public var name: String?
    public var deleted: Bool
    public var livemode: Bool?
    public var metadata: [String: String]
    public var currency: String?
    public var delinquent: Bool?
    /// `invoice_settings.default_payment_method`.
    public var defaultPaymentMethod: Expandable?
    public var defaultSource: Expandable?

    /// The app user this customer belongs to, set by billingd as `metadata.app_user_id`.
    public var appUserID: String? { metadata["app_user_id"] }

    public init(
        id: String, created: Int64? = nil, email: String? = nil, name: String? = nil, deleted: Bool = false,
        livemode: Bool? = nil, metadata: [String: String] = [:], currency: String? = nil, delinquent: Bool? = nil,
        defaultPaymentMethod: Expandable? = nil, defaultSource: Expandable? = nil
    ) {
        self.id = id
        self.created = created
        self.email = email
        self.name = name
        self.deleted = deleted
        self.livemode = livemode
        self.metadata = metadata
        self.currency = currency
        self.delinquent = delinquent
        self.defaultPaymentMethod = defaultPaymentMethod
        self.defaultSource = defaultSource
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, created: wire.created, email: wire.email, name: wire.name, deleted: wire.deleted ?? false,
            livemode: wire.livemode, metadata: wire.metadata.values, currency: wire.currency,
            delinquent: wire.delinquent, defaultPaymentMethod: wire.invoice_settings?.default_payment_method,
            defaultSource: wire.default_source)
    }

    private struct Wire: Decodable {
        struct InvoiceSettings: Decodable {
            let default_payment_method: Expandable?
        }
        let id: String
        let created: Int64?
        let email: String?
        let name: String?
        let deleted: Bool?
        let livemode: Bool?
        let metadata: StripeJSON.Metadata?
        let currency: String?
        let delinquent: Bool?
        let invoice_settings: InvoiceSettings?
        let default_source: Expandable?
    }
}
