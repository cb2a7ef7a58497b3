/// The plan catalog file as written (`BILLINGD_PLANS`), before the checks that span tiers.
/// Decodes from YAML (billingd's format) or JSON with the same keys. Unknown keys are refused,
/// so that a misspelt `limts:` never silently drops a tier's limits; every error carries the
/// path of the offending key.
public struct PlanCatalogDocument: Decodable, Sendable, Equatable {
    /// The catalog format; only 1 exists.
    public var version: Int64?
    /// The tier of users without a subscription that grants one; `free` when not given.
    public var defaultTier: String?
    public var tiers: [Tier]
    /// What billingd counts per user; see ``UsageMeter``.
    public var meters: [Meter]

    /// One meter: `{id: radars, kind: counter, limit: radars, enforcement: hard, stripe_meter: radars_created}`.
    public struct Meter: Decodable, Sendable, Equatable {
        public var id: String
        public var kind: UsageMeter.Kind
        public var limit: String
        public var enforcement: UsageMeter.Enforcement
        public var stripeMeter: String?

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CatalogKey.self)
            try container.refuseUnknownKeys(["id", "kind", "limit", "enforcement", "stripe_meter"])
            id = try container.required(String.self, "id")
            kind = try container.word("kind", expected: "counter (adds up, starts again at 0 each billing period) or gauge (a level the app sets)")
            limit = try container.required(String.self, "limit")
            enforcement = try container.optional(String.self, "enforcement") == nil
                ? .hard : try container.word("enforcement", expected: "hard (a consume past the limit is refused) or soft (allowed, counted as overage)")
            stripeMeter = try container.optional(String.self, "stripe_meter")
        }
    }

    public struct Tier: Decodable, Sendable, Equatable {
        public var id: String
        public var name: String
        public var rank: Int64
        public var description: String?
        public var stripe: Stripe?
        public var appStore: AppStore?
        public var features: [String]
        public var limits: [Limit]
        public var pastDueGraceDays: PastDueGrace?

        static let keys = ["id", "name", "rank", "description", "stripe", "app_store", "features", "limits", "past_due_grace_days"]

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CatalogKey.self)
            try container.refuseUnknownKeys(Self.keys)
            id = try container.required(String.self, "id")
            name = try container.required(String.self, "name")
            rank = try container.required(Int64.self, "rank")
            description = try container.optional(String.self, "description")
            stripe = try container.optional(Stripe.self, "stripe")
            appStore = try container.optional(AppStore.self, "app_store")
            features = try container.optional([String].self, "features") ?? []
            if container.contains(CatalogKey("limits")), !(try container.decodeNil(forKey: CatalogKey("limits"))) {
                let limits = try container.nestedContainer(keyedBy: CatalogKey.self, forKey: CatalogKey("limits"))
                // In the file's order: the operator's order is the answer's order.
                self.limits = try limits.allKeys.map { key in Limit(key: key.stringValue, value: try limits.decode(LimitValue.self, forKey: key).value) }
            } else {
                limits = []
            }
            pastDueGraceDays = try container.optional(GraceValue.self, "past_due_grace_days")?.value
        }
    }

    /// The Stripe side of a tier: the prices and products that grant it.
    public struct Stripe: Decodable, Sendable, Equatable {
        public var prices: [Price]
        public var products: [String]

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CatalogKey.self)
            try container.refuseUnknownKeys(["prices", "products"])
            prices = try container.optional([Price].self, "prices") ?? []
            products = try container.optional([String].self, "products") ?? []
        }
    }

    /// The App Store side of a tier: the products whose purchase grants it, the App Store
    /// subscription group they belong to (`subscription_group`, App Store Connect's group id),
    /// which ties tiers into one group for offers, and whether the app offered a free sample,
    /// a trial or a description of the tier's content before purchase (`sample_content_provided`,
    /// told to Apple when a customer asks for a refund; false when not given).
    public struct AppStore: Decodable, Sendable, Equatable {
        public var products: [Product]
        public var subscriptionGroup: String?
        public var sampleContentProvided: Bool

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CatalogKey.self)
            try container.refuseUnknownKeys(["products", "subscription_group", "sample_content_provided"])
            products = try container.optional([Product].self, "products") ?? []
            subscriptionGroup = try container.optional(String.self, "subscription_group")
            if container.contains(CatalogKey("sample_content_provided")) {
                guard let flag = try? container.decode(Bool.self, forKey: CatalogKey("sample_content_provided")) else {
                    throw DecodingError.dataCorrupted(.init(
                        codingPath: container.codingPath + [CatalogKey("sample_content_provided")],
                        debugDescription: "not true or false; expected true (the app offered a free sample, a trial or a description of the content before purchase) or false"))
                }
                sampleContentProvided = flag
            } else {
                sampleContentProvided = false
            }
            if let subscriptionGroup, subscriptionGroup.isEmpty || subscriptionGroup.count > 64 {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: container.codingPath + [CatalogKey("subscription_group")],
                    debugDescription: "not a subscription group id; expected the id App Store Connect shows for the group, such as 21482038"))
            }
        }
    }

    /// An App Store product: its id alone (`com.example.pro.monthly`), or with the period it
    /// renews for (`{id: com.example.pro.monthly, period: P1M}`), which the revenue metrics
    /// take over the length of its transactions, and the promotional offers billingd signs for it
    /// (`promotional_offers: [winback_50]`, `eligibility: existing | lapsed | any`), and the meter
    /// whose use measures how much of a purchase was consumed when its buyer asks Apple for a
    /// refund (`consumption_meter: exports`).
    public struct Product: Decodable, Sendable, Equatable {
        public var id: String
        public var period: AppStorePeriod?
        public var promotionalOffers: [String]
        public var eligibility: PromotionalOfferEligibility
        public var consumptionMeter: String?

        public init(
            id: String, period: AppStorePeriod? = nil, promotionalOffers: [String] = [], eligibility: PromotionalOfferEligibility = .any,
            consumptionMeter: String? = nil
        ) {
            self.id = id
            self.period = period
            self.promotionalOffers = promotionalOffers
            self.eligibility = eligibility
            self.consumptionMeter = consumptionMeter
        }

        public init(from decoder: any Decoder) throws {
            if let id = try? decoder.singleValueContainer().decode(String.self) {
                self.id = id
                period = nil
                promotionalOffers = []
                eligibility = .any
                consumptionMeter = nil
                return
            }
            guard let container = try? decoder.container(keyedBy: CatalogKey.self) else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: decoder.codingPath,
                    debugDescription: "not a product; expected a product id or {id: com.example.pro.monthly, period: P1M}"))
            }
            try container.refuseUnknownKeys(["id", "period", "promotional_offers", "eligibility", "consumption_meter"])
            id = try container.required(String.self, "id")
            consumptionMeter = try container.optional(String.self, "consumption_meter")
            promotionalOffers = try container.optional([String].self, "promotional_offers") ?? []
            for (index, offer) in promotionalOffers.enumerated() where !PlanCatalog.isAppStoreProductID(offer) {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: container.codingPath + [CatalogKey("promotional_offers"), CatalogKey(intValue: index)!],
                    debugDescription: "not an offer identifier; expected the promotional offer's identifier from App Store Connect (letters, digits, ., _ or -)"))
            }
            eligibility = try container.optional(String.self, "eligibility") == nil
                ? .any : try container.word("eligibility", expected: "existing (subscribed now), lapsed (subscribed before, not now) or any")
            if let period = try container.optional(String.self, "period") {
                guard let parsed = AppStorePeriod(rawValue: period.uppercased()) else {
                    throw DecodingError.dataCorrupted(.init(
                        codingPath: container.codingPath + [CatalogKey("period")],
                        debugDescription: "\"\(period)\" is not a subscription period; expected P1W, P1M, P2M, P3M, P6M or P1Y"))
                }
                self.period = parsed
            } else {
                period = nil
            }
        }
    }

    /// One price entry: `{lookup_key: pro_monthly, interval: month}`, `{id: price_…}`.
    public struct Price: Decodable, Sendable, Equatable {
        public var id: String?
        public var lookupKey: String?
        public var interval: RecurringInterval?

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CatalogKey.self)
            try container.refuseUnknownKeys(["id", "lookup_key", "interval"])
            id = try container.optional(String.self, "id")
            lookupKey = try container.optional(String.self, "lookup_key")
            if let interval = try container.optional(String.self, "interval") {
                guard ["day", "week", "month", "year"].contains(interval) else {
                    throw DecodingError.dataCorrupted(.init(
                        codingPath: container.codingPath + [CatalogKey("interval")],
                        debugDescription: "\"\(interval)\" is not an interval; expected month, year, week or day"))
                }
                self.interval = RecurringInterval(rawValue: interval)
            } else {
                interval = nil
            }
            guard id != nil || lookupKey != nil else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: container.codingPath,
                    debugDescription: "a price needs id (price_…) or lookup_key, or both"))
            }
        }
    }

    /// A limit as written: `100`, `unlimited`, `quantity` or `{per_quantity: 5}`.
    public struct Limit: Sendable, Equatable {
        public var key: String
        public var value: PlanLimit.Value
    }

    static let limitExpectation =
        "expected a whole number (0 or more), unlimited, quantity (the subscription's quantity, e.g. seats) or {per_quantity: N}"

    struct LimitValue: Decodable {
        let value: PlanLimit.Value

        init(from decoder: any Decoder) throws {
            func invalid(_ what: String) -> DecodingError {
                .dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "\(what); \(PlanCatalogDocument.limitExpectation)"))
            }
            if let container = try? decoder.container(keyedBy: CatalogKey.self) {
                try container.refuseUnknownKeys(["per_quantity"])
                let factor = try container.required(Int64.self, "per_quantity")
                guard factor >= 1 else {
                    throw DecodingError.dataCorrupted(.init(
                        codingPath: container.codingPath + [CatalogKey("per_quantity")],
                        debugDescription: "\(factor) is not a factor; expected a whole number of 1 or more"))
                }
                value = .perQuantity(factor)
                return
            }
            let single = try decoder.singleValueContainer()
            if let number = try? single.decode(Int64.self) {
                guard number >= 0 else { throw invalid("\(number) is negative") }
                value = .count(number)
                return
            }
            guard let word = try? single.decode(String.self) else { throw invalid("not a limit") }
            switch word.lowercased() {
            case "unlimited": value = .unlimited
            case "quantity": value = .perQuantity(1)
            default: throw invalid("\"\(word)\" is not a limit")
            }
        }
    }

    struct GraceValue: Decodable {
        let value: PastDueGrace

        init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            let expectation = "expected a number of days from 0 (no grace: access ends when a payment fails) to 366, or unlimited (as long as Stripe keeps retrying)"
            if let days = try? single.decode(Int64.self) {
                guard (0...366).contains(days) else {
                    throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "\(days) is out of range; \(expectation)"))
                }
                value = .days(days)
                return
            }
            guard let word = try? single.decode(String.self), word.lowercased() == "unlimited" else {
                let shown = (try? single.decode(String.self)).map { "\"\($0)\" is not a grace period; " } ?? ""
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "\(shown)\(expectation)"))
            }
            value = .unlimited
        }
    }

    static let keys = ["version", "default_tier", "tiers", "meters"]

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CatalogKey.self)
        try container.refuseUnknownKeys(Self.keys)
        version = try container.optional(Int64.self, "version")
        if let version, version != 1 {
            throw DecodingError.dataCorrupted(.init(
                codingPath: [CatalogKey("version")], debugDescription: "\(version) is not a catalog version this billingd reads; expected 1"))
        }
        defaultTier = try container.optional(String.self, "default_tier")
        tiers = try container.required([Tier].self, "tiers")
        meters = try container.optional([Meter].self, "meters") ?? []
    }
}

/// A key of the catalog file, any string.
struct CatalogKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(_ name: String) {
        stringValue = name
        intValue = nil
    }

    init?(stringValue: String) {
        self.init(stringValue)
    }

    init?(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}

extension KeyedDecodingContainer where Key == CatalogKey {
    /// Throws at the first key that is not one of `known`, naming the ones that are.
    func refuseUnknownKeys(_ known: [String]) throws {
        for key in allKeys where !known.contains(key.stringValue) {
            throw DecodingError.dataCorrupted(.init(
                codingPath: codingPath + [key],
                debugDescription: "unknown key; expected one of: \(known.joined(separator: ", "))"))
        }
    }

    func required<T: Decodable>(_ type: T.Type, _ name: String) throws -> T {
        try decode(type, forKey: CatalogKey(name))
    }

    func optional<T: Decodable>(_ type: T.Type, _ name: String) throws -> T? {
        try decodeIfPresent(type, forKey: CatalogKey(name))
    }

    /// A required word of a closed set, such as a meter's `kind`.
    func word<T: RawRepresentable>(_ name: String, expected: String) throws -> T where T.RawValue == String {
        let text = try required(String.self, name)
        guard let value = T(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath + [CatalogKey(name)], debugDescription: "\"\(text)\" is not valid; expected \(expected)"))
        }
        return value
    }
}
