import BillingCore

/// Acting out a notification for `billingd appstore trigger` in local mode: the fake makes,
/// now, the change after which the App Store sends that notification, and sends every
/// notification the change brings (turning auto-renew off before `EXPIRED/VOLUNTARY`, say), so
/// that the fake's history, lookups and statuses agree with what billingd was told.
///
/// Not one of Apple's endpoints; served at `POST /inApps/v1/test_helpers/billingd/trigger`.
extension FakeAppStore {
    struct TriggerRequest: Decodable, Sendable {
        let notificationType: String
        let subtype: String?
        let productId: String
        /// The user's appAccountToken; nil for a buyer without one.
        let appAccountToken: String?
    }

    struct TriggerResult: Encodable, Sendable {
        struct Sent: Encodable, Sendable {
            let notificationUUID: String
            let notificationType: String
            let subtype: String?
        }

        /// The purchase acted on (for `ONE_TIME_CHARGE`, the new purchase's transaction id; for
        /// `CONSUMPTION_REQUEST`, the transaction whose refund is asked).
        let originalTransactionId: String
        let transactionId: String?
        /// For a purchase (`SUBSCRIBED`, `ONE_TIME_CHARGE`), the new transaction as the buyer's
        /// device holds it (`Transaction.jwsRepresentation`), for the app to forward.
        let signedTransaction: String?
        /// Every notification the change sent, in order.
        let notifications: [Sent]
    }

    /// The notification types and subtypes ``trigger(_:)`` acts out.
    static let triggerable = [
        "SUBSCRIBED (INITIAL_BUY, RESUBSCRIBE)", "DID_RENEW (none, BILLING_RECOVERY)", "DID_FAIL_TO_RENEW (none, GRACE_PERIOD)",
        "GRACE_PERIOD_EXPIRED", "DID_CHANGE_RENEWAL_STATUS (AUTO_RENEW_ENABLED, AUTO_RENEW_DISABLED)",
        "EXPIRED (VOLUNTARY, BILLING_RETRY)", "REFUND", "ONE_TIME_CHARGE", "CONSUMPTION_REQUEST",
    ]

    func trigger(_ request: TriggerRequest) throws(AppStoreFake.APIError) -> TriggerResult {
        catchUp()
        let before = notifications.count
        let product = request.productId
        let found = subscription(appAccountToken: request.appAccountToken, productID: product)
        func requireFound() throws(AppStoreFake.APIError) -> SubscriptionRecord {
            guard let found else {
                throw .cannotTrigger("No subscription to \(product) for this buyer at the local App Store: trigger SUBSCRIBED first.")
            }
            return found
        }
        func refuse(_ subscription: SubscriptionRecord, _ what: String) -> AppStoreFake.APIError {
            .cannotTrigger("Subscription \(subscription.originalTransactionID) to \(product) is \(subscription.phase.name); \(what)")
        }
        var acted: (originalTransactionID: String, transactionID: String?)
        do {
            switch (request.notificationType, request.subtype) {
            case ("SUBSCRIBED", nil), ("SUBSCRIBED", "INITIAL_BUY"), ("SUBSCRIBED", "RESUBSCRIBE"):
                if let found {
                    guard found.phase == .expired || found.phase == .revoked else {
                        throw refuse(found, "only an ended subscription is bought again.")
                    }
                    let transaction = try resubscribe(found.originalTransactionID)
                    acted = (transaction.originalTransactionID, transaction.transactionID)
                } else {
                    let transaction = try subscribe(
                        productID: product, appAccountToken: request.appAccountToken, customer: nil, at: clock.now, introductoryOffer: false)
                    acted = (transaction.originalTransactionID, transaction.transactionID)
                }
            case ("ONE_TIME_CHARGE", nil):
                let transaction = try buy(productID: product, appAccountToken: request.appAccountToken, customer: nil, at: clock.now)
                acted = (transaction.originalTransactionID, transaction.transactionID)
            case ("DID_RENEW", nil):
                let subscription = try requireFound()
                guard subscription.phase == .active, subscription.autoRenew, subscription.failingRenewals == nil else {
                    let instead =
                        switch subscription.phase {
                        case .active where !subscription.autoRenew:
                            "auto-renew is off: trigger DID_CHANGE_RENEWAL_STATUS --subtype AUTO_RENEW_ENABLED first."
                        case .active: "its renewals fail: trigger DID_RENEW --subtype BILLING_RECOVERY once one has failed."
                        case .gracePeriod, .billingRetry: "trigger DID_RENEW --subtype BILLING_RECOVERY instead."
                        case .expired, .revoked: "trigger SUBSCRIBED to buy it again."
                        }
                    throw refuse(subscription, instead)
                }
                runNextChangeNow(subscription)
                acted = (subscription.originalTransactionID, nil)
            case ("DID_RENEW", "BILLING_RECOVERY"):
                let subscription = try requireFound()
                guard subscription.phase.isRetrying else { throw refuse(subscription, "only a subscription in grace or billing retry recovers.") }
                try recoverRenewal(subscription.originalTransactionID)
                acted = (subscription.originalTransactionID, nil)
            case ("DID_FAIL_TO_RENEW", nil), ("DID_FAIL_TO_RENEW", "GRACE_PERIOD"):
                let subscription = try requireFound()
                guard subscription.phase == .active, subscription.autoRenew else {
                    throw refuse(subscription, "only an active subscription with auto-renew on fails to renew.")
                }
                try failRenewals(subscription.originalTransactionID, grace: request.subtype == "GRACE_PERIOD")
                try runNextChangeNow(current(subscription))
                acted = (subscription.originalTransactionID, nil)
            case ("GRACE_PERIOD_EXPIRED", nil):
                let subscription = try requireFound()
                guard case .gracePeriod = subscription.phase else { throw refuse(subscription, "only a grace period expires.") }
                runNextChangeNow(subscription)
                acted = (subscription.originalTransactionID, nil)
            case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"), ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED"):
                let subscription = try requireFound()
                let on = request.subtype == "AUTO_RENEW_ENABLED"
                guard subscription.phase != .expired, subscription.phase != .revoked, subscription.autoRenew != on else {
                    throw refuse(subscription, "auto-renew is \(subscription.autoRenew ? "on" : "off") already.")
                }
                try setAutoRenew(subscription.originalTransactionID, on)
                acted = (subscription.originalTransactionID, nil)
            case ("EXPIRED", "VOLUNTARY"):
                let subscription = try requireFound()
                guard subscription.phase == .active else { throw refuse(subscription, "only an active subscription expires by choice.") }
                if subscription.autoRenew { try setAutoRenew(subscription.originalTransactionID, false) }
                try runNextChangeNow(current(subscription))
                acted = (subscription.originalTransactionID, nil)
            case ("EXPIRED", "BILLING_RETRY"):
                var subscription = try requireFound()
                guard subscription.phase == .active || subscription.phase.isRetrying else {
                    throw refuse(subscription, "only a renewing subscription expires after billing retry.")
                }
                if subscription.phase == .active {
                    try failRenewals(subscription.originalTransactionID, grace: false)
                    subscription = try current(subscription)
                }
                // Failed renewal, end of grace, end of retry: as many steps as it takes.
                while subscription.phase != .expired {
                    runNextChangeNow(subscription)
                    subscription = try current(subscription)
                }
                acted = (subscription.originalTransactionID, nil)
            case ("CONSUMPTION_REQUEST", nil):
                // The customer asks for a refund of their latest purchase of the product.
                guard let transaction = latestTransaction(appAccountToken: request.appAccountToken, productID: product) else {
                    throw AppStoreFake.APIError.cannotTrigger(
                        "No purchase of \(product) for this buyer at the local App Store: trigger SUBSCRIBED or ONE_TIME_CHARGE first.")
                }
                try requestConsumption(transaction.transactionID, reason: "UNINTENDED_PURCHASE")
                acted = (transaction.originalTransactionID, transaction.transactionID)
            case ("REFUND", nil):
                let subscription = try requireFound()
                try refund(subscription.latestTransactionID, reason: 0)
                acted = (subscription.originalTransactionID, subscription.latestTransactionID)
            default:
                throw AppStoreFake.APIError.unsupportedTrigger(
                    "The local App Store does not act out \(request.notificationType)\(request.subtype.map { "/" + $0 } ?? ""); it acts out \(Self.triggerable.joined(separator: ", ")).")
            }
        } catch let error as AppStoreFake.APIError {
            throw error
        } catch let error as AppStoreFake.StateError {
            throw .cannotTrigger(error.description)
        } catch {
            throw .generalInternal
        }
        let sent = notifications[before...].map { TriggerResult.Sent(notificationUUID: $0.uuid, notificationType: $0.type, subtype: $0.subtype) }
        let purchased = ["SUBSCRIBED", "ONE_TIME_CHARGE"].contains(request.notificationType)
        let signed = purchased ? acted.transactionID.flatMap { transactions[$0] }.map(signedTransaction) : nil
        return TriggerResult(
            originalTransactionId: acted.originalTransactionID, transactionId: acted.transactionID, signedTransaction: signed,
            notifications: sent)
    }

    /// The buyer's latest subscription to `productID` (bought as it, or renewing into it).
    func subscription(appAccountToken: String?, productID: String) -> SubscriptionRecord? {
        subscriptions.values
            .filter { $0.appAccountToken == appAccountToken && ($0.productID == productID || $0.autoRenewProductID == productID) }
            .max { ($0.recentStartDate, $0.originalTransactionID) < ($1.recentStartDate, $1.originalTransactionID) }
    }

    /// `subscription` as stored now.
    private func current(_ subscription: SubscriptionRecord) throws(AppStoreFake.StateError) -> SubscriptionRecord {
        guard let current = subscriptions[subscription.originalTransactionID] else {
            throw .unknownSubscription(subscription.originalTransactionID)
        }
        return current
    }

    /// A subscription's next change happens now instead of at its due date: its current period,
    /// grace period or billing retry ends now (a current transaction that would have expired later
    /// expires now, with a new revision), and what the App Store does then runs at once.
    func runNextChangeNow(_ subscription: SubscriptionRecord) {
        let now = clock.now
        var subscription = subscription
        switch subscription.phase {
        case .active:
            let id = subscription.latestTransactionID
            if var transaction = transactions[id], let expires = transaction.expiresDate, expires > now {
                transaction.expiresDate = now
                transaction.revision = nextRevision()
                transactions[id] = transaction
            }
        case .gracePeriod(let failedAt, _):
            subscription.phase = .gracePeriod(failedAt: failedAt, endsAt: now)
            subscription.gracePeriodExpiresDate = now
        case .billingRetry, .expired, .revoked:
            break
        }
        runDueEvent(of: subscription, at: now)
    }
}
