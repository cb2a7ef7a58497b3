import BillingCore

/// The decisions of one apply pass or group commit, written once for both backends: what each
/// event comes to, how the pass is counted, when an event that keeps failing is dead, and which
/// users' views the outbox announces. A backend runs the statements in between (inbox rows, the
/// ledger write, the announcement) and decides nothing of its own.
struct ApplyTally {
    let configuration: ApplierConfiguration
    /// Whether changed views are announced (an outbox is configured).
    let announces: Bool
    private(set) var pass = ApplyPass()
    /// New deliveries of a group commit left `pending` for the applier (their decoding failed).
    private(set) var queued = 0
    /// The users whose view may have changed, for the outbox.
    private(set) var touches = OutboxTouches()

    init(configuration: ApplierConfiguration, announces: Bool) {
        self.configuration = configuration
        self.announces = announces
    }

    /// What one event comes to.
    enum Step: Equatable {
        /// Marked `ignored`; nothing is written.
        case ignore
        /// Written to the ledger under its version guard, then marked `applied` with the write's
        /// effect (a record-only event or a refund writes nothing and comes to `recorded`).
        case write
        /// Not applicable: stored `pending` by a group commit, or a failure with this reason
        /// (retried with backoff) when the applier drains it.
        case fail(String)
    }

    /// Counts one event the applier drains and says what it comes to.
    mutating func drain(_ decoded: DecodedDelivery, apiVersion: String?) -> Step {
        pass.processed += 1
        configuration.countVersion(apiVersion, in: &pass)
        return Self.step(decoded, counting: &pass)
    }

    /// Counts one new delivery of a group commit and says what it comes to. A delivery that did
    /// not decode is only queued: it is not processed until the applier retries it.
    mutating func ingest(_ decoded: DecodedDelivery, apiVersion: String?) -> Step {
        if case .failure(let reason) = decoded {
            queued += 1
            return .fail(reason)
        }
        pass.processed += 1
        configuration.countVersion(apiVersion, in: &pass)
        return Self.step(decoded, counting: &pass)
    }

    private static func step(_ decoded: DecodedDelivery, counting pass: inout ApplyPass) -> Step {
        switch decoded {
        case .ignored:
            pass.ignored += 1
            return .ignore
        case .failure(let reason):
            return .fail(reason)
        case .recordOnly, .refund, .refundSnapshot, .snapshot, .appStore:
            return .write
        }
    }

    /// Counts a ledger write's effect and notes whose view it may have changed. A stale write
    /// changed nothing, so it announces nothing.
    mutating func written(_ effect: ApplyEffect, _ decoded: DecodedDelivery, account: String, livemode: Bool) {
        guard effect != .stale else {
            pass.stale += 1
            return
        }
        pass.applied += 1
        if announces { touches.add(decoded, account: account, livemode: livemode) }
    }

    /// The attempt count and next try of an event that failed once more; no next try: it is dead.
    mutating func failed(afterAttempts previous: Int, now: Int64) -> (attempts: Int, retryAt: Int64?) {
        let next = configuration.failure(afterAttempts: previous, now: now)
        if next.retryAt == nil { pass.dead += 1 } else { pass.failed += 1 }
        return next
    }
}
