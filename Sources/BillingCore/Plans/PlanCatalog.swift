import Foundation

/// The validated plan catalog: the tiers an app sells, and which Stripe price, lookup key or
/// product grants which tier. Built from a ``PlanCatalogDocument``; every check that spans
/// tiers (unique ids, ranks and prices; the default tier exists) is made here, once, at start-up.
public struct PlanCatalog: Sendable, Equatable {
    /// The tiers in the catalog's order.
    public let tiers: [PlanTier]
    /// The tier of users that no subscription entitles to another (`free`).
    public let defaultTier: PlanTier
    /// What billingd counts per user, in the catalog's order.
    public let meters: [UsageMeter]

    private let tierIndexByID: [String: Int]
    private let tierIndexByPrice: [String: Int]
    private let tierIndexByLookupKey: [String: Int]
    private let tierIndexByProduct: [String: Int]
    private let tierIndexByAppStoreProduct: [String: Int]
    private let meterIndexByID: [String: Int]

    /// The catalog without `BILLINGD_PLANS`: one tier, `free`, with no features and no limits.
    /// Every paid subscription then has an unmapped price (see ``PlanResolution/plan``).
    public static let freeOnly = try! PlanCatalog(tiers: [PlanTier(id: "free", name: "Free", rank: 0)], defaultTierID: "free")

    /// Validates the tiers; the error names the first problem and where it is.
    public init(tiers: [PlanTier], defaultTierID: String = "free", meters: [UsageMeter] = []) throws(PlanCatalogError) {
        try self.init(validating: tiers, defaultTierID: defaultTierID, defaultTierPath: [.key("default_tier")], meters: meters)
    }

    /// Validates a decoded document.
    public init(document: PlanCatalogDocument) throws(PlanCatalogError) {
        let tiers = document.tiers.map { tier in
            PlanTier(
                id: tier.id, name: tier.name, rank: tier.rank, description: tier.description,
                prices: (tier.stripe?.prices ?? []).map { PlanPrice(id: $0.id, lookupKey: $0.lookupKey, interval: $0.interval) },
                products: tier.stripe?.products ?? [], appStoreProducts: (tier.appStore?.products ?? []).map(\.id),
                appStorePeriods: Dictionary(
                    (tier.appStore?.products ?? []).compactMap { product in product.period.map { (product.id, $0) } },
                    uniquingKeysWith: { first, _ in first }),
                features: tier.features,
                limits: tier.limits.map { PlanLimit(key: $0.key, value: $0.value) },
                pastDueGrace: tier.pastDueGraceDays ?? .days(0), appStoreSubscriptionGroup: tier.appStore?.subscriptionGroup,
                appStoreOffers: Dictionary(
                    (tier.appStore?.products ?? []).map { ($0.id, AppStoreProductOffers(promotionalOffers: $0.promotionalOffers, eligibility: $0.eligibility)) },
                    uniquingKeysWith: { first, _ in first }),
                appStoreSampleContentProvided: tier.appStore?.sampleContentProvided ?? false,
                appStoreConsumptionMeters: Dictionary(
                    (tier.appStore?.products ?? []).compactMap { product in product.consumptionMeter.map { (product.id, $0) } },
                    uniquingKeysWith: { first, _ in first }))
        }
        let meters = document.meters.map {
            UsageMeter(id: $0.id, kind: $0.kind, limit: $0.limit, enforcement: $0.enforcement, stripeMeter: $0.stripeMeter)
        }
        try self.init(validating: tiers, defaultTierID: document.defaultTier ?? "free", defaultTierPath: [.key("default_tier")], meters: meters)
    }

    private init(
        validating tiers: [PlanTier], defaultTierID: String, defaultTierPath: [PlanCatalogError.PathComponent], meters: [UsageMeter]
    ) throws(PlanCatalogError) {
        guard !tiers.isEmpty else {
            throw PlanCatalogError([.key("tiers")], "the catalog has no tiers; it needs at least the default tier (id: \(defaultTierID))")
        }
        var byID: [String: Int] = [:]
        var byRank: [Int64: Int] = [:]
        var byPrice: [String: Int] = [:]
        var byLookupKey: [String: Int] = [:]
        var byProduct: [String: Int] = [:]
        var byAppStoreProduct: [String: Int] = [:]
        func described(_ index: Int) -> String { "tiers[\(index)] (\(tiers[index].id))" }

        for (index, tier) in tiers.enumerated() {
            let path: [PlanCatalogError.PathComponent] = [.key("tiers"), .index(index)]
            func fail(_ key: [PlanCatalogError.PathComponent], _ message: String) -> PlanCatalogError {
                PlanCatalogError(path + key, message)
            }
            guard Self.isTierID(tier.id) else {
                throw fail([.key("id")], "\"\(tier.id)\" is not a tier id; expected 1 to 64 lowercase letters, digits, _ or -, starting with a letter or digit")
            }
            if let other = byID[tier.id] {
                throw fail([.key("id")], "\"\(tier.id)\" is already the id of \(described(other)); tier ids must be unique")
            }
            byID[tier.id] = index
            guard !tier.name.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw fail([.key("name")], "is empty; expected the tier's display name, e.g. \"Pro\"")
            }
            if let other = byRank[tier.rank] {
                throw fail([.key("rank")], "\(tier.rank) is already the rank of \(described(other)); ranks decide which tier a user with several subscriptions gets, so they must differ")
            }
            byRank[tier.rank] = index

            for (position, price) in tier.prices.enumerated() {
                let pricePath: [PlanCatalogError.PathComponent] = [.key("stripe"), .key("prices"), .index(position)]
                if let id = price.id {
                    guard Self.isStripeID(id) else {
                        throw fail(pricePath + [.key("id")], "\"\(id)\" is not a Stripe price id; expected an id such as price_1QabcXYZ")
                    }
                    guard !id.hasPrefix("prod_") else {
                        throw fail(pricePath + [.key("id")], "\"\(id)\" is a product id; list products under stripe.products, prices here")
                    }
                    if let other = byPrice[id] {
                        throw fail(pricePath + [.key("id")], "price \(id) already grants \(described(other)); a price can grant only one tier")
                    }
                    byPrice[id] = index
                }
                if let key = price.lookupKey {
                    guard Self.isLookupKey(key) else {
                        throw fail(pricePath + [.key("lookup_key")], "\"\(key)\" is not a lookup key; expected 1 to 200 characters without spaces or control characters")
                    }
                    if let other = byLookupKey[key] {
                        throw fail(pricePath + [.key("lookup_key")], "lookup key \(key) already grants \(described(other)); a lookup key can grant only one tier")
                    }
                    byLookupKey[key] = index
                }
            }
            for (position, product) in tier.products.enumerated() {
                let productPath: [PlanCatalogError.PathComponent] = [.key("stripe"), .key("products"), .index(position)]
                guard Self.isStripeID(product) else {
                    throw fail(productPath, "\"\(product)\" is not a Stripe product id; expected an id such as prod_RabcXYZ")
                }
                guard !product.hasPrefix("price_") else {
                    throw fail(productPath, "\"\(product)\" is a price id; list prices under stripe.prices, products here")
                }
                if let other = byProduct[product] {
                    throw fail(productPath, "product \(product) already grants \(described(other)); a product can grant only one tier")
                }
                byProduct[product] = index
            }
            for (position, product) in tier.appStoreProducts.enumerated() {
                let productPath: [PlanCatalogError.PathComponent] = [.key("app_store"), .key("products"), .index(position)]
                guard Self.isAppStoreProductID(product) else {
                    throw fail(productPath, "\"\(product)\" is not an App Store product id; expected the id from App Store Connect, such as com.example.pro.monthly (letters, digits, . _ and -)")
                }
                if let other = byAppStoreProduct[product] {
                    throw fail(productPath, "App Store product \(product) already grants \(described(other)); a product can grant only one tier")
                }
                byAppStoreProduct[product] = index
            }

            var features = Set<String>()
            for (position, feature) in tier.features.enumerated() {
                guard Self.isKey(feature) else {
                    throw fail([.key("features"), .index(position)], "\"\(feature)\" is not a feature key; expected 1 to 100 letters, digits, _ . : or -, starting with a letter or digit")
                }
                guard features.insert(feature).inserted else {
                    throw fail([.key("features"), .index(position)], "\"\(feature)\" is listed twice")
                }
            }
            for limit in tier.limits {
                guard Self.isKey(limit.key) else {
                    throw fail([.key("limits"), .key(limit.key)], "\"\(limit.key)\" is not a limit key; expected 1 to 100 letters, digits, _ . : or -, starting with a letter or digit")
                }
            }
            if case .days(let days) = tier.pastDueGrace, !(0...366).contains(days) {
                throw fail([.key("past_due_grace_days")], "\(days) is out of range; expected 0 to 366 days, or unlimited")
            }
        }

        guard let defaultIndex = byID[defaultTierID] else {
            let ids = tiers.map(\.id).joined(separator: ", ")
            throw PlanCatalogError(
                defaultTierPath,
                "no tier has the id \"\(defaultTierID)\"; users without a subscription get the default tier, so add one (id: \(defaultTierID), rank below the paid tiers, no Stripe prices) or set default_tier to one of: \(ids)")
        }
        let defaultTier = tiers[defaultIndex]
        for limit in defaultTier.limits {
            if case .perQuantity = limit.value {
                throw PlanCatalogError(
                    [.key("tiers"), .index(defaultIndex), .key("limits"), .key(limit.key)],
                    "the default tier (\(defaultTier.id)) is what users without a subscription get, so it has no quantity to count; give a number or unlimited")
            }
        }

        self.tiers = tiers
        self.defaultTier = defaultTier
        self.meters = meters
        meterIndexByID = try Self.validate(meters: meters, tiers: tiers)
        try Self.validateConsumptionMeters(tiers: tiers, meters: meters, meterIndexByID: meterIndexByID)
        tierIndexByID = byID
        tierIndexByPrice = byPrice
        tierIndexByLookupKey = byLookupKey
        tierIndexByProduct = byProduct
        tierIndexByAppStoreProduct = byAppStoreProduct
    }

    /// The meter with this id.
    public func meter(id: String) -> UsageMeter? {
        meterIndexByID[id].map { meters[$0] }
    }

    /// The tier with this id.
    public func tier(id: String) -> PlanTier? {
        tierIndexByID[id].map { tiers[$0] }
    }

    /// The tier a subscription item's price grants: by price id first, then by lookup key, then by
    /// product, so that one price can be carved out of a product that grants another tier.
    public func tier(price: String?, lookupKey: String?, product: String?) -> PlanTier? {
        if let price, let index = tierIndexByPrice[price] { return tiers[index] }
        if let lookupKey, let index = tierIndexByLookupKey[lookupKey] { return tiers[index] }
        if let product, let index = tierIndexByProduct[product] { return tiers[index] }
        return nil
    }

    /// The tier an App Store product grants.
    public func tier(appStoreProduct product: String) -> PlanTier? {
        tierIndexByAppStoreProduct[product].map { tiers[$0] }
    }

    /// The period an App Store product renews for, when the catalog gives one.
    public func period(appStoreProduct product: String) -> AppStorePeriod? {
        tier(appStoreProduct: product)?.appStorePeriods[product]
    }

    /// Whether the app offered a sample of an App Store product's content before purchase: its
    /// tier's `sample_content_provided`; false for a product the catalog does not map.
    public func sampleContentProvided(appStoreProduct product: String) -> Bool {
        tier(appStoreProduct: product)?.appStoreSampleContentProvided ?? false
    }

    /// The meter whose use tells how much of a purchase of an App Store product was consumed
    /// (its `consumption_meter`), with the limit the product's tier gives it; nil when the
    /// catalog names none.
    public func consumptionMeter(appStoreProduct product: String) -> (meter: UsageMeter, limit: PlanLimit.Value)? {
        guard let tier = tier(appStoreProduct: product), let id = tier.appStoreConsumptionMeters[product], let meter = meter(id: id),
            let limit = tier.limits.first(where: { $0.key == meter.limit })
        else { return nil }
        return (meter, limit.value)
    }

    // MARK: - Shapes

    /// An App Store product id: 1 to 255 letters, digits, `.`, `_` or `-`.
    static func isAppStoreProductID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...255).contains(bytes.count) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || [UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-")].contains($0) }
    }

    static func isTierID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...64).contains(bytes.count), isLowerAlphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    static func isKey(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...100).contains(bytes.count), isAlphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || [UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "-")].contains($0) }
    }

    static func isStripeID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...255).contains(bytes.count) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    static func isLookupKey(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...200).contains(bytes.count) else { return false }
        return bytes.allSatisfy { $0 > 0x20 && $0 != 0x7F }
    }

    private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        isLowerAlphanumeric(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
}
