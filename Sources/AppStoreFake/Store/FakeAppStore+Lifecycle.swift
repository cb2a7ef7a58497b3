/// The life of subscriptions and purchases as the App Store lives it, each change with the
/// Server Notification V2 Apple sends for it.
extension FakeAppStore {
    // MARK: - Buying

    /// A new auto-renewable subscription (`SUBSCRIBED/INITIAL_BUY`) bought at `date`; returns its first transaction.
    func subscribe(
        productID: String, appAccountToken: String?, customer: String?, at date: Int64, introductoryOffer: Bool
    ) throws(AppStoreFake.StateError) -> TransactionRecord {
        let product = catalogProduct(productID)
        guard let period = product.period, let groupID = product.groupID else {
            throw .notASubscription(productID)
        }
        // Without a named account or token, the buyer is an Apple account of its own.
        let transactionID = ids.transactionID()
        let transaction = addTransaction(
            transactionID, originalTransactionID: nil, customer: customer ?? appAccountToken ?? "account-\(transactionID)",
            product: product, purchaseDate: date, originalPurchaseDate: nil,
            expiresDate: date + period.milliseconds(in: environment), appAccountToken: appAccountToken,
            reason: "PURCHASE", offerType: introductoryOffer ? 1 : nil)
        let subscription = SubscriptionRecord(
            originalTransactionID: transaction.originalTransactionID, customer: transaction.customer, groupID: groupID,
            appAccountToken: appAccountToken, productID: productID, autoRenewProductID: productID,
            transactionIDs: [transaction.transactionID], autoRenew: true, phase: .active, failingRenewals: nil,
            expirationIntent: nil, recentStartDate: date, gracePeriodExpiresDate: nil)
        save(subscription)
        notify("SUBSCRIBED", subtype: "INITIAL_BUY", transaction: transaction, subscription: subscription, at: date)
        if !isSeeding { catchUp() }
        return transaction
    }

    /// A one-time purchase (`ONE_TIME_CHARGE`) of a non-consumable, consumable or non-renewing product.
    func buy(
        productID: String, appAccountToken: String?, customer: String?, at date: Int64
    ) throws(AppStoreFake.StateError) -> TransactionRecord {
        let product = products[productID] ?? .lifetime(productID)
        guard product.period == nil else { throw .isASubscription(productID) }
        let transactionID = ids.transactionID()
        let transaction = addTransaction(
            transactionID, originalTransactionID: nil, customer: customer ?? appAccountToken ?? "account-\(transactionID)",
            product: product, purchaseDate: date, originalPurchaseDate: nil, expiresDate: nil,
            appAccountToken: appAccountToken, reason: "PURCHASE")
        notify("ONE_TIME_CHARGE", transaction: transaction, subscription: nil, at: date)
        return transaction
    }

    /// A transaction as the buyer's device sees it, signed now.
    func purchase(_ transaction: TransactionRecord) -> AppStoreFake.Purchase {
        AppStoreFake.Purchase(
            originalTransactionID: transaction.originalTransactionID, transactionID: transaction.transactionID,
            orderID: transaction.orderID, productID: transaction.productID, purchaseDate: transaction.purchaseDate,
            expiresDate: transaction.expiresDate, signedTransaction: signedTransaction(transaction))
    }

    // MARK: - Time

    /// Runs every renewal, failed renewal and expiry due by `now` (the clock's), in time order across all
    /// subscriptions, each with its notification dated when it fell due.
    func catchUp(until now: Int64? = nil) {
        let now = now ?? clock.now
        while let entry = schedule.first, entry.due <= now {
            _ = schedule.removeFirst()
            guard let subscription = subscriptions[entry.originalTransactionID],
                dueDate(of: subscription) == entry.due
            else { continue }
            runDueEvent(of: subscription, at: entry.due)
        }
    }

    /// When `subscription` next changes by itself, if it does.
    func dueDate(of subscription: SubscriptionRecord) -> Int64? {
        switch subscription.phase {
        case .active: transactions[subscription.latestTransactionID]?.expiresDate
        case .gracePeriod(_, let endsAt): endsAt
        case .billingRetry(let failedAt): failedAt + timing.billingRetryPeriod
        case .expired, .revoked: nil
        }
    }

    /// Stores `subscription` and schedules its next change.
    func save(_ subscription: SubscriptionRecord) {
        let oldDue = subscriptions.updateValue(subscription, forKey: subscription.originalTransactionID)
            .flatMap { dueDate(of: $0) }
        // An unchanged due date already has its entry.
        if let due = dueDate(of: subscription), oldDue != due {
            schedule.insert(due, subscription.originalTransactionID)
        }
    }

    func runDueEvent(of subscription: SubscriptionRecord, at date: Int64) {
        var subscription = subscription
        switch subscription.phase {
        case .active where !subscription.autoRenew:
            subscription.phase = .expired
            subscription.expirationIntent = 1
            save(subscription)
            notify("EXPIRED", subtype: "VOLUNTARY", transaction: latest(of: subscription), subscription: subscription, at: date)
        case .active:
            if let grace = subscription.failingRenewals {
                subscription.expirationIntent = 2
                if grace {
                    let endsAt = date + timing.gracePeriod
                    subscription.phase = .gracePeriod(failedAt: date, endsAt: endsAt)
                    subscription.gracePeriodExpiresDate = endsAt
                } else {
                    subscription.phase = .billingRetry(failedAt: date)
                }
                save(subscription)
                notify(
                    "DID_FAIL_TO_RENEW", subtype: grace ? "GRACE_PERIOD" : nil, transaction: latest(of: subscription),
                    subscription: subscription, at: date)
            } else {
                renew(&subscription, from: date, at: date, subtype: nil)
            }
        case .gracePeriod(let failedAt, _):
            subscription.phase = .billingRetry(failedAt: failedAt)
            save(subscription)
            notify("GRACE_PERIOD_EXPIRED", transaction: latest(of: subscription), subscription: subscription, at: date)
        case .billingRetry:
            subscription.phase = .expired
            subscription.autoRenew = false
            subscription.expirationIntent = 2
            save(subscription)
            notify("EXPIRED", subtype: "BILLING_RETRY", transaction: latest(of: subscription), subscription: subscription, at: date)
        case .expired, .revoked:
            break
        }
    }

    /// A new period from `start`, billed at `date` (`DID_RENEW`, or `DID_RENEW/BILLING_RECOVERY`).
    private func renew(_ subscription: inout SubscriptionRecord, from start: Int64, at date: Int64, subtype: String?) {
        let product = catalogProduct(subscription.autoRenewProductID)
        let period = product.period ?? .month
        let first = transactions[subscription.transactionIDs[0]]
        let transaction = addTransaction(
            originalTransactionID: subscription.originalTransactionID, customer: subscription.customer,
            product: product, purchaseDate: start, originalPurchaseDate: first?.purchaseDate,
            expiresDate: start + period.milliseconds(in: environment), appAccountToken: subscription.appAccountToken,
            reason: "RENEWAL")
        subscription.transactionIDs.append(transaction.transactionID)
        subscription.productID = product.id
        subscription.phase = .active
        subscription.expirationIntent = nil
        if subtype == "BILLING_RECOVERY" && start == date { subscription.recentStartDate = date }
        save(subscription)
        notify("DID_RENEW", subtype: subtype, transaction: transaction, subscription: subscription, at: date)
    }

    func latest(of subscription: SubscriptionRecord) -> TransactionRecord? {
        transactions[subscription.latestTransactionID]
    }

    // MARK: - Changes a test asks for

    func existingSubscription(_ originalTransactionID: String) throws(AppStoreFake.StateError) -> SubscriptionRecord {
        catchUp()
        guard let subscription = subscriptions[originalTransactionID] else {
            throw .unknownSubscription(originalTransactionID)
        }
        return subscription
    }

    /// From the next renewal on, payment fails until ``recoverRenewal(_:)``.
    func failRenewals(_ originalTransactionID: String, grace: Bool) throws(AppStoreFake.StateError) {
        var subscription = try existingSubscription(originalTransactionID)
        subscription.failingRenewals = grace
        save(subscription)
    }

    /// Payment works again: a subscription in grace or billing retry renews now
    /// (`DID_RENEW/BILLING_RECOVERY`); one still active just renews normally from now on.
    func recoverRenewal(_ originalTransactionID: String) throws(AppStoreFake.StateError) {
        var subscription = try existingSubscription(originalTransactionID)
        subscription.failingRenewals = nil
        let now = clock.now
        switch subscription.phase {
        case .gracePeriod(let failedAt, _):
            // Recovered within grace: the subscription keeps its renewal dates.
            renew(&subscription, from: failedAt, at: now, subtype: "BILLING_RECOVERY")
        case .billingRetry:
            // Recovered after grace: the new period starts at the recovery.
            renew(&subscription, from: now, at: now, subtype: "BILLING_RECOVERY")
        default:
            save(subscription)
        }
        catchUp()
    }

    /// Turns auto-renew off or on (`DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED|ENABLED`).
    func setAutoRenew(_ originalTransactionID: String, _ on: Bool) throws(AppStoreFake.StateError) {
        var subscription = try existingSubscription(originalTransactionID)
        guard subscription.phase != .expired, subscription.phase != .revoked else {
            throw .notRenewing(originalTransactionID)
        }
        guard subscription.autoRenew != on else { return }
        subscription.autoRenew = on
        save(subscription)
        notify(
            "DID_CHANGE_RENEWAL_STATUS", subtype: on ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED",
            transaction: latest(of: subscription), subscription: subscription, at: clock.now)
    }

    /// Buys an expired subscription again (`SUBSCRIBED/RESUBSCRIBE`), a new period from now.
    func resubscribe(_ originalTransactionID: String) throws(AppStoreFake.StateError) -> TransactionRecord {
        var subscription = try existingSubscription(originalTransactionID)
        guard subscription.phase == .expired || subscription.phase == .revoked else {
            throw .stillRenewing(originalTransactionID)
        }
        let now = clock.now
        let product = catalogProduct(subscription.autoRenewProductID)
        let transaction = addTransaction(
            originalTransactionID: originalTransactionID, customer: subscription.customer, product: product,
            purchaseDate: now, originalPurchaseDate: transactions[subscription.transactionIDs[0]]?.purchaseDate,
            expiresDate: now + (product.period ?? .month).milliseconds(in: environment),
            appAccountToken: subscription.appAccountToken, reason: "PURCHASE")
        subscription.transactionIDs.append(transaction.transactionID)
        subscription.phase = .active
        subscription.autoRenew = true
        subscription.failingRenewals = nil
        subscription.expirationIntent = nil
        subscription.recentStartDate = now
        save(subscription)
        notify("SUBSCRIBED", subtype: "RESUBSCRIBE", transaction: transaction, subscription: subscription, at: now)
        return transaction
    }

    /// Apple refunds a transaction (`REFUND`): it gets a revocation date and reason; a refund of
    /// a subscription's current period revokes the subscription (status 5).
    func refund(_ transactionID: String, reason: Int) throws(AppStoreFake.StateError) {
        catchUp()
        guard var transaction = transactions[transactionID] else { throw .unknownTransaction(transactionID) }
        guard transaction.revocationDate == nil else { throw .alreadyRefunded(transactionID) }
        let now = clock.now
        transaction.revocationDate = now
        transaction.revocationReason = reason
        transaction.revision = nextRevision()
        transaction.refundRevision = transaction.revision
        transactions[transactionID] = transaction
        var subscription = subscriptions[transaction.originalTransactionID]
        if var revoked = subscription, revoked.latestTransactionID == transactionID {
            revoked.phase = .revoked
            revoked.autoRenew = false
            save(revoked)
            subscription = revoked
        }
        notify("REFUND", transaction: transaction, subscription: subscription, at: now)
    }

    /// Changes a subscription's status without a notification or a transaction, as drift that
    /// only a reconcile (Get All Subscription Statuses) can notice.
    func setStatus(_ originalTransactionID: String, _ status: AppStoreFake.SubscriptionStatus) throws(AppStoreFake.StateError) {
        var subscription = try existingSubscription(originalTransactionID)
        let now = clock.now
        switch status {
        case .active: subscription.phase = .active
        case .expired:
            subscription.phase = .expired
            subscription.autoRenew = false
        case .billingRetry: subscription.phase = .billingRetry(failedAt: now)
        case .billingGracePeriod:
            subscription.phase = .gracePeriod(failedAt: now, endsAt: now + timing.gracePeriod)
            subscription.gracePeriodExpiresDate = now + timing.gracePeriod
        case .revoked:
            subscription.phase = .revoked
            subscription.autoRenew = false
        }
        save(subscription)
    }
}

extension AppStoreFake {
    /// Why a test's request to change the fake's state makes no sense.
    public enum StateError: Error, Sendable, Equatable, CustomStringConvertible {
        case unknownSubscription(String)
        case unknownTransaction(String)
        case notASubscription(String)
        case isASubscription(String)
        case notRenewing(String)
        case stillRenewing(String)
        case alreadyRefunded(String)

        public var description: String {
            switch self {
            case .unknownSubscription(let id): "No subscription has original transaction id \(id)."
            case .unknownTransaction(let id): "No transaction has id \(id)."
            case .notASubscription(let id): "Product \(id) is not an auto-renewable subscription; use purchase(productID:)."
            case .isASubscription(let id): "Product \(id) is an auto-renewable subscription; use subscribe(productID:)."
            case .notRenewing(let id): "Subscription \(id) has ended; resubscribe(originalTransactionID:) buys it again."
            case .stillRenewing(let id): "Subscription \(id) has not ended; only an ended subscription can be bought again."
            case .alreadyRefunded(let id): "Transaction \(id) was already refunded."
            }
        }
    }
}
