/// Where a snapshot of an object stands in the object's history. The ledger keeps, for each
/// object, the snapshot with the greatest version; an older one never overwrites it.
///
/// The rule, in order of precedence (a lexicographic order, so the winner does not depend on
/// the order in which snapshots arrive):
///
/// 1. **Deleted** beats everything: a deletion is final in Stripe, so a tombstone is never
///    overwritten and a late `updated` never resurrects the object.
/// 2. **Terminal** beats non-terminal: a canceled or expired subscription, a paid or void
///    invoice, a detached payment method, a completed or expired Checkout session cannot go back
///    to an earlier state, whatever the timestamps say.
/// 3. **`event.created`**: the later event carries the later state.
/// 4. For events created in the same second, the evidence in the object: the latest of its
///    transition timestamps (`status_transitions.*`, `canceled_at`, `ended_at` …),
/// 5. then the status order of its lifecycle (incomplete → trialing → active → past_due →
///    unpaid; draft → open → uncollectible → paid/void …).
/// 6. Still tied: the snapshots are **ambiguous**. The greater event id wins, so every order of
///    delivery ends the same, and the object is marked for re-fetch so reconcile replaces the
///    guess with Stripe's answer.
public struct SnapshotVersion: Sendable, Equatable, Codable {
    public var deleted: Bool
    public var terminal: Bool
    /// `event.created`, or the fetch time for snapshots read from the API.
    public var eventCreated: Int64
    /// The latest transition timestamp in the object (0 when none).
    public var transitionAt: Int64
    /// The status's position in the object's lifecycle.
    public var statusRank: Int
    /// The event that carried the snapshot (or `fetch:<time>` for API reads).
    public var eventID: String

    public init(deleted: Bool, terminal: Bool, eventCreated: Int64, transitionAt: Int64, statusRank: Int, eventID: String) {
        self.deleted = deleted
        self.terminal = terminal
        self.eventCreated = eventCreated
        self.transitionAt = transitionAt
        self.statusRank = statusRank
        self.eventID = eventID
    }

    /// How an incoming snapshot compares with the one the ledger holds.
    public enum Comparison: Sendable, Equatable {
        /// The same event again: nothing to do.
        case sameEvent
        /// Strictly newer by the evidence: apply it.
        case newer
        /// Strictly older by the evidence: keep what the ledger has.
        case older
        /// Tied on all evidence with a different event: `wins` says whether the incoming
        /// snapshot takes the place (by event id); either way the object needs a re-fetch.
        case ambiguous(wins: Bool)
    }

    /// Compares `self` (incoming) with `existing` (held by the ledger).
    public func compared(with existing: SnapshotVersion) -> Comparison {
        if eventID == existing.eventID { return .sameEvent }
        let mine = (deleted ? 1 : 0, terminal ? 1 : 0, eventCreated, transitionAt, statusRank)
        let theirs = (existing.deleted ? 1 : 0, existing.terminal ? 1 : 0, existing.eventCreated, existing.transitionAt, existing.statusRank)
        if mine > theirs { return .newer }
        if mine < theirs { return .older }
        return .ambiguous(wins: eventID > existing.eventID)
    }
}

/// Lifecycle evidence of each kind of object, for ``SnapshotVersion``.
public enum LifecycleEvidence {
    /// Position of a subscription status; canceled and incomplete_expired are terminal.
    public static func rank(_ status: SubscriptionStatus) -> (rank: Int, terminal: Bool) {
        switch status {
        case .incomplete: (0, false)
        case .trialing: (1, false)
        case .active: (2, false)
        case .pastDue, .paused: (3, false)
        case .unpaid: (4, false)
        case .canceled, .incompleteExpired: (5, true)
        default: (2, false)  // an unknown future status: neither early nor final
        }
    }

    /// Position of an invoice status; paid and void are terminal.
    public static func rank(_ status: InvoiceStatus?) -> (rank: Int, terminal: Bool) {
        switch status {
        case .draft?: (0, false)
        case .open?: (1, false)
        case .uncollectible?: (2, false)
        case .paid?, .void?: (3, true)
        default: (1, false)
        }
    }

    /// Position of a Checkout session status; complete and expired are terminal.
    public static func rank(_ status: CheckoutSessionStatus?) -> (rank: Int, terminal: Bool) {
        switch status {
        case .open?: (0, false)
        case .complete?, .expired?: (1, true)
        default: (0, false)
        }
    }
}
