/// `expand[]`: replaces ids with the objects they name, as deep as Stripe allows (four levels),
/// e.g. `customer`, `latest_invoice`, `items.data.price.product`, `line_items`.
extension FakeStore {
    private static let maximumExpansionDepth = 4

    func expanded(_ json: [UInt8], paths: [String], in account: AccountState) throws(StripeAPIError) -> [UInt8] {
        guard var object = try? JSONValue(parsing: json) else { return json }
        for path in paths {
            let components = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard components.count <= Self.maximumExpansionDepth, !components.contains("") else {
                throw .invalidRequest(
                    "You cannot expand more than \(Self.maximumExpansionDepth) levels of a property. Property: \(path)",
                    param: "expand")
            }
            try expand(&object, along: components[...], path: path, in: account)
        }
        return object.serialized()
    }

    private func expand(
        _ value: inout JSONValue, along components: ArraySlice<String>, path: String, in account: AccountState
    )
        throws(StripeAPIError)
    {
        guard let key = components.first else { return }
        if case .array(var elements) = value {
            for index in elements.indices { try expand(&elements[index], along: components, path: path, in: account) }
            value = .array(elements)
            return
        }
        guard case .object = value else { throw Self.notExpandable(path) }
        var expandedMember: JSONValue
        if key == "line_items", value["object"]?.stringValue == "checkout.session" {
            expandedMember = lineItems(ofSession: value, in: account)
        } else if let member = value[key] {
            switch member {
            case .string(let id):
                guard let object = expandedObject(id, member: key, in: account) else { throw Self.notExpandable(path) }
                expandedMember = object
            case .null, .object, .array:
                expandedMember = member
            default:
                throw Self.notExpandable(path)
            }
        } else {
            throw Self.notExpandable(path)
        }
        if components.count > 1, !expandedMember.isNull {
            try expand(&expandedMember, along: components.dropFirst(), path: path, in: account)
        }
        value[key] = expandedMember
    }

    /// The object an id names in this account (a deleted one as its stub).
    private func expandedObject(_ id: String, member: String, in account: AccountState) -> JSONValue? {
        guard member != "id", let kind = ObjectKind(id: id), kind != .event else { return nil }
        if let stored = account[kind][id] { return stored.value }
        if let stub = account.deletedStubs[id] { return try? JSONValue(parsing: stub) }
        return nil
    }

    private func lineItems(ofSession session: JSONValue, in account: AccountState) -> JSONValue {
        let id = session["id"]?.stringValue ?? ""
        let order = account.checkoutOrders[id] ?? .init(lineItems: [], trialDays: nil, subscriptionMetadata: [:])
        return CheckoutObjects.lineItems(of: order, session: id)
    }

    private static func notExpandable(_ path: String) -> StripeAPIError {
        .invalidRequest("This property cannot be expanded (\(path)).", param: "expand")
    }
}
