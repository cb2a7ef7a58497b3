extension AppStoreFake {
    /// What ``AppStoreFake/seed(subscriptions:renewals:oneTimePurchases:seed:)`` made.
    public struct SeedSummary: Sendable, Hashable {
        public let subscriptions: Int
        public let oneTimePurchases: Int
        public let transactions: Int
        public let notifications: Int
        /// The original transaction ids of the seeded subscriptions, in the order made.
        public let originalTransactionIDs: [String]
    }

    /// Makes `subscriptions` original transactions fast and the same for the same `seed`: each
    /// bought `renewals` periods ago (plus part of one) and renewed since, with its notification
    /// history recorded as delivered when it happened, nothing sent now.
    ///
    /// `date` (Unix milliseconds, not after the clock's now) seeds as of then instead of now; what
    /// fell due since (renewals, expiries) then runs as it would have, with its notifications
    /// queued for delivery. Two fakes seeded alike at the same `date` hold the same store however far
    /// apart they start, which lets a benchmark restart the fake "a day later".
    ///
    /// Subscriptions take the catalog's auto-renewable products in turn (a monthly one when there
    /// are none); about 10% turned auto-renew off in their first period (and so have expired), and about
    /// 5% have failed to renew in their last period (half of them in a grace period). Each belongs
    /// to an Apple account of its own, with an `appAccountToken`.
    @discardableResult
    public func seed(
        subscriptions count: Int, renewals: Int = 3, oneTimePurchases: Int = 0, seed: UInt64 = 42, at date: Int64? = nil
    ) async -> SeedSummary {
        await store.run { store in
            let summary = store.seed(
                subscriptions: count, renewals: renewals, oneTimePurchases: oneTimePurchases, seed: seed, at: date)
            if date != nil { store.catchUp() }
            return summary
        }
    }
}

extension FakeAppStore {
    func seed(
        subscriptions count: Int, renewals: Int, oneTimePurchases: Int, seed: UInt64, at date: Int64? = nil
    ) -> AppStoreFake.SeedSummary {
        let now = min(date ?? clock.now, clock.now)
        catchUp(until: now)
        var random = SplitMix64(seed: seed)
        var plans = products.values.filter { $0.period != nil }.sorted { $0.id < $1.id }
        if plans.isEmpty { plans = [.monthly("com.example.pro.monthly")] }
        let transactionsBefore = transactions.count
        let notificationsBefore = notifications.count
        isSeeding = true

        var made: [String] = []
        made.reserveCapacity(count)
        for index in 0..<count {
            let plan = plans[index % plans.count]
            let period = (plan.period ?? .month).milliseconds(in: environment)
            let start = now - Int64(renewals) * period - Int64(random.next() % UInt64(period))
            let token = ids.uuid()
            // Plans are subscriptions, so subscribing to one cannot fail.
            guard
                let first = try? subscribe(
                    productID: plan.id, appAccountToken: token, customer: nil, at: start, introductoryOffer: false)
            else { continue }
            made.append(first.originalTransactionID)
            if random.next() % 100 < 10, var subscription = subscriptions[first.originalTransactionID] {
                subscription.autoRenew = false
                subscription.expirationIntent = 1
                save(subscription)
                // Within the first period, so that the expiry it causes comes after it.
                let cancelledAt = start + Int64(random.next() % UInt64(period))
                notify(
                    "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", transaction: latest(of: subscription),
                    subscription: subscription, at: cancelledAt)
            }
        }
        // Renew everyone up to a period ago, then let some fail in their last period.
        let shortest = plans.map { ($0.period ?? .month).milliseconds(in: environment) }.min() ?? 0
        catchUp(until: now - shortest)
        for original in made where random.next() % 100 < 5 {
            guard var subscription = subscriptions[original], subscription.phase == .active, subscription.autoRenew
            else { continue }
            subscription.failingRenewals = random.next() % 2 == 0
            save(subscription)
        }
        catchUp(until: now)

        var purchases = 0
        let lifetime = products.values.filter { $0.period == nil }.sorted { $0.id < $1.id }.first
        for _ in 0..<oneTimePurchases {
            let date = now - Int64(random.next() % UInt64(max(1, notificationRetention)))
            if (try? buy(
                productID: lifetime?.id ?? "com.example.lifetime", appAccountToken: ids.uuid(), customer: nil, at: date))
                != nil
            {
                purchases += 1
            }
        }

        isSeeding = false
        flushSeededNotifications()
        return AppStoreFake.SeedSummary(
            subscriptions: made.count, oneTimePurchases: purchases, transactions: transactions.count - transactionsBefore,
            notifications: notifications.count - notificationsBefore, originalTransactionIDs: made)
    }
}
