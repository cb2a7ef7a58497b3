import BillingCore
import GRDB

/// Reads of the App Store ledger inside the caller's transaction.
enum AppStoreLedgerReads {
    static let recordColumns = """
        s.originalTransactionID, s.environment, s.transactionID, s.productID, s.type, s.subscriptionGroupIdentifier,
        s.purchaseDate, s.originalPurchaseDate, s.expiresDate, s.revoked, s.revocationDate, s.autoRenewStatus,
        s.autoRenewProductID, s.expirationIntent, s.isInBillingRetryPeriod, s.gracePeriodExpiresDate, s.offerType, s.price,
        s.currency, s.inAppOwnershipType
        """

    static func record(from row: some LedgerColumnReading) -> AppStoreSubscriptionRecord? {
        guard let original = row.string(0), let environment = row.string(1), let transaction = row.string(2),
            let product = row.string(3)
        else { return nil }
        return AppStoreSubscriptionRecord(
            originalTransactionID: original, environment: environment, transactionID: transaction, productID: product,
            type: row.string(4), subscriptionGroupIdentifier: row.string(5), purchaseDate: row.int64(6),
            originalPurchaseDate: row.int64(7), expiresDate: row.int64(8), revoked: row.bool(9), revocationDate: row.int64(10),
            autoRenewStatus: row.int64(11).map { $0 != 0 }, autoRenewProductID: row.string(12), expirationIntent: row.int64(13),
            isInBillingRetryPeriod: row.bool(14), gracePeriodExpiresDate: row.int64(15), offerType: row.int64(16),
            price: row.int64(17), currency: row.string(18), inAppOwnershipType: row.string(19))
    }

    /// One original transaction's record; nil before any transaction of it arrived.
    static func record(environment: String, original: String, db: Database) throws -> AppStoreSubscriptionRecord? {
        var found: AppStoreSubscriptionRecord?
        try UserLedgerColumns.forEachRow(
            db.cachedStatement(sql: "SELECT \(recordColumns) FROM appStoreSubscription s WHERE s.environment = ? AND s.originalTransactionID = ?"),
            arguments: [environment, original]
        ) { row in found = record(from: row) }
        return found
    }

    /// The environments of a mode: Production is live; the others are test.
    static func environmentsSQL(livemode: Bool) -> String {
        livemode ? "s.environment = 'Production'" : "s.environment <> 'Production'"
    }

    /// Every App Store purchase tied to a user (the one binding) in one mode.
    static func subscriptionsSQL(livemode: Bool) -> String {
        """
        SELECT \(recordColumns) FROM appStoreOwner o
        JOIN appStoreSubscription s ON s.environment = o.environment AND s.originalTransactionID = o.originalTransactionID
        WHERE o.appUserID = ? AND \(environmentsSQL(livemode: livemode)) AND s.transactionID IS NOT NULL
        ORDER BY s.environment, s.originalTransactionID
        """
    }

    /// Every App Store purchase tied to `user` in one mode.
    static func subscriptions(of user: String, livemode: Bool, db: Database) throws -> [AppStoreSubscriptionRecord] {
        let statement = try db.cachedStatement(sql: subscriptionsSQL(livemode: livemode))
        var records: [AppStoreSubscriptionRecord] = []
        try UserLedgerColumns.forEachRow(statement, arguments: [user]) { row in
            if let record = record(from: row) { records.append(record) }
        }
        return records
    }
}
