import BillingCore
import Foundation
import Logging
import PostgresNIO

/// Applies the PostgreSQL inbox to the ledger, with several replicas on one database: the twin of
/// SQLite/SQLiteApplier.swift, sharing its decoding (``DecodedDelivery``), routing, backoff and counting.
///
/// **Ordering.** An inbox position (`seq`) is drawn at insert, not at commit, so it is not commit
/// order here, and this applier relies on no order at all: the version guard (BillingCore's
/// ``SnapshotVersion``, App Store's ``AppStoreVersion``) gives the same ledger in any order of
/// application. What it relies on instead is that the guard's read and write of one object are
/// never interleaved with another transaction's: every apply takes the object's lock first
/// (``PostgresObjectLock``), so each object sees a serial history. Claims go in position order
/// only so that old work is not starved.
///
/// **Claims.** ``drain(now:progress:)`` claims due events in one short transaction
/// (`FOR UPDATE SKIP LOCKED`: two replicas never claim the same event), decodes them outside any
/// transaction, and applies them in a second one that first re-checks, under row locks, that the
/// pass still holds each claim. A replica killed between the two leaves claims that expire after
/// ``claimDuration`` and are taken by another; a replica killed inside the second transaction
/// leaves nothing, as the transaction rolls back. Either way each event is applied once.
package struct PostgresApplier: EventApplier {
    let client: PostgresClient
    let logger: Logger
    package let configuration: ApplierConfiguration
    /// Names this replica in its claims.
    let replica: String
    /// How long a claim holds before another replica may take the event (Unix ms).
    let claimDuration: Int64
    /// How applied changes are announced to the app's backend, in the same transaction; nil: not at all.
    var outbox: OutboxPolicy?
    /// Group commits in flight at once on this replica. A commit's statements run one after
    /// another, each a round trip; several commits overlap those waits. Their locks are taken in
    /// one global order (event ids and objects first, then users), so they wait for one another
    /// rather than deadlock.
    package var concurrentCommits: Int

    // MARK: Group commit

    package func prepare(_ delivery: InboxDelivery) -> PreparedDelivery {
        PreparedDelivery(delivery)
    }

    /// Stores deliveries and applies each new one in the same transaction, as on SQLite
    /// (SQLite/SQLiteApplier+Ingest.swift): the inbox row is written once, in its final state. The
    /// transaction first takes the locks of the deliveries' event ids and objects, in one global
    /// order, so that a delivery reaching two replicas at once is applied by one of them and found
    /// stored by the other, and events of one object are applied one after the other.
    ///
    /// If the transaction fails (a ledger write, a deadlock the server broke), the whole batch is
    /// stored `pending` instead, for the drain to apply. A full disk (``StoreFull``) fails the
    /// whole batch: none of it is stored, and every caller is refused.
    package func ingest(_ batch: [PreparedDelivery], now: Int64) async throws -> IngestResult {
        do {
            return try await client.transaction(logger: logger, genericPlans: true) { connection in
                try await storeApplying(batch, now: now, connection: connection)
            }
        } catch let error where !StoreFull.matches(error) {
            let deliveries = batch.map(\.delivery)
            let outcomes = try await client.transaction(logger: logger) { connection in
                try await PostgresInbox.insert(deliveries, status: .pending, connection: connection, logger: logger)
            }
            return IngestResult(outcomes: outcomes, queued: outcomes.count { $0 != .duplicate })
        }
    }

    /// An event that another writer stored between the duplicate check and the insert.
    struct StoredMeanwhile: Error {}

    private func storeApplying(_ batch: [PreparedDelivery], now: Int64, connection: PostgresConnection) async throws -> IngestResult {
        var keys = batch.map { PostgresInbox.lockKey($0.delivery) }
        for prepared in batch {
            let envelope = prepared.delivery.envelope
            if let key = PostgresObjectLock.key(prepared.decoded, account: envelope.account ?? "", livemode: envelope.livemode) {
                keys.append(key)
            }
        }
        try await PostgresObjectLock.lock(keys, connection, logger)

        var outcomes: [InboxInsertOutcome] = []
        outcomes.reserveCapacity(batch.count)
        var tally = ApplyTally(configuration: configuration, announces: outbox != nil)
        // A duplicate, of a stored event or of one earlier in the batch, is neither applied
        // again nor stored.
        let stored = try await PostgresInbox.stored(batch.map(\.delivery), connection: connection, logger: logger)
        var seen: Set<PostgresInbox.EventKey> = []
        var rows: [PostgresInbox.FinalRow] = []
        var rowOutcome: [Int] = []
        // The Stripe snapshots are written together, set-wise (``PostgresLedgerBatch``), after
        // the loop; what else a delivery writes (App Store, refunds) is written in it. The two
        // never touch the same rows, so the order between them does not matter.
        var snapshots: [LedgerBatch.Item] = []
        var snapshotRows: [Int] = []
        var writes: [(row: Int, decoded: DecodedDelivery)] = []
        for prepared in batch {
            let delivery = prepared.delivery
            let envelope = delivery.envelope
            let key = PostgresInbox.EventKey(delivery)
            if stored.contains(key) || !seen.insert(key).inserted {
                outcomes.append(.duplicate)
                continue
            }
            let status: InboxStatus
            var effect: ApplyEffect?
            var processedAt: Int64? = now
            switch tally.ingest(prepared.decoded, apiVersion: envelope.apiVersion) {
            case .fail:
                (status, processedAt) = (.pending, nil)
            case .ignore:
                status = .ignored
            case .write:
                let account = envelope.account ?? ""
                if case .snapshot(let snapshot) = prepared.decoded {
                    snapshots.append(LedgerBatch.Item(snapshot: snapshot, account: account, livemode: envelope.livemode))
                    snapshotRows.append(rows.count)
                } else {
                    effect = try await applyToLedger(
                        prepared.decoded, eventID: envelope.id, account: account, livemode: envelope.livemode,
                        receivedAt: delivery.receivedAt, connection: connection)
                }
                writes.append((rows.count, prepared.decoded))
                status = .applied
            }
            rows.append(PostgresInbox.FinalRow(delivery: delivery, status: status, effect: effect, processedAt: processedAt))
            rowOutcome.append(outcomes.count)
            outcomes.append(.duplicate)
        }
        let effects = try await PostgresLedgerBatch.apply(snapshots, connection: connection, logger: logger)
        for (row, effect) in zip(snapshotRows, effects) { rows[row].effect = effect }
        for (row, decoded) in writes {
            let envelope = rows[row].delivery.envelope
            tally.written(rows[row].effect ?? .recorded, decoded, account: envelope.account ?? "", livemode: envelope.livemode)
        }
        // The inbox rows in two statements for the whole group, positions in arrival order.
        let positions = try await PostgresInbox.insertFinal(rows, connection: connection, logger: logger)
        for (index, seq) in zip(rowOutcome, positions) {
            guard let seq else { throw StoredMeanwhile() }
            outcomes[index] = .stored(seq: seq)
        }
        if let outbox { try await PostgresOutbox.announce(tally.touches, policy: outbox, now: now, connection: connection, logger: logger) }
        return IngestResult(outcomes: outcomes, pass: tally.pass, queued: tally.queued)
    }

    /// Writes a decoded snapshot or App Store delivery to the ledger under its version guard;
    /// `receivedAt` (Unix ms) stamps what the delivery queues (a refund request).
    func applyToLedger(
        _ decoded: DecodedDelivery, eventID: String, account: String, livemode: Bool, receivedAt: Int64, connection: PostgresConnection
    ) async throws -> ApplyEffect {
        switch decoded {
        case .snapshot(let snapshot):
            return try await PostgresLedgerWriter.apply(snapshot, account: account, livemode: livemode, connection: connection, logger: logger)
        case .appStore(let delivery):
            return try await PostgresAppStoreWriter.apply(
                delivery, environment: AppStoreDelivery.environment(inboxAccount: account), sourceID: eventID, receivedAt: receivedAt,
                connection: connection, logger: logger)
        case .refundSnapshot(let refund):
            return try await PostgresLedgerWriter.applyRefund(refund, account: account, livemode: livemode, connection: connection, logger: logger)
        case .recordOnly, .refund:
            return .recorded
        case .ignored, .failure:
            return .unchanged
        }
    }

    // MARK: Draining

    /// Applies every due event, claim after claim, until none is left that this pass has not
    /// tried. `now` is Unix ms.
    package func drain(now: @Sendable () -> Int64, progress: @Sendable (ApplyPass) -> Void) async throws -> ApplyPass {
        let pass = newPass()
        var total = ApplyPass()
        while true {
            let claimed = try await claim(pass: pass, now: now())
            guard !claimed.isEmpty else { break }
            total.add(try await apply(claimed, pass: pass, now: now()))
            progress(total)
        }
        return total
    }

    /// A new drain pass's name: the replica's, and a random part.
    private func newPass() -> String { "\(replica)/\(UUID().uuidString)" }

    /// Events one pass claimed and has not applied yet, for tests that stop a replica between
    /// the claim and the apply.
    package struct Claim: Sendable {
        let pass: String
        let events: [DueEvent]
        package var count: Int { events.count }
    }

    /// Claims one batch in a new pass, as ``drain(now:progress:)`` does first.
    package func claim(now: Int64) async throws -> Claim {
        let pass = newPass()
        return Claim(pass: pass, events: try await claim(pass: pass, now: now))
    }

    /// Applies what ``claim(now:)`` claimed, as far as the pass still holds it.
    package func apply(_ claim: Claim, now: Int64) async throws -> ApplyPass {
        try await apply(claim.events, pass: claim.pass, now: now)
    }

    /// Claims up to one batch of due events for a pass (see ``PostgresInbox/claim(pass:now:until:limit:client:logger:)``).
    func claim(pass: String, now: Int64) async throws -> [DueEvent] {
        try await PostgresInbox.claim(
            pass: pass, now: now, until: now + claimDuration, limit: configuration.batchSize, client: client, logger: logger)
    }

    /// Applies claimed events in one transaction. As on SQLite, the batch is first written
    /// without savepoints; only if a ledger write fails is it written again with each event in
    /// its own savepoint, so that one bad event fails alone. A full disk (``StoreFull``) is no
    /// event's fault: the pass fails, and its events come due again when the claim ends, their
    /// tries not counted.
    func apply(_ claimed: [DueEvent], pass: String, now: Int64) async throws -> ApplyPass {
        let decoded = await DecodedDelivery.decodeConcurrently(claimed)
        do {
            return try await client.transaction(logger: logger, genericPlans: true) { connection in
                try await apply(claimed, decoded: decoded, pass: pass, now: now, isolated: false, connection: connection)
            }
        } catch let error where !StoreFull.matches(error) {
            return try await client.transaction(logger: logger) { connection in
                try await apply(claimed, decoded: decoded, pass: pass, now: now, isolated: true, connection: connection)
            }
        }
    }

    private func apply(
        _ claimed: [DueEvent], decoded: [DecodedDelivery], pass: String, now: Int64, isolated: Bool,
        connection: PostgresConnection
    ) async throws -> ApplyPass {
        let held = try await PostgresInbox.stillClaimed(claimed.map(\.seq), pass: pass, connection: connection, logger: logger)
        let work = zip(claimed, decoded).filter { held.contains($0.0.seq) }
        try await PostgresObjectLock.lock(
            work.compactMap { PostgresObjectLock.key($0.1, account: $0.0.account, livemode: $0.0.livemode) }, connection, logger)
        var tally = ApplyTally(configuration: configuration, announces: outbox != nil)
        if !isolated {
            try await applyTogether(work, tally: &tally, now: now, connection: connection)
            if let outbox { try await PostgresOutbox.announce(tally.touches, policy: outbox, now: now, connection: connection, logger: logger) }
            return tally.pass
        }
        for (event, outcome) in work {
            var failure: String?
            switch tally.drain(outcome, apiVersion: event.apiVersion) {
            case .ignore:
                try await PostgresInbox.recordDone(seq: event.seq, status: .ignored, effect: nil, at: now, connection: connection, logger: logger)
            case .write:
                do {
                    if isolated { try await connection.query("SAVEPOINT event", logger: logger) }
                    let effect = try await applyToLedger(
                        outcome, eventID: event.eventID, account: event.account, livemode: event.livemode, receivedAt: now,
                        connection: connection)
                    if isolated { try await connection.query("RELEASE SAVEPOINT event", logger: logger) }
                    try await PostgresInbox.recordDone(
                        seq: event.seq, status: .applied, effect: effect, at: now, connection: connection, logger: logger)
                    tally.written(effect, outcome, account: event.account, livemode: event.livemode)
                } catch {
                    // Without savepoints the transaction cannot continue: let the caller retry
                    // the batch with each event isolated. A full disk fails every event alike.
                    guard isolated, !StoreFull.matches(error) else { throw error }
                    try await connection.query("ROLLBACK TO SAVEPOINT event", logger: logger)
                    try await connection.query("RELEASE SAVEPOINT event", logger: logger)
                    failure = "ledger write failed: \(PostgresStoreError.reason(error))"
                }
            case .fail(let reason):
                failure = reason
            }
            if let failure {
                let (attempts, retryAt) = tally.failed(afterAttempts: event.attempts, now: now)
                try await PostgresInbox.recordFailure(
                    seq: event.seq, attempts: attempts, error: failure, retryAt: retryAt, at: now, connection: connection, logger: logger)
            }
        }
        if let outbox { try await PostgresOutbox.announce(tally.touches, policy: outbox, now: now, connection: connection, logger: logger) }
        return tally.pass
    }

    /// Applies a pass's events without savepoints in a bounded number of statements: the Stripe
    /// snapshots set-wise (``PostgresLedgerBatch``), the rest one by one, and the events' outcomes
    /// in one statement. A ledger write that fails fails the transaction, and the caller applies
    /// the pass again with each event isolated.
    private func applyTogether(
        _ work: [(DueEvent, DecodedDelivery)], tally: inout ApplyTally, now: Int64, connection: PostgresConnection
    ) async throws {
        var done: [PostgresInbox.Done] = []
        var snapshots: [LedgerBatch.Item] = []
        var snapshotDone: [Int] = []
        var writes: [(done: Int, event: DueEvent, decoded: DecodedDelivery)] = []
        for (event, outcome) in work {
            switch tally.drain(outcome, apiVersion: event.apiVersion) {
            case .ignore:
                done.append(PostgresInbox.Done(seq: event.seq, status: .ignored, effect: nil))
            case .write:
                var effect: ApplyEffect?
                if case .snapshot(let snapshot) = outcome {
                    snapshots.append(LedgerBatch.Item(snapshot: snapshot, account: event.account, livemode: event.livemode))
                    snapshotDone.append(done.count)
                } else {
                    effect = try await applyToLedger(
                        outcome, eventID: event.eventID, account: event.account, livemode: event.livemode, receivedAt: now,
                        connection: connection)
                }
                writes.append((done.count, event, outcome))
                done.append(PostgresInbox.Done(seq: event.seq, status: .applied, effect: effect))
            case .fail(let reason):
                let (attempts, retryAt) = tally.failed(afterAttempts: event.attempts, now: now)
                try await PostgresInbox.recordFailure(
                    seq: event.seq, attempts: attempts, error: reason, retryAt: retryAt, at: now, connection: connection, logger: logger)
            }
        }
        let effects = try await PostgresLedgerBatch.apply(snapshots, connection: connection, logger: logger)
        for (index, effect) in zip(snapshotDone, effects) { done[index].effect = effect }
        for write in writes {
            tally.written(done[write.done].effect ?? .recorded, write.decoded, account: write.event.account, livemode: write.event.livemode)
        }
        try await PostgresInbox.recordDone(done, at: now, connection: connection, logger: logger)
    }
}
