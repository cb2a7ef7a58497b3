import BillingCore

/// The statements one App Store delivery comes to, in order, written once for both backends'
/// writers (``SQLiteAppStoreWriter``, ``PostgresAppStoreWriter``): which snapshots are merged
/// under BillingCore's ``AppStoreVersion`` rules, then the purchase's subscription row brought up
/// to date and its owner tied, and, for a `CONSUMPTION_REQUEST`, the refund request the responder
/// answers. The delivery changed the ledger if a merge did.
struct AppStoreApplyPlan: Sendable {
    enum Step: Sendable {
        /// Merge a transaction snapshot; `reversal` for a `REFUND_REVERSED` notification.
        case transaction(AppStoreTransaction, reversal: Bool)
        /// Merge a renewal-info snapshot.
        case renewal(AppStoreRenewalInfo)
        /// Keep the notification's own facts (type, subtype, signed date).
        case notification(AppStoreNotification)
        /// Recompute the purchase's subscription row from what it holds.
        case refreshSubscription
        /// Tie the purchase to the app user who reported it, under the ownership rule.
        case tie(user: String, rule: AppStoreOwnershipRule)
        /// Tie the purchase to the user its appAccountToken names, if any.
        case tieByAccountToken
        /// Record a refund request about `transaction` for the responder, once per notification,
        /// with the owner the ties above leave.
        case consumptionRequest(AppStoreNotification, transaction: AppStoreTransaction)

        /// Whether the step's change counts as the delivery's (ties and refreshes follow merges).
        var isMerge: Bool {
            switch self {
            case .transaction, .renewal, .notification: true
            case .refreshSubscription, .tie, .tieByAccountToken, .consumptionRequest: false
            }
        }
    }

    /// The purchase every step is about.
    let originalTransactionID: String
    let steps: [Step]

    /// Nil for a delivery that names no purchase (a notification of no transaction): it is only
    /// recorded.
    init?(_ delivery: AppStoreDelivery) {
        guard let original = delivery.originalTransactionID else { return nil }
        originalTransactionID = original
        var steps: [Step] = []
        switch delivery {
        case .notification(let notification):
            if let transaction = notification.transaction {
                steps.append(.transaction(transaction, reversal: notification.notificationType == .refundReversed))
            }
            if let renewal = notification.renewalInfo { steps.append(.renewal(renewal)) }
            steps += [.notification(notification), .refreshSubscription, .tieByAccountToken]
            if notification.notificationType == .consumptionRequest, let transaction = notification.transaction {
                steps.append(.consumptionRequest(notification, transaction: transaction))
            }
        case .app(let report):
            steps = [.transaction(report.transaction, reversal: false), .refreshSubscription, .tie(user: report.user, rule: report.ownership)]
        case .server(let snapshot):
            steps.append(.transaction(snapshot.transaction, reversal: false))
            if let renewal = snapshot.renewalInfo { steps.append(.renewal(renewal)) }
            steps += [.refreshSubscription, .tieByAccountToken]
        }
        self.steps = steps
    }

    /// The effect of the delivery, given whether any merge changed the ledger.
    static func effect(changed: Bool) -> ApplyEffect { changed ? .applied : .stale }
}

extension AppStoreDelivery {
    /// The purchase (original transaction) a delivery is about; nil for a notification about none.
    var originalTransactionID: String? {
        switch self {
        case .notification(let notification): notification.originalTransactionID
        case .app(let report): report.transaction.originalTransactionID
        case .server(let snapshot): snapshot.transaction.originalTransactionID
        }
    }
}
