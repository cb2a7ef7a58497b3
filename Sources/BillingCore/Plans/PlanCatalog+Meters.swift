extension PlanCatalog {
    /// Checks the meters against each other and the tiers; the index of each meter by id.
    static func validate(meters: [UsageMeter], tiers: [PlanTier]) throws(PlanCatalogError) -> [String: Int] {
        var byID: [String: Int] = [:]
        var byStripeMeter: [String: Int] = [:]
        for (index, meter) in meters.enumerated() {
            let path: [PlanCatalogError.PathComponent] = [.key("meters"), .index(index)]
            guard isKey(meter.id) else {
                throw PlanCatalogError(path + [.key("id")], "\"\(meter.id)\" is not a meter id; expected 1 to 100 letters, digits, _ . : or -, starting with a letter or digit")
            }
            if let other = byID[meter.id] {
                throw PlanCatalogError(path + [.key("id")], "\"\(meter.id)\" is already the id of meters[\(other)]; meter ids must be unique")
            }
            byID[meter.id] = index
            guard tiers.contains(where: { tier in tier.limits.contains { $0.key == meter.limit } }) else {
                let known = Set(tiers.flatMap { $0.limits.map(\.key) }).sorted()
                throw PlanCatalogError(
                    path + [.key("limit")],
                    "no tier has a limit \"\(meter.limit)\"; name one of the tiers' limits (\(known.isEmpty ? "none are defined" : known.joined(separator: ", "))) or add \(meter.limit) to every tier's limits")
            }
            for (tierIndex, tier) in tiers.enumerated() where !tier.limits.contains(where: { $0.key == meter.limit }) {
                throw PlanCatalogError(
                    [.key("tiers"), .index(tierIndex), .key("limits")],
                    "tier \(tier.id) has no limit \(meter.limit), which meter \(meter.id) is capped by; give it a number or unlimited")
            }
            if let event = meter.stripeMeter {
                guard meter.kind == .counter else {
                    throw PlanCatalogError(
                        path + [.key("stripe_meter")],
                        "a gauge cannot report to a Stripe Billing Meter: meter events add up, a gauge is a level; make \(meter.id) a counter or remove stripe_meter")
                }
                guard isStripeEventName(event) else {
                    throw PlanCatalogError(
                        path + [.key("stripe_meter")],
                        "\"\(event)\" is not a Stripe meter event name; expected the meter's event_name, 1 to 100 letters, digits, _ . : or -")
                }
                if let other = byStripeMeter[event] {
                    throw PlanCatalogError(
                        path + [.key("stripe_meter")], "meters[\(other)] already reports to \(event); one Stripe meter counts one meter's usage")
                }
                byStripeMeter[event] = index
            }
        }
        return byID
    }

    /// Each `consumption_meter` names a counter of the catalog: a purchase's consumption is the
    /// share of its tier's limit used in the purchase's period, which a gauge (a level) has not.
    static func validateConsumptionMeters(tiers: [PlanTier], meters: [UsageMeter], meterIndexByID: [String: Int]) throws(PlanCatalogError) {
        for (tierIndex, tier) in tiers.enumerated() {
            for (position, product) in tier.appStoreProducts.enumerated() {
                guard let id = tier.appStoreConsumptionMeters[product] else { continue }
                let path: [PlanCatalogError.PathComponent] = [
                    .key("tiers"), .index(tierIndex), .key("app_store"), .key("products"), .index(position), .key("consumption_meter"),
                ]
                guard let index = meterIndexByID[id] else {
                    let known = meters.filter { $0.kind == .counter }.map(\.id)
                    throw PlanCatalogError(
                        path,
                        "no meter has the id \"\(id)\"; name a counter of the catalog's meters (\(known.isEmpty ? "none are defined" : known.joined(separator: ", "))) or remove consumption_meter")
                }
                guard meters[index].kind == .counter else {
                    throw PlanCatalogError(
                        path,
                        "\(id) is a gauge: a purchase's consumption is the share of its tier's limit used during the purchase, which a level does not tell; name a counter")
                }
            }
        }
    }

    /// A Stripe Billing Meter `event_name`.
    static func isStripeEventName(_ text: String) -> Bool {
        isKey(text)
    }

    /// The lowest-ranked tier above `rank` whose limit for `meter` (per-seat limits at
    /// `quantity`) allows `total`: the upgrade to offer when a consume is refused.
    public func cheapestTier(allowing total: Int64, of meter: UsageMeter, above rank: Int64, quantity: Int64) -> PlanTier? {
        tiers.filter { $0.rank > rank }.sorted { $0.rank < $1.rank }.first { tier in
            switch Self.limits(of: tier, quantity: quantity).first(where: { $0.key == meter.limit })?.value {
            case .unlimited: true
            case .count(let count): total <= count
            case nil: false
            }
        }
    }
}
