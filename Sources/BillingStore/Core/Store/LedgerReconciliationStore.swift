import BillingCore

/// The ledger side of Stripe reconcile: compares objects fetched from Stripe with the ledger and
/// repairs it through the same version guard as webhooks, a page at a time.
public protocol LedgerReconciliationStore: Sendable {
    /// Starts tracking which objects of the given kinds Stripe listed, for ``goneCandidates(_:account:livemode:after:limit:)``.
    func beginListing(_ kinds: [LedgerObjectKind]) async throws
    /// The indexes of a page's objects whose JSON differs from the ledger's (or that the ledger
    /// lacks or wants re-fetched), and how many matched; with `trackSeen`, notes every id as listed.
    func unchanged(
        _ kind: LedgerObjectKind, objects: [(id: String, json: ArraySlice<UInt8>)], account: String, livemode: Bool, trackSeen: Bool
    ) async throws -> (matched: Int, changed: [Int])
    /// Compares one page of snapshots with the ledger and, unless `dryRun`, applies each that
    /// differs under the version guard, logging each repair under `run` (the reconcile run's id)
    /// in the same transaction; with `trackSeen`, notes the ids as listed.
    func reconcile(
        _ snapshots: [LedgerSnapshot], account: String, livemode: Bool, dryRun: Bool, trackSeen: Bool, run: Int64
    ) async throws -> PageReconciliation
    /// Ids the ledger holds (not deleted) of a kind that the listing did not see, in id order,
    /// `limit` at a time after `after`.
    func goneCandidates(_ kind: LedgerObjectKind, account: String, livemode: Bool, after: String?, limit: Int) async throws -> [String]
    /// Tombstones an object Stripe answers 404 for, under the version guard, logging it under
    /// `run` when the ledger changed; whether it changed.
    func markGone(
        _ kind: LedgerObjectKind, id: String, account: String, livemode: Bool, fetchedAt: Int64, fetchID: String, run: Int64
    ) async throws -> Bool
    /// Objects the applier marked for re-fetch (ties on all evidence, lists Stripe cut short).
    func refetchQueue(account: String, livemode: Bool, limit: Int) async throws -> [(kind: LedgerObjectKind, id: String)]
    /// Customer ids in the ledger (not deleted), in id order, `limit` at a time after `after`.
    func customerIDs(account: String, livemode: Bool, after: String?, limit: Int) async throws -> [String]
    /// Payment methods the ledger holds as attached to a customer.
    func attachedPaymentMethods(customer: String, account: String, livemode: Bool) async throws -> [String]
    /// Whether the ledger holds an entitlement summary for the customer.
    func hasEntitlementSummary(customer: String, account: String, livemode: Bool) async throws -> Bool
    /// Applies one object Stripe just answered with under the version guard, so that a read
    /// right after sees it.
    @discardableResult
    func applyFetched(_ snapshot: LedgerSnapshot, account: String, livemode: Bool) async throws -> ApplyEffect
}
