/// A Stripe product: the thing sold (a tier such as "Pro"), priced by one or more ``Price``s.
public struct Product: Decodable, Sendable, Equatable {
    public var id: String
    public var name: String?
    public var active: Bool?
    public var description: String?
    public var defaultPrice: Expandable?
    public var created: Int64?
    public var updated: Int64?
    public var livemode: Bool?
    public var metadata: [String: String]
    public var deleted: Bool

    public init(
        id: String, name: String? = nil, active: Bool? = nil, description: String? = nil,
        defaultPrice: Expandable? = nil, created: Int64? = nil, updated: Int64? = nil, livemode: Bool? = nil,
        metadata: [String: String] = [:], deleted: Bool = false
    ) {
        self.id = id
        self.name = name
        self.active = active
        self.description = description
        self.defaultPrice = defaultPrice
        self.created = created
        self.updated = updated
        self.livemode = livemode
        self.metadata = metadata
        self.deleted = deleted
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, name: wire.name, active: wire.active, description: wire.description,
            defaultPrice: wire.default_price, created: wire.created, updated: wire.updated, livemode: wire.livemode,
            metadata: wire.metadata.values, deleted: wire.deleted ?? false)
    }

    private struct Wire: Decodable {
        let id: String
        let name: String?
        let active: Bool?
        let description: String?
        let default_price: Expandable?
        let created: Int64?
        let updated: Int64?
        let livemode: Bool?
        let metadata: StripeJSON.Metadata?
        let deleted: Bool?
    }
}
