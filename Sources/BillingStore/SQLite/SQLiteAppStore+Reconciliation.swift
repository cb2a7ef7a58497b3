import BillingCore
import Foundation
import GRDB

/// The SQLite ``AppStoreReconciliationStore``: what App Store reconcile reads from and writes to
/// the ledger: subscriptions whose state may be stale, and the repairs fetched from the App Store
/// Server API, which go into the inbox like deliveries (so a replay rebuilds them) and are applied
/// under the same `signedDate` guard.
extension SQLiteAppStore: AppStoreReconciliationStore {
    /// Subscriptions whose state may be stale at `now` (Unix ms), in original transaction id
    /// order after `after`, at most `limit`; a keyset page, so that memory stays flat.
    public func staleSubscriptions(environment: String, now: Int64, after: String?, limit: Int) async throws
        -> [(originalTransactionID: String, reason: AppStoreStaleReason)]
    {
        try await database.writer.read { db in
            let rows = try Row.fetchAll(
                db.cachedStatement(sql: """
                    SELECT s.originalTransactionID,
                        CASE
                            WHEN \(SQLiteInbox.hasUnappliedEvent(accountSQL: "'\(InboxAccount.appStorePrefix)' || s.environment", objectSQL: "s.originalTransactionID"))
                                THEN 'failed_delivery'
                            WHEN s.status = 'active' AND s.expiresDate IS NOT NULL AND s.expiresDate < ?2
                                AND s.revoked = 0 THEN 'expired_while_active'
                            WHEN s.status IN ('billing_retry', 'grace_period') OR (s.isInBillingRetryPeriod = 1 AND s.revoked = 0)
                                THEN 'billing_retry'
                            WHEN EXISTS (SELECT 1 FROM appStoreTransaction t WHERE t.environment = s.environment
                                AND t.originalTransactionID = s.originalTransactionID AND t.vSourceID LIKE 'appstore\\_app\\_%' ESCAPE '\\'
                                AND t.vSignedDate > COALESCE(s.lastNotificationSignedDate, 0)) THEN 'reported_without_notification'
                        END AS reason
                    FROM appStoreSubscription s
                    WHERE s.environment = ?1 AND s.originalTransactionID > ?3
                    ORDER BY s.originalTransactionID
                    """),
                arguments: [environment, now, after ?? ""])
            var stale: [(String, AppStoreStaleReason)] = []
            for row in rows {
                guard let reason = (row["reason"] as String?).flatMap(AppStoreStaleReason.init(rawValue:)) else { continue }
                stale.append((row["originalTransactionID"], reason))
                if stale.count == limit { break }
            }
            return stale
        }
    }

    /// The ledger's record of an original transaction; nil when it has none.
    public func record(environment: String, originalTransactionID: String) async throws -> AppStoreSubscriptionRecord? {
        try await database.writer.read { db in
            try SQLiteAppStore.record(environment: environment, original: originalTransactionID, db: db)
        }
    }

    /// Stores fetched transactions (with renewal info where given) as inbox rows and applies each
    /// in the same transaction; the effect says whether the ledger changed (a state the ledger
    /// already held, or held newer, is `.stale`; the same fetch twice is `.unchanged`).
    public func recordFetched(_ snapshots: [AppStoreServerSnapshot], environment: AppStoreEnvironment, receivedAt: Int64) async throws
        -> [ApplyEffect]
    {
        let outbox = database.outbox
        return try await database.writer.write { db in
            var effects: [ApplyEffect] = []
            var touches = OutboxTouches()
            for snapshot in snapshots {
                let delivery = InboxDelivery.appStoreFetched(snapshot, environment: environment, receivedAt: receivedAt)
                switch try SQLiteInbox.insert([delivery], status: .applied, db: db)[0] {
                case .stored(let seq):
                    let effect = try SQLiteAppStoreWriter.apply(
                        .server(snapshot), environment: environment.rawValue, sourceID: snapshot.eventID, receivedAt: receivedAt, db: db)
                    try SQLiteInbox.recordApplied(seq: seq, effect: effect, at: receivedAt, db: db)
                    if effect != .stale { touches.add(.server(snapshot), environment: environment.rawValue) }
                    effects.append(effect)
                case .duplicate:
                    effects.append(.unchanged)
                }
            }
            if let outbox { try SQLiteOutbox.announce(touches, policy: outbox, now: receivedAt, db: db) }
            return effects
        }
    }

    /// The original transactions the ledger holds in an environment, for the report's totals.
    public func subscriptionCount(environment: String) async throws -> Int {
        try await database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM appStoreSubscription WHERE environment = ?", arguments: [environment]) ?? 0
        }
    }
}
