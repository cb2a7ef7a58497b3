import BillingCore

/// The App Store side of the ledger as the service API uses it: transactions the app forwards,
/// appAccountTokens, and a user's purchases.
public protocol AppStoreLedgerStore: Sendable {
    /// Records verified transactions the app forwarded for their users, in one transaction: each
    /// becomes an inbox event applied at once, its purchase tied to the user unless another user
    /// owns it under the `keep` rule.
    func record(_ reports: [AppStoreAppTransaction], receivedAt: Int64) async throws -> [AppStoreReportOutcome]
    /// The user's appAccountToken, remembered so that notifications carrying it are tied to the user.
    func accountToken(for user: String) async throws -> String
    /// The purchase an original transaction belongs to, and its owner; nil when unknown.
    func subscription(environment: String, originalTransactionID: String) async throws -> (AppStoreSubscriptionRecord, owner: String?)?
    /// Of `originalTransactionIDs`, those of purchases tied to `user` in `environment`: what an
    /// unverified receipt may look at (it never claims a purchase).
    func originalTransactionIDs(_ originalTransactionIDs: [String], ownedBy user: String, environment: String) async throws -> Set<String>
    /// The transactions of `user`'s purchases in one mode (Production is live) bought with an
    /// introductory offer, oldest first.
    func introductoryOffers(of user: String, livemode: Bool) async throws -> [AppStoreIntroductoryOffer]
}

/// What became of one transaction the app forwarded.
public enum AppStoreReportOutcome: Sendable, Equatable {
    /// Recorded, applied and tied to the user (`duplicate`: the same report came before).
    case recorded(originalTransactionID: String, duplicate: Bool)
    /// Another user owns the purchase and `APPSTORE_OWNERSHIP` keeps it with them: nothing stored.
    case ownedByOtherUser(originalTransactionID: String)
}
