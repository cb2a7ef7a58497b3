import BillingCore

/// The ledger side of App Store reconcile: subscriptions whose state may be stale, and the
/// repairs fetched from the App Store Server API, stored and applied like deliveries.
public protocol AppStoreReconciliationStore: Sendable {
    /// Subscriptions whose state may be stale at `now` (Unix ms), in original transaction id
    /// order after `after`, at most `limit`.
    func staleSubscriptions(environment: String, now: Int64, after: String?, limit: Int) async throws
        -> [(originalTransactionID: String, reason: AppStoreStaleReason)]
    /// The ledger's record of an original transaction; nil when it has none.
    func record(environment: String, originalTransactionID: String) async throws -> AppStoreSubscriptionRecord?
    /// Stores fetched transactions as inbox events and applies each under the `signedDate` guard;
    /// one effect per snapshot.
    func recordFetched(_ snapshots: [AppStoreServerSnapshot], environment: AppStoreEnvironment, receivedAt: Int64) async throws
        -> [ApplyEffect]
}

/// Why a subscription is worth asking Apple about.
public enum AppStoreStaleReason: String, Sendable, Codable, CaseIterable {
    /// The latest signed data said active, and its expiry date has passed with no renewal.
    case expiredWhileActive = "expired_while_active"
    /// In billing retry or the grace period: Apple will recover or end it without telling twice.
    case billingRetry = "billing_retry"
    /// The app reported a transaction and no notification about the purchase came since.
    case reportedWithoutNotification = "reported_without_notification"
    /// An App Store delivery about it could not be applied.
    case failedDelivery = "failed_delivery"
}
