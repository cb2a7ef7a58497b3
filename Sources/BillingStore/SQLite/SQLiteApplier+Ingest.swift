import BillingCore
import GRDB

extension SQLiteApplier {
    /// Decodes a delivery for ``ingest(_:now:)`` on the caller's task: the decoding of
    /// concurrent deliveries then runs on every core, and the one writer only writes.
    public func prepare(_ delivery: InboxDelivery) -> PreparedDelivery {
        PreparedDelivery(delivery)
    }

    /// Stores deliveries and applies each new one in the same transaction, so that a delivery
    /// is applied by the time it is acknowledged, its inbox row is written once, in its final
    /// state, and one fsync covers both. Order does not matter: the version guard gives the
    /// same ledger in any order, so a new delivery may overtake older ones still queued.
    ///
    /// A delivery that did not decode is stored `pending`, for the applier to retry with
    /// backoff. If a ledger write fails, the whole batch is stored `pending` instead, and the
    /// applier isolates the bad event. A full store (``StoreFull``) fails the whole batch: none of
    /// it is stored, and every caller is refused.
    public func ingest(_ batch: [PreparedDelivery], now: Int64) async throws -> IngestResult {
        do {
            return try await database.writer.write { db in try storeApplying(batch, now: now, db: db) }
        } catch let error where !StoreFull.matches(error) {
            let outcomes = try await database.writer.write { db in
                try SQLiteInbox.insert(batch.map(\.delivery), status: .pending, db: db)
            }
            return IngestResult(outcomes: outcomes, queued: outcomes.count { $0 != .duplicate })
        }
    }

    /// Runs the group commit's plan (``ApplyTally``) with this backend's statements.
    private func storeApplying(_ batch: [PreparedDelivery], now: Int64, db: Database) throws -> IngestResult {
        var outcomes: [InboxInsertOutcome] = []
        outcomes.reserveCapacity(batch.count)
        var tally = ApplyTally(configuration: configuration, announces: database.outbox != nil)
        for prepared in batch {
            let delivery = prepared.delivery
            let envelope = delivery.envelope
            // A duplicate is neither applied again nor stored.
            if try SQLiteInbox.contains(delivery, db: db) {
                outcomes.append(.duplicate)
                continue
            }
            let status: InboxStatus
            var effect: ApplyEffect?
            switch tally.ingest(prepared.decoded, apiVersion: envelope.apiVersion) {
            case .fail:
                outcomes.append(try SQLiteInbox.insert(delivery, status: .pending, effect: nil, processedAt: nil, db: db))
                continue
            case .ignore:
                status = .ignored
            case .write:
                let account = envelope.account ?? ""
                let applied = try Self.applyToLedger(
                    prepared.decoded, eventID: envelope.id, account: account, livemode: envelope.livemode, receivedAt: delivery.receivedAt, db: db)
                tally.written(applied, prepared.decoded, account: account, livemode: envelope.livemode)
                (status, effect) = (.applied, applied)
            }
            outcomes.append(try SQLiteInbox.insert(delivery, status: status, effect: effect, processedAt: now, db: db))
        }
        if let policy = database.outbox { try SQLiteOutbox.announce(tally.touches, policy: policy, now: now, db: db) }
        return IngestResult(outcomes: outcomes, pass: tally.pass, queued: tally.queued)
    }
}
