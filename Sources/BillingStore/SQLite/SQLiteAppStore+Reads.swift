import BillingCore
import GRDB

/// Reads of the App Store ledger on SQLite, inside the caller's transaction.
extension SQLiteAppStore {
    /// One original transaction's record; nil before any transaction of it arrived.
    static func record(environment: String, original: String, db: Database) throws -> AppStoreSubscriptionRecord? {
        var found: AppStoreSubscriptionRecord?
        try SQLiteColumns.forEachRow(
            db.cachedStatement(sql: "SELECT \(AppStoreLedgerRows.recordColumns) FROM appStoreSubscription s WHERE s.environment = ? AND s.originalTransactionID = ?"),
            arguments: [environment, original]
        ) { row in found = AppStoreLedgerRows.record(from: row) }
        return found
    }

    /// Every App Store purchase tied to `user` in one mode.
    static func subscriptions(of user: String, livemode: Bool, db: Database) throws -> [AppStoreSubscriptionRecord] {
        let statement = try db.cachedStatement(sql: AppStoreLedgerRows.subscriptionsSQL(livemode: livemode))
        var records: [AppStoreSubscriptionRecord] = []
        try SQLiteColumns.forEachRow(statement, arguments: [user]) { row in
            if let record = AppStoreLedgerRows.record(from: row) { records.append(record) }
        }
        return records
    }
}
