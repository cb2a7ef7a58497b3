import BillingCore

/// Test helpers: do what the App Store would do on its own (with the notifications it would send),
/// read the state, and change it behind the client's back.
extension AppStoreFake {
    // MARK: - Buying

    /// A new auto-renewable subscription (`SUBSCRIBED/INITIAL_BUY`).
    /// - Parameters:
    ///   - customer: the buyer's Apple account (Get Transaction History lists an account's
    ///     purchases); nil for the `appAccountToken`, or an account of its own without one.
    ///   - date: the purchase date, Unix milliseconds; a past date renews up to now at once.
    ///   - introductoryOffer: whether the first period is a free trial (`offerType` 1).
    @discardableResult
    public func subscribe(
        productID: String, appAccountToken: String? = nil, customer: String? = nil, at date: Int64? = nil,
        introductoryOffer: Bool = false
    ) async throws(StateError) -> Purchase {
        try await store.run { store throws(StateError) in
            store.catchUp()
            let transaction = try store.subscribe(
                productID: productID, appAccountToken: appAccountToken, customer: customer, at: date ?? store.clock.now,
                introductoryOffer: introductoryOffer)
            return store.purchase(transaction)
        }
    }

    /// A one-time purchase (`ONE_TIME_CHARGE`); an unknown product id is taken as a non-consumable.
    @discardableResult
    public func purchase(
        productID: String, appAccountToken: String? = nil, customer: String? = nil, at date: Int64? = nil
    ) async throws(StateError) -> Purchase {
        try await store.run { store throws(StateError) in
            store.catchUp()
            let transaction = try store.buy(
                productID: productID, appAccountToken: appAccountToken, customer: customer, at: date ?? store.clock.now)
            return store.purchase(transaction)
        }
    }

    /// Buys an ended subscription again (`SUBSCRIBED/RESUBSCRIBE`).
    @discardableResult
    public func resubscribe(originalTransactionID: String) async throws(StateError) -> Purchase {
        try await store.run { store throws(StateError) in store.purchase(try store.resubscribe(originalTransactionID)) }
    }

    // MARK: - Time

    /// Moves the clock on by `milliseconds` and runs everything that falls due on the way:
    /// renewals (`DID_RENEW`), failed renewals, grace and retry ends, expiries (`EXPIRED`).
    public func advance(by milliseconds: Int64) async {
        await store.run { store in
            store.clock.advance(by: milliseconds)
            store.catchUp()
        }
    }

    /// ``advance(by:)`` in a `Duration`: `await fake.advance(by: .seconds(300))` is a Sandbox month.
    public func advance(by duration: Duration) async {
        let (seconds, attoseconds) = duration.components
        await advance(by: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Sets the clock to `now` (Unix milliseconds) and runs what falls due by then.
    public func setNow(_ now: Int64) async {
        await store.run { store in
            store.clock.set(to: now)
            store.catchUp()
        }
    }

    // MARK: - Changes the App Store makes

    /// Payment fails from the subscription's next renewal date on (`DID_FAIL_TO_RENEW`, with
    /// subtype `GRACE_PERIOD` and status 4 when `grace`, else status 3), until ``recoverRenewal(originalTransactionID:)``.
    public func failRenewal(originalTransactionID: String, grace: Bool = false) async throws(StateError) {
        try await store.run { store throws(StateError) in try store.failRenewals(originalTransactionID, grace: grace) }
    }

    /// Payment works again; a subscription in grace or billing retry renews now (`DID_RENEW/BILLING_RECOVERY`).
    public func recoverRenewal(originalTransactionID: String) async throws(StateError) {
        try await store.run { store throws(StateError) in try store.recoverRenewal(originalTransactionID) }
    }

    /// The customer turns auto-renew off (`DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED`); the
    /// subscription expires at the end of its period (`EXPIRED/VOLUNTARY`).
    public func cancelAutoRenew(originalTransactionID: String) async throws(StateError) {
        try await store.run { store throws(StateError) in try store.setAutoRenew(originalTransactionID, false) }
    }

    /// The customer turns auto-renew back on (`DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_ENABLED`).
    public func enableAutoRenew(originalTransactionID: String) async throws(StateError) {
        try await store.run { store throws(StateError) in try store.setAutoRenew(originalTransactionID, true) }
    }

    /// Apple refunds a transaction (`REFUND`); refunding a subscription's current period revokes it.
    /// - Parameters:
    ///   - reason: `revocationReason`: 0 for another reason, 1 for an issue in the app.
    public func refund(transactionID: String, reason: Int = 0) async throws(StateError) {
        try await store.run { store throws(StateError) in try store.refund(transactionID, reason: reason) }
    }

    /// Changes a subscription's status without a notification or a transaction: drift that only a
    /// reconcile through Get All Subscription Statuses can notice.
    public func setStatus(originalTransactionID: String, _ status: SubscriptionStatus) async throws(StateError) {
        try await store.run { store throws(StateError) in try store.setStatus(originalTransactionID, status) }
    }

    /// Adds or replaces a product in the catalog.
    public func define(_ product: Product) async {
        await store.run { store in store.products[product.id] = product }
    }

    // MARK: - Reading state

    /// A subscription's status now; nil when no subscription has that original transaction id.
    public func status(originalTransactionID: String) async -> SubscriptionStatus? {
        await store.run { store in
            store.catchUp()
            return store.subscriptions[originalTransactionID]?.phase.status
        }
    }

    /// A subscription's transaction ids, oldest first (the purchase, then each renewal).
    public func transactionIDs(originalTransactionID: String) async -> [String] {
        await store.run { store in
            store.catchUp()
            return store.subscriptions[originalTransactionID]?.transactionIDs ?? []
        }
    }

    /// A transaction as the API would sign it now (`signedTransactionInfo`); nil when unknown.
    public func signedTransaction(transactionID: String) async -> String? {
        await store.run { store in store.transactions[transactionID].map { store.signedTransaction($0) } }
    }

    /// A subscription's `signedRenewalInfo` as the API would sign it now; nil when unknown.
    public func signedRenewalInfo(originalTransactionID: String) async -> String? {
        await store.run { store in
            store.catchUp()
            return store.subscriptions[originalTransactionID].map { store.signedRenewalInfo($0) }
        }
    }
}
