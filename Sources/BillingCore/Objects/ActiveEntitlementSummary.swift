/// A feature a customer is entitled to right now, from Stripe Entitlements.
public struct ActiveEntitlement: Decodable, Sendable, Equatable {
    public var id: String
    /// The feature's lookup key, e.g. `projects_unlimited`; what the app checks.
    public var lookupKey: String
    /// The feature's id, whether Stripe sent the id or the expanded feature.
    public var featureID: String?

    public init(id: String, lookupKey: String, featureID: String? = nil) {
        self.id = id
        self.lookupKey = lookupKey
        self.featureID = featureID
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(id: wire.id, lookupKey: wire.lookup_key, featureID: wire.feature?.id)
    }

    private struct Wire: Decodable {
        let id: String
        let lookup_key: String
        let feature: Expandable?
    }
}

/// The complete set of a customer's active entitlements, as sent by
/// `entitlements.active_entitlement_summary.updated`.
public struct ActiveEntitlementSummary: Decodable, Sendable, Equatable {
    /// The customer's id.
    public var customer: String
    public var entitlements: [ActiveEntitlement]
    /// True when Stripe sent only the first page; list the customer's entitlements for the rest.
    public var hasMore: Bool
    public var livemode: Bool?

    public init(customer: String, entitlements: [ActiveEntitlement], hasMore: Bool = false, livemode: Bool? = nil) {
        self.customer = customer
        self.entitlements = entitlements
        self.hasMore = hasMore
        self.livemode = livemode
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            customer: wire.customer, entitlements: wire.entitlements?.data ?? [],
            hasMore: wire.entitlements?.has_more ?? false, livemode: wire.livemode)
    }

    private struct Wire: Decodable {
        let customer: String
        let entitlements: StripeJSON.List<ActiveEntitlement>?
        let livemode: Bool?
    }
}
