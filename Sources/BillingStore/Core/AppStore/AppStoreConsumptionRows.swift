import BillingCore

/// The statements of the refund-request tables (`appStoreConsumptionRequest`,
/// `appStoreConsumptionConsent`) and the decoding of their rows, written once for both backends
/// (`?` placeholders; PostgreSQL numbers them). One owner of the tables' SQL:
/// SQLite/SQLiteAppStoreConsumption.swift and Postgres/PostgresAppStoreConsumption.swift execute
/// these, and the App Store writers run ``insertRequestSQL`` in the transaction that applies a
/// `CONSUMPTION_REQUEST`.
package enum AppStoreConsumptionRows {
    // MARK: - Requests

    /// A request, once per notification, with the purchase's owner as the ledger knows it after
    /// the notification's own ties. Arguments: ``insertRequestArguments(_:environment:receivedAt:)``.
    static let insertRequestSQL = """
        INSERT INTO appStoreConsumptionRequest (environment, notificationUUID, transactionID, originalTransactionID, appUserID, reason,
            signedDate, receivedAt, status, attempts, nextAttemptAt)
        VALUES (?1, ?2, ?3, ?4, (SELECT appUserID FROM appStoreOwner WHERE environment = ?1 AND originalTransactionID = ?4), ?5,
            ?6, ?7, 'pending', 0, ?7)
        ON CONFLICT (environment, notificationUUID) DO NOTHING
        """

    /// `receivedAt` is Unix ms.
    static func insertRequestArguments(_ notification: AppStoreNotification, transaction: AppStoreTransaction, environment: String, receivedAt: Int64)
        -> [LedgerValue]
    {
        [
            .text(environment), .text(notification.notificationUUID), .text(transaction.transactionID),
            .text(transaction.originalTransactionID), notification.consumptionRequestReason.map(LedgerValue.text) ?? .null,
            .integer(notification.signedDate), .integer(receivedAt),
        ]
    }

    /// The columns ``request(from:)`` reads, in order.
    static let columnNames = [
        "environment", "notificationUUID", "transactionID", "originalTransactionID", "appUserID", "reason", "signedDate", "receivedAt",
        "status", "attempts", "nextAttemptAt", "lastAttemptAt", "sentAt", "body", "appleStatus", "lastError",
    ]
    static let columns = columnNames.joined(separator: ", ")

    static func request(from row: some LedgerColumnReading) -> AppStoreConsumptionRequest {
        AppStoreConsumptionRequest(
            environment: row.string(0) ?? "", notificationUUID: row.string(1) ?? "", transactionID: row.string(2) ?? "",
            originalTransactionID: row.string(3) ?? "", user: row.string(4), reason: row.string(5), signedDate: row.int64(6) ?? 0,
            receivedAt: row.int64(7) ?? 0, status: row.string(8).flatMap(AppStoreConsumptionStatus.init(rawValue:)) ?? .pending,
            attempts: Int(row.int64(9) ?? 0), nextAttemptAt: row.int64(10), lastAttemptAt: row.int64(11), sentAt: row.int64(12),
            body: row.string(13).map { Array($0.utf8) }, appleStatus: row.int64(14).map { Int($0) }, lastError: row.string(15))
    }

    /// Takes due pending requests of some environments and moves their next attempt to the end of
    /// the lease, in one statement. PostgreSQL skips rows another replica is taking
    /// (`FOR UPDATE SKIP LOCKED`); SQLite's one writer needs no lock. Arguments: lease end, now,
    /// limit, then the environments.
    static func claimSQL(postgres: Bool, environments: Int) -> String {
        let list = (0..<max(1, environments)).map { "?\($0 + 4)" }.joined(separator: ", ")
        let due = """
            SELECT environment, notificationUUID FROM appStoreConsumptionRequest
            WHERE status = 'pending' AND nextAttemptAt <= ?2 AND environment IN (\(list))
            ORDER BY nextAttemptAt, notificationUUID LIMIT ?3
            """
        if postgres {
            return """
                UPDATE appStoreConsumptionRequest t SET nextAttemptAt = ?1
                FROM (\(due) FOR UPDATE SKIP LOCKED) AS due
                WHERE t.environment = due.environment AND t.notificationUUID = due.notificationUUID
                RETURNING \(columnNames.map { "t." + $0 }.joined(separator: ", "))
                """
        }
        return """
            UPDATE appStoreConsumptionRequest SET nextAttemptAt = ?1
            WHERE (environment, notificationUUID) IN (\(due))
            RETURNING \(columns)
            """
    }

    static func claimArguments(environments: [String], now: Int64, leaseUntil: Int64, limit: Int) -> [LedgerValue] {
        [.integer(leaseUntil), .integer(now), .integer(Int64(limit))] + (environments.isEmpty ? [.text("")] : environments.map(LedgerValue.text))
    }

    /// The statement that records an outcome, and its arguments; every one changes only a row
    /// still pending and returns its key when it did.
    static func record(_ outcome: AppStoreConsumptionOutcome, environment: String, notificationUUID: String, at: Int64)
        -> (sql: String, arguments: [LedgerValue])
    {
        let key: [LedgerValue] = [.text(environment), .text(notificationUUID)]
        let update: String
        var values: [LedgerValue]
        switch outcome {
        case .attempting(let body, let user):
            update = "attempts = attempts + 1, lastAttemptAt = ?, body = ?, appUserID = ?"
            values = [.integer(at), .text(String(decoding: body, as: UTF8.self)), .text(user)]
        case .sent(let appleStatus):
            update = "status = 'sent', sentAt = ?, appleStatus = ?, nextAttemptAt = NULL, lastError = NULL"
            values = [.integer(at), .integer(Int64(appleStatus))]
        case .retry(let retryAt, let error, let appleStatus):
            update = "nextAttemptAt = ?, lastError = ?, appleStatus = ?"
            values = [.integer(retryAt), .text(error), appleStatus.map { .integer(Int64($0)) } ?? .null]
        case .failed(let error, let appleStatus):
            update = "status = 'failed', nextAttemptAt = NULL, lastError = ?, appleStatus = ?"
            values = [.text(error), appleStatus.map { .integer(Int64($0)) } ?? .null]
        case .noConsent(let user):
            update = "status = 'no_consent', nextAttemptAt = NULL, appUserID = COALESCE(?, appUserID)"
            values = [user.map(LedgerValue.text) ?? .null]
        case .expired:
            update = "status = 'expired', nextAttemptAt = NULL"
            values = []
        case .released:
            update = "nextAttemptAt = ?"
            values = [.integer(at)]
        }
        return (
            "UPDATE appStoreConsumptionRequest SET \(update) WHERE environment = ? AND notificationUUID = ? AND status = 'pending' RETURNING notificationUUID",
            values + key
        )
    }

    /// Pending requests whose window ended. Argument: the latest `signedDate` that is over
    /// (now − 12 hours).
    static let expireOverdueSQL = """
        UPDATE appStoreConsumptionRequest SET status = 'expired', nextAttemptAt = NULL
        WHERE status = 'pending' AND signedDate <= ? RETURNING notificationUUID
        """

    static func expireOverdueArguments(now: Int64) -> [LedgerValue] {
        [.integer(now - ConsumptionAnswerPolicy.answerWindow)]
    }

    /// Requests newest first, of every status or of one. Arguments: [status,] limit.
    static func listSQL(status: Bool) -> String {
        """
        SELECT \(columns) FROM appStoreConsumptionRequest\(status ? " WHERE status = ?" : "")
        ORDER BY receivedAt DESC, notificationUUID DESC LIMIT ?
        """
    }

    // MARK: - What an answer is decided from

    /// The owner of a purchase. Arguments: environment, original transaction id.
    static let ownerSQL = AppStoreLedgerRows.ownerSQL

    /// A transaction's facts. Arguments: environment, transaction id.
    static let transactionSQL = """
        SELECT productID, type, purchaseDate, expiresDate, revocationDate FROM appStoreTransaction
        WHERE environment = ? AND transactionID = ?
        """

    static func transaction(from row: some LedgerColumnReading) -> AppStoreConsumptionContext.Transaction {
        AppStoreConsumptionContext.Transaction(
            productID: row.string(0) ?? "", type: row.string(1), purchaseDate: row.int64(2), expiresDate: row.int64(3),
            revocationDate: row.int64(4))
    }

    /// How many entitlement records the ledger keeps of a user in the platform account of one
    /// mode, and whether one shows them entitled through a purchase (its original transaction).
    /// Arguments: original transaction id, livemode, user.
    static let historySQL = """
        SELECT CAST(COUNT(*) AS BIGINT), CAST(COALESCE(MAX(CASE WHEN entitled AND source = 'app_store' AND ref = ? THEN 1 ELSE 0 END), 0) AS BIGINT)
        FROM entitlementChange WHERE account = '' AND livemode = ? AND "user" = ?
        """

    // MARK: - Consent

    static let consentSQL = "SELECT consented, updatedAt FROM appStoreConsumptionConsent WHERE appUserID = ?"

    /// Arguments: user, consented, updatedAt (Unix seconds).
    static let setConsentSQL = """
        INSERT INTO appStoreConsumptionConsent (appUserID, consented, updatedAt) VALUES (?, ?, ?)
        ON CONFLICT (appUserID) DO UPDATE SET consented = excluded.consented, updatedAt = excluded.updatedAt
        """

    static func consent(from row: some LedgerColumnReading) -> ConsumptionConsent {
        ConsumptionConsent(consented: row.bool(0), updatedAt: row.int64(1) ?? 0)
    }

    /// The context of a request, from the rows read: the owner the request names is used when
    /// the ledger's owner is gone.
    static func context(
        request: AppStoreConsumptionRequest, owner: String?, consent: ConsumptionConsent?, transaction: AppStoreConsumptionContext.Transaction?,
        history: (records: Int64, entitled: Int64)?
    ) -> AppStoreConsumptionContext {
        AppStoreConsumptionContext(
            owner: owner ?? request.user, consent: consent, transaction: transaction, historyRecords: Int(history?.records ?? 0),
            entitledThroughPurchase: (history?.entitled ?? 0) > 0)
    }
}
