/// Direct reads and changes of state for tests: with an event (as if Stripe changed the object)
/// or without one (drift that only a reconcile can find).
extension FakeStore {
    func object(_ kind: ObjectKind, _ id: String, account: String?) -> JSONValue? {
        let state = self.account(account)
        if let stored = state[kind][id] { return stored.value }
        return state.deletedStubs[id].flatMap { try? JSONValue(parsing: $0) }
    }

    func ids(of kind: ObjectKind, account: String?) -> [String] { self.account(account)[kind].idsNewestFirst }

    func count(of kind: ObjectKind, account: String?) -> Int { self.account(account)[kind].count }

    /// Changes an object in place; emits `eventType` (with `previous_attributes`) when given.
    @discardableResult
    func change(
        _ kind: ObjectKind, _ id: String, account: String?, emitting eventType: String?,
        _ change: (inout JSONValue) -> Void
    ) throws(StripeAPIError) -> JSONValue {
        let state = self.account(account)
        let old = try existing(kind, id, in: state).value
        var object = old
        change(&object)
        object["id"] = .string(id)
        if let eventType {
            saveAndEmit(eventType, object, as: kind, old: old, in: state, origin: .automatic)
        } else {
            save(object, as: kind, in: state)
        }
        return object
    }

    /// Adds an object as it is (it needs `id` and `created`); emits `eventType` when given.
    func insert(
        _ object: JSONValue, as kind: ObjectKind, account: String?, emitting eventType: String?
    ) throws(StripeAPIError) {
        guard object["id"]?.stringValue != nil, object["created"]?.intValue != nil else {
            throw .invalidRequest("An inserted object needs a string `id` and an integer `created`.")
        }
        let state = self.account(account)
        if let eventType {
            saveAndEmit(eventType, object, as: kind, in: state, origin: .automatic)
        } else {
            save(object, as: kind, in: state)
        }
    }

    /// Removes an object without a trace: no event, no deleted stub.
    func remove(_ kind: ObjectKind, _ id: String, account: String?) -> Bool {
        self.account(account)[kind].remove(id) != nil
    }

    /// Every event of an account, oldest first, whatever its age.
    func eventLog(account: String?) -> [JSONValue] {
        let events = self.account(account)[.event]
        return events.idsNewestFirst.reversed().compactMap { events[$0]?.value }
    }
}

extension ObjectKind {
    /// The event Stripe sends when an object of this kind changes.
    public var updatedEventType: String? {
        switch self {
        case .customer: "customer.updated"
        case .subscription: "customer.subscription.updated"
        case .invoice: "invoice.updated"
        case .paymentMethod: "payment_method.updated"
        case .price: "price.updated"
        case .product: "product.updated"
        case .checkoutSession, .event, .billingMeter: nil
        }
    }
}
