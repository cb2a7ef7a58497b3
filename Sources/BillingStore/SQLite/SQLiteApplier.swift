import BillingCore
import Foundation
import GRDB

/// Applies the inbox to the ledger under the version guard: new deliveries in the group commit
/// that stores them (``ingest(_:now:)``), and what is left queued in commit order (``drain``):
/// each due event is decoded, routed and applied, and its inbox row records the outcome. A
/// failing event is retried with exponential backoff and ends `dead` after a bounded number of
/// tries, without holding back the events behind it.
public struct SQLiteApplier: EventApplier {
    let database: SQLiteDatabase
    public let configuration: ApplierConfiguration

    public init(database: SQLiteDatabase, configuration: ApplierConfiguration = .init()) {
        self.database = database
        self.configuration = configuration
    }

    /// Applies every due event, batch after batch, until none is left. `now` is Unix ms.
    ///
    /// Pipelined: while one batch is written (on GRDB's writer), the next is read and decoded
    /// on the other cores. A cursor on `seq` keeps the next read from seeing the batch in flight.
    @discardableResult
    public func drain(
        now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
        progress: @Sendable (ApplyPass) -> Void = { _ in }
    ) async throws -> ApplyPass {
        var total = ApplyPass()
        var batch = try await fetchDue(now: now(), after: 0)
        var decoded = await DecodedDelivery.decodeConcurrently(batch)
        while !batch.isEmpty {
            let (current, currentDecoded, time) = (batch, decoded, now())
            async let written = write(current, decoded: currentDecoded, now: time)
            if current.count == configuration.batchSize, let last = current.last {
                batch = try await fetchDue(now: now(), after: last.seq)
                decoded = await DecodedDelivery.decodeConcurrently(batch)
            } else {
                batch = []
            }
            total.add(try await written)
            progress(total)
        }
        return total
    }

    /// Writes one batch in one transaction. Savepoints per event cost two statements each, so
    /// the batch is first written without them; only if a ledger write fails is it rolled back
    /// and written again with each event in its own savepoint, so one bad event fails alone. A
    /// full store (``StoreFull``) is no event's fault: the pass fails, and its events stay due,
    /// their tries not counted.
    private func write(_ due: [DueEvent], decoded: [DecodedDelivery], now: Int64) async throws -> ApplyPass {
        do {
            return try await database.writer.write { db in try apply(due: due, decoded: decoded, now: now, isolated: false, db: db) }
        } catch let error where !StoreFull.matches(error) {
            return try await database.writer.write { db in try apply(due: due, decoded: decoded, now: now, isolated: true, db: db) }
        }
    }

    /// Reads up to one batch of due events after a position in the inbox.
    private func fetchDue(now: Int64, after seq: Int64) async throws -> [DueEvent] {
        try await SQLiteInbox(database: database).due(now: now, after: seq, limit: configuration.batchSize)
    }

    /// Writes a decoded snapshot or App Store delivery to the ledger under its version guard;
    /// `receivedAt` (Unix ms) stamps what the delivery queues (a refund request).
    static func applyToLedger(
        _ decoded: DecodedDelivery, eventID: String, account: String, livemode: Bool, receivedAt: Int64, db: Database
    ) throws -> ApplyEffect {
        switch decoded {
        case .snapshot(let snapshot):
            let effect = try SQLiteLedgerWriter.apply(snapshot, account: account, livemode: livemode, db: db)
            try SQLiteLedgerWriter.linkCheckoutUser(snapshot, account: account, livemode: livemode, db: db)
            return effect
        case .appStore(let delivery):
            return try SQLiteAppStoreWriter.apply(
                delivery, environment: AppStoreDelivery.environment(inboxAccount: account), sourceID: eventID, receivedAt: receivedAt, db: db)
        case .refundSnapshot(let refund):
            return try SQLiteLedgerWriter.applyRefund(refund, account: account, livemode: livemode, db: db)
        case .recordOnly, .refund:
            return .recorded
        case .ignored, .failure:
            return .unchanged
        }
    }

    /// Runs the pass's plan (``ApplyTally``): the inbox rows, the ledger writes and the
    /// announcement are this backend's statements; what each event comes to is not.
    private func apply(due: [DueEvent], decoded: [DecodedDelivery], now: Int64, isolated: Bool, db: Database) throws -> ApplyPass {
        var tally = ApplyTally(configuration: configuration, announces: database.outbox != nil)
        for (event, outcome) in zip(due, decoded) {
            var failure: String?
            switch tally.drain(outcome, apiVersion: event.apiVersion) {
            case .ignore:
                try SQLiteInbox.recordDone(seq: event.seq, status: .ignored, effect: nil, at: now, db: db)
            case .write:
                do {
                    var effect = ApplyEffect.unchanged
                    if isolated {
                        try db.inSavepoint {
                            effect = try Self.applyToLedger(
                                outcome, eventID: event.eventID, account: event.account, livemode: event.livemode, receivedAt: now, db: db)
                            return .commit
                        }
                    } else {
                        effect = try Self.applyToLedger(
                                outcome, eventID: event.eventID, account: event.account, livemode: event.livemode, receivedAt: now, db: db)
                    }
                    try SQLiteInbox.recordDone(seq: event.seq, status: .applied, effect: effect, at: now, db: db)
                    tally.written(effect, outcome, account: event.account, livemode: event.livemode)
                } catch {
                    // Without savepoints the transaction cannot continue: let the caller retry
                    // the batch with each event isolated. A full store fails every event alike.
                    guard isolated, !StoreFull.matches(error) else { throw error }
                    failure = "ledger write failed: \(error)"
                }
            case .fail(let reason):
                failure = reason
            }
            if let failure {
                let (attempts, retryAt) = tally.failed(afterAttempts: event.attempts, now: now)
                try SQLiteInbox.recordFailure(seq: event.seq, attempts: attempts, error: failure, retryAt: retryAt, at: now, db: db)
            }
        }
        if let policy = database.outbox { try SQLiteOutbox.announce(tally.touches, policy: policy, now: now, db: db) }
        return tally.pass
    }

    /// Exponential backoff with ±20 % jitter, capped.
    func retryDelayMilliseconds(afterAttempt attempt: Int) -> Int64 {
        configuration.retryDelayMilliseconds(afterAttempt: attempt)
    }
}
