/// How often a recurring price bills; values Stripe adds later are kept as they come.
public struct RecurringInterval: RawRepresentable, Codable, Hashable, Sendable, ExpressibleByStringLiteral,
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

    public static let day = RecurringInterval(rawValue: "day")
    public static let week = RecurringInterval(rawValue: "week")
    public static let month = RecurringInterval(rawValue: "month")
    public static let year = RecurringInterval(rawValue: "year")
}

/// The billing cycle of a recurring price (`price.recurring`).
public struct Recurring: Decodable, Sendable, Equatable {
    public var interval: RecurringInterval
    public var intervalCount: Int64?
    /// `licensed` or `metered`.
    public var usageType: String?

    public init(interval: RecurringInterval, intervalCount: Int64? = nil, usageType: String? = nil) {
        self.interval = interval
        self.intervalCount = intervalCount
        self.usageType = usageType
    }

    private enum CodingKeys: String, CodingKey {
        case interval
        case intervalCount = "interval_count"
        case usageType = "usage_type"
    }
}

/// A Stripe price: what a product costs and how often, in minor units of its currency.
public struct Price: Decodable, Sendable, Equatable {
    public var id: String
    public var product: Expandable?
    public var active: Bool?
    public var currency: String?
    public var unitAmount: Int64?
    public var lookupKey: String?
    public var nickname: String?
    /// `one_time` or `recurring`.
    public var type: String?
    public var recurring: Recurring?
    public var created: Int64?
    public var livemode: Bool?
    public var metadata: [String: String]
    public var deleted: Bool

    public init(
        id: String, product: Expandable? = nil, active: Bool? = nil, currency: String? = nil,
        unitAmount: Int64? = nil, lookupKey: String? = nil, nickname: String? = nil, type: String? = nil,
        recurring: Recurring? = nil, created: Int64? = nil, livemode: Bool? = nil, metadata: [String: String] = [:],
        deleted: Bool = false
    ) {
        self.id = id
        self.product = product
        self.active = active
        self.currency = currency
        self.unitAmount = unitAmount
        self.lookupKey = lookupKey
        self.nickname = nickname
        self.type = type
        self.recurring = recurring
        self.created = created
        self.livemode = livemode
        self.metadata = metadata
        self.deleted = deleted
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, product: wire.product, active: wire.active, currency: wire.currency,
            unitAmount: wire.unit_amount, lookupKey: wire.lookup_key, nickname: wire.nickname, type: wire.type,
            recurring: wire.recurring, created: wire.created, livemode: wire.livemode,
            metadata: wire.metadata.values, deleted: wire.deleted ?? false)
    }

    private struct Wire: Decodable {
        let id: String
        let product: Expandable?
        let active: Bool?
        let currency: String?
        let unit_amount: Int64?
        let lookup_key: String?
        let nickname: String?
        let type: String?
        let recurring: Recurring?
        let created: Int64?
        let livemode: Bool?
        let metadata: StripeJSON.Metadata?
        let deleted: Bool?
    }
}
