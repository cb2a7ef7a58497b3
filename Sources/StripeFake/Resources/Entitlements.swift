/// Entitlements: `GET /v1/entitlements/active_entitlements?customer=…`, and the helper that sets
/// a customer's active entitlements as Stripe does when a subscription's features change.
extension FakeStore {
    /// Replaces a customer's active entitlements with features named by `lookupKeys`, emitting
    /// `entitlements.active_entitlement_summary.updated`. Unchanged features keep their ids.
    @discardableResult
    func setActiveEntitlements(
        customer: String, lookupKeys: [String], in account: AccountState
    ) throws(StripeAPIError)
        -> JSONValue
    {
        _ = try existing(.customer, customer, in: account, param: "customer")
        let old = account.activeEntitlements[customer] ?? []
        let entitlements: [JSONValue] = lookupKeys.map { key in
            if let kept = old.first(where: { $0["lookup_key"]?.stringValue == key }) { return kept }
            let feature = account.featureIDs[key] ?? ids.make("feat_test_", length: 28)
            account.featureIDs[key] = feature
            return [
                "feature": .string(feature), "id": .string(ids.make("ent_test_", length: 28)), "livemode": false,
                "lookup_key": .string(key), "object": "entitlements.active_entitlement",
            ]
        }
        account.activeEntitlements[customer] = entitlements
        func summary(_ entitlements: [JSONValue]) -> JSONValue {
            [
                "customer": .string(customer),
                "entitlements": [
                    "data": .array(entitlements), "has_more": false, "object": "list",
                    "url": .string("/v1/customer/\(customer)/entitlements"),
                ],
                "livemode": false, "object": "entitlements.active_entitlement_summary",
            ]
        }
        let current = summary(entitlements)
        emit(
            "entitlements.active_entitlement_summary.updated", object: current.serialized(),
            previous: ["entitlements": ["data": .array(old)]], in: account, origin: .automatic)
        return current
    }

    func listActiveEntitlements(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["customer", "ending_before", "limit", "starting_after"])
        let list = try ListParameters(form)
        let customer = try form.requiredString("customer")
        let account = account(request.account)
        _ = try existing(.customer, customer, in: account, param: "customer")
        var entitlements = account.activeEntitlements[customer] ?? []
        let ids = entitlements.map { $0["id"]?.stringValue ?? "" }
        if let after = list.startingAfter {
            guard let index = ids.firstIndex(of: after) else {
                throw .invalidRequest(
                    "No such active entitlement: '\(after)'", param: "starting_after", code: "resource_missing")
            }
            entitlements = Array(entitlements[(index + 1)...])
        } else if let before = list.endingBefore {
            guard let index = ids.firstIndex(of: before) else {
                throw .invalidRequest(
                    "No such active entitlement: '\(before)'", param: "ending_before", code: "resource_missing")
            }
            let before = entitlements[..<index]
            entitlements = Array(before.suffix(list.limit))
            return APIResponse(Self.entitlementPage(entitlements, hasMore: before.count > list.limit))
        }
        return APIResponse(
            Self.entitlementPage(Array(entitlements.prefix(list.limit)), hasMore: entitlements.count > list.limit))
    }

    private static func entitlementPage(_ entitlements: [JSONValue], hasMore: Bool) -> JSONValue {
        [
            "object": "list", "data": .array(entitlements), "has_more": .bool(hasMore),
            "url": "/v1/entitlements/active_entitlements",
        ]
    }
}
