/// Test helpers: do what Stripe would do on its own (with the events it would send), read the
/// state, and change it behind the client's back.
///
/// `account` is a connected account id (`acct_…`), nil for the platform account.
extension StripeFake {
    // MARK: - Reading state

    /// An object as the API would answer it (a deleted customer as its stub); nil when unknown.
    public func object(_ kind: ObjectKind, _ id: String, account: String? = nil) async -> JSONValue? {
        await store.object(kind, id, account: account)
    }

    /// The ids of every object of `kind`, newest first.
    public func ids(of kind: ObjectKind, account: String? = nil) async -> [String] {
        await store.ids(of: kind, account: account)
    }

    public func count(of kind: ObjectKind, account: String? = nil) async -> Int {
        await store.count(of: kind, account: account)
    }

    /// Every event, oldest first, including those older than the 30 days `/v1/events` shows.
    public func events(account: String? = nil) async -> [JSONValue] {
        await store.eventLog(account: account)
    }

    /// The types of every event, oldest first.
    public func eventTypes(account: String? = nil) async -> [String] {
        await events(account: account).compactMap { $0["type"]?.stringValue }
    }

    // MARK: - Changing state without events (drift)

    /// Changes an object without an event, so that only a reconcile can notice.
    public func mutate(
        _ kind: ObjectKind, _ id: String, account: String? = nil,
        _ change: @escaping @Sendable (inout JSONValue) -> Void
    ) async throws(StripeAPIError) {
        try await store.change(kind, id, account: account, emitting: nil, change)
    }

    /// Removes an object without an event or a deleted stub; false when it did not exist.
    @discardableResult
    public func remove(_ kind: ObjectKind, _ id: String, account: String? = nil) async -> Bool {
        await store.remove(kind, id, account: account)
    }

    /// Adds an object as given (with `id` and `created`), without an event unless `eventType` is set.
    public func insert(
        _ object: JSONValue, as kind: ObjectKind, emitting eventType: String? = nil, account: String? = nil
    )
        async throws(StripeAPIError)
    {
        try await store.insert(object, as: kind, account: account, emitting: eventType)
    }

    // MARK: - Changing state with events

    /// Changes an object as Stripe would, emitting `eventType` (default: the kind's `*.updated`)
    /// with `previous_attributes`; returns the object after the change.
    @discardableResult
    public func update(
        _ kind: ObjectKind, _ id: String, emitting eventType: String? = nil, account: String? = nil,
        _ change: @escaping @Sendable (inout JSONValue) -> Void
    ) async throws(StripeAPIError) -> JSONValue {
        guard let type = eventType ?? kind.updatedEventType else {
            throw .invalidRequest("\(kind.rawValue) has no update event; name one with `emitting:`.")
        }
        return try await store.change(kind, id, account: account, emitting: type, change)
    }

    /// A customer (`customer.created`); returns its id.
    @discardableResult
    public func createCustomer(
        email: String? = nil, name: String? = nil, metadata: [String: String] = [:], account: String? = nil
    ) async -> String {
        await store.run { store in
            store.createCustomer(email: email, name: name, metadata: metadata, in: store.account(account)).id
        }
    }

    /// Deletes a customer as Stripe does: cancels its subscriptions, then `customer.deleted`.
    public func deleteCustomer(_ id: String, account: String? = nil) async throws(StripeAPIError) {
        try await store.run { store throws(StripeAPIError) in
            try store.deleteCustomer(id, in: store.account(account), origin: .automatic)
        }
    }

    /// A product (`product.created`); returns its id.
    @discardableResult
    public func createProduct(
        name: String, description: String? = nil, metadata: [String: String] = [:], active: Bool = true,
        account: String? = nil
    ) async -> String {
        await store.run { store in
            store.createProduct(
                name: name, description: description, metadata: metadata, active: active, in: store.account(account)
            ).id
        }
    }

    /// A price of `product` (`price.created`); `interval` nil makes a one-time price. Returns its id.
    @discardableResult
    public func createPrice(
        product: String, unitAmount: Int64, currency: String = "usd", interval: String? = "month",
        intervalCount: Int64 = 1, lookupKey: String? = nil, nickname: String? = nil, metadata: [String: String] = [:],
        active: Bool = true, account: String? = nil
    ) async throws(StripeAPIError) -> String {
        try await store.run { store throws(StripeAPIError) in
            try store.createPrice(
                product: product, unitAmount: unitAmount, currency: currency, interval: interval,
                intervalCount: intervalCount, lookupKey: lookupKey, nickname: nickname, metadata: metadata,
                active: active, in: store.account(account)
            ).id
        }
    }

    /// A subscription with a paid first invoice, and their events; trialing when `trialDays` > 0.
    @discardableResult
    public func createSubscription(
        customer: String, price: String, quantity: Int64 = 1, trialDays: Int64? = nil,
        metadata: [String: String] = [:], account: String? = nil
    ) async throws(StripeAPIError) -> (subscription: String, invoice: String) {
        try await store.run { store throws(StripeAPIError) in
            let state = store.account(account)
            let priceObject = try store.subscribablePrice(price, in: state, param: "price")
            let created = try store.createSubscription(
                customer: customer, items: [(priceObject, quantity)], trialDays: trialDays, metadata: metadata,
                in: state, origin: .automatic)
            return (created.subscription.id, created.invoice.id)
        }
    }

    /// Cancels a subscription now (`customer.subscription.deleted`), as a failed dunning or the Dashboard would.
    public func cancelSubscription(
        _ id: String, reason: String = "cancellation_requested", account: String? = nil
    )
        async throws(StripeAPIError)
    {
        try await store.run { store throws(StripeAPIError) in
            try store.cancelSubscription(id, reason: reason, in: store.account(account), origin: .automatic)
        }
    }

    /// Starts the next billing period and bills it; a failed payment leaves it `past_due`
    /// (`invoice.payment_failed`). A subscription set to cancel at period end ends instead.
    public func renewSubscription(
        _ id: String, paymentSucceeds: Bool = true, account: String? = nil
    )
        async throws(StripeAPIError)
    {
        try await store.run { store throws(StripeAPIError) in
            try store.renewSubscription(
                id, paymentSucceeds: paymentSucceeds, in: store.account(account), origin: .automatic)
        }
    }

    /// Gives a customer a card (`payment_method.attached`), optionally as its default; returns its id.
    @discardableResult
    public func attachPaymentMethod(
        customer: String, brand: String = "visa", last4: String = "4242", expMonth: Int64 = 12, expYear: Int64 = 2030,
        makeDefault: Bool = false, account: String? = nil
    ) async throws(StripeAPIError) -> String {
        try await store.run { store throws(StripeAPIError) in
            try store.createCardPaymentMethod(
                customer: customer, brand: brand, last4: last4, expMonth: expMonth, expYear: expYear,
                makeDefault: makeDefault, in: store.account(account)
            ).id
        }
    }

    public func detachPaymentMethod(_ id: String, account: String? = nil) async throws(StripeAPIError) {
        try await store.run { store throws(StripeAPIError) in
            try store.detachPaymentMethod(id, in: store.account(account), origin: .automatic)
        }
    }

    /// Completes an open Checkout Session as a paying buyer would; returns the completed session.
    /// - Parameters:
    ///   - email: the buyer's e-mail when the session has neither `customer` nor `customer_email`.
    @discardableResult
    public func completeCheckout(
        _ id: String, email: String? = nil, name: String? = nil, account: String? = nil
    )
        async throws(StripeAPIError) -> JSONValue
    {
        try await store.run { store throws(StripeAPIError) in
            try store.completeCheckout(id, email: email, name: name, in: store.account(account)).value
        }
    }

    /// Expires an open Checkout Session (`checkout.session.expired`).
    public func expireCheckout(_ id: String, account: String? = nil) async throws(StripeAPIError) {
        try await store.run { store throws(StripeAPIError) in
            try store.expireCheckoutSession(id, in: store.account(account), origin: .automatic)
        }
    }

    /// Sets a customer's active entitlements (`entitlements.active_entitlement_summary.updated`).
    public func setActiveEntitlements(
        customer: String, lookupKeys: [String], account: String? = nil
    )
        async throws(StripeAPIError)
    {
        try await store.run { store throws(StripeAPIError) in
            try store.setActiveEntitlements(customer: customer, lookupKeys: lookupKeys, in: store.account(account))
        }
    }

    // MARK: - Billing meters

    /// An active Billing Meter for `eventName` (`formula` sum, count or last); returns its id.
    @discardableResult
    public func createBillingMeter(
        eventName: String, displayName: String? = nil, formula: String = "sum", account: String? = nil
    ) async throws(StripeAPIError) -> String {
        try await store.run { store throws(StripeAPIError) in
            try store.createBillingMeter(
                displayName: displayName ?? eventName, eventName: eventName, formula: formula, in: store.account(account)
            ).id
        }
    }

    /// Every meter event Stripe accepted, oldest first, with what it counted on.
    public func meterEvents(account: String? = nil) async -> [MeterEventRecord] {
        await store.run { store in store.account(account).meterEvents }
    }

    /// A meter event as if sent through the API (the identifier and time rules apply).
    @discardableResult
    public func recordMeterEvent(
        eventName: String, customer: String, value: Int64, identifier: String? = nil, timestamp: Int64? = nil,
        account: String? = nil
    ) async throws(StripeAPIError) -> MeterEventRecord {
        try await store.run { store throws(StripeAPIError) in
            try store.recordMeterEvent(
                eventName: eventName, payload: ["stripe_customer_id": customer, "value": String(value)],
                identifier: identifier, timestamp: timestamp, in: store.account(account))
        }
    }

    // MARK: - Webhooks

    /// Sends events to `url` signed with `secret` from now on; nil stops delivery.
    public func setWebhookEndpoint(_ endpoint: WebhookEndpoint?) async {
        await store.setWebhookEndpoint(endpoint)
    }

    public var deliveryPolicy: WebhookDeliveryPolicy { get async { await store.deliveryPolicy } }

    public func setDeliveryPolicy(_ policy: WebhookDeliveryPolicy) async {
        await store.setDeliveryPolicy(policy)
    }

    /// Changes part of the delivery policy, e.g. `{ $0.dropNext = 2 }`.
    public func updateDeliveryPolicy(_ change: @escaping @Sendable (inout WebhookDeliveryPolicy) -> Void) async {
        await store.run { store in
            var policy = store.deliveryPolicy
            change(&policy)
            store.setDeliveryPolicy(policy)
        }
    }

    public func pauseDelivery() async { await updateDeliveryPolicy { $0.isPaused = true } }

    /// Resumes delivery; waiting events go out in `order`.
    public func resumeDelivery(order: WebhookDeliveryPolicy.Order = .asCreated) async {
        await updateDeliveryPolicy {
            $0.isPaused = false
            $0.order = order
        }
    }

    public func deliveryStatus(of eventID: String) async -> DeliveryStatus {
        await store.deliveryStatus(of: eventID)
    }

    /// Sends an event again, as the Dashboard's "Resend" does.
    public func redeliver(_ eventID: String, account: String? = nil) async throws(StripeAPIError) {
        try await store.run { store throws(StripeAPIError) in try store.redeliver(eventID, in: store.account(account)) }
    }

    /// Waits until no event is queued or being sent; false on timeout (e.g. while paused). The
    /// default is generous, not a measure: it returns as soon as deliveries settle, and a full
    /// test run on two busy cores has taken longer than 30 s to settle a handful.
    @discardableResult
    public func waitForDeliveries(timeout: Duration = .seconds(120)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if await store.deliveriesSettled { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return await store.deliveriesSettled
    }
}

extension FakeStore {
    /// Runs `body` on the store's executor, for the façade's multi-step helpers.
    @discardableResult
    func run<Result: Sendable, Failure: Error>(
        _ body: @Sendable (isolated FakeStore) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(self)
    }
}
