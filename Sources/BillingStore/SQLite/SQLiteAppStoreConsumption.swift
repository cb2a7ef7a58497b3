import BillingCore
import GRDB

/// The SQLite ``AppStoreConsumptionStore``: runs the shared statements of
/// ``AppStoreConsumptionRows``. Its one writer serialises claims, so two responders (a second
/// process on the file) never take one request at once.
public struct SQLiteAppStoreConsumption: AppStoreConsumptionStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    public func setConsent(of user: String, consented: Bool, now: Int64) async throws -> ConsumptionConsent {
        try await database.writer.write { db in
            try db.cachedStatement(sql: AppStoreConsumptionRows.setConsentSQL).execute(arguments: [user, consented, now])
            return ConsumptionConsent(consented: consented, updatedAt: now)
        }
    }

    public func consent(of user: String) async throws -> ConsumptionConsent? {
        try await database.writer.read { db in try Self.consent(of: user, db: db) }
    }

    public func claimDue(environments: [String], now: Int64, leaseUntil: Int64, limit: Int) async throws -> [AppStoreConsumptionRequest] {
        guard !environments.isEmpty, limit > 0 else { return [] }
        return try await database.writer.write { db in
            var claimed: [AppStoreConsumptionRequest] = []
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: AppStoreConsumptionRows.claimSQL(postgres: false, environments: environments.count)),
                arguments: Self.arguments(
                    AppStoreConsumptionRows.claimArguments(environments: environments, now: now, leaseUntil: leaseUntil, limit: limit))
            ) { row in claimed.append(AppStoreConsumptionRows.request(from: row)) }
            return claimed.sorted { ($0.signedDate, $0.notificationUUID) < ($1.signedDate, $1.notificationUUID) }
        }
    }

    public func answerContext(for request: AppStoreConsumptionRequest) async throws -> AppStoreConsumptionContext {
        try await database.writer.read { db in
            let owner = try String.fetchOne(
                db.cachedStatement(sql: AppStoreConsumptionRows.ownerSQL), arguments: [request.environment, request.originalTransactionID])
            let user = owner ?? request.user
            var transaction: AppStoreConsumptionContext.Transaction?
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: AppStoreConsumptionRows.transactionSQL), arguments: [request.environment, request.transactionID]
            ) { row in transaction = AppStoreConsumptionRows.transaction(from: row) }
            var history: (Int64, Int64)?
            if let user {
                try SQLiteColumns.forEachRow(
                    db.cachedStatement(sql: AppStoreConsumptionRows.historySQL),
                    arguments: [request.originalTransactionID, request.environment == AppStoreEnvironment.production.rawValue, user]
                ) { row in history = (row.int64(0) ?? 0, row.int64(1) ?? 0) }
            }
            return AppStoreConsumptionRows.context(
                request: request, owner: owner, consent: try user.flatMap { try Self.consent(of: $0, db: db) }, transaction: transaction,
                history: history)
        }
    }

    @discardableResult
    public func record(_ outcome: AppStoreConsumptionOutcome, environment: String, notificationUUID: String, at: Int64) async throws -> Bool {
        let (sql, values) = AppStoreConsumptionRows.record(outcome, environment: environment, notificationUUID: notificationUUID, at: at)
        return try await database.writer.write { db in
            var changed = false
            try SQLiteColumns.forEachRow(db.cachedStatement(sql: sql), arguments: Self.arguments(values)) { _ in changed = true }
            return changed
        }
    }

    public func expireOverdue(now: Int64) async throws -> Int {
        try await database.writer.write { db in
            var count = 0
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: AppStoreConsumptionRows.expireOverdueSQL),
                arguments: Self.arguments(AppStoreConsumptionRows.expireOverdueArguments(now: now))
            ) { _ in count += 1 }
            return count
        }
    }

    public func requests(status: AppStoreConsumptionStatus?, limit: Int) async throws -> [AppStoreConsumptionRequest] {
        try await database.writer.read { db in
            var requests: [AppStoreConsumptionRequest] = []
            let values: [LedgerValue] = (status.map { [.text($0.rawValue)] } ?? []) + [.integer(Int64(limit))]
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: AppStoreConsumptionRows.listSQL(status: status != nil)), arguments: Self.arguments(values)
            ) { row in requests.append(AppStoreConsumptionRows.request(from: row)) }
            return requests
        }
    }

    // MARK: - Inside the caller's transaction

    /// Records a `CONSUMPTION_REQUEST` in the transaction that applies it; a second delivery of
    /// the notification adds nothing.
    static func insert(
        _ notification: AppStoreNotification, transaction: AppStoreTransaction, environment: String, receivedAt: Int64, db: Database
    ) throws {
        try db.cachedStatement(sql: AppStoreConsumptionRows.insertRequestSQL).execute(
            arguments: arguments(
                AppStoreConsumptionRows.insertRequestArguments(notification, transaction: transaction, environment: environment, receivedAt: receivedAt)))
    }

    static func consent(of user: String, db: Database) throws -> ConsumptionConsent? {
        var consent: ConsumptionConsent?
        try SQLiteColumns.forEachRow(db.cachedStatement(sql: AppStoreConsumptionRows.consentSQL), arguments: [user]) { row in
            consent = AppStoreConsumptionRows.consent(from: row)
        }
        return consent
    }

    private static func arguments(_ values: [LedgerValue]) -> StatementArguments {
        StatementArguments(values.map(\.databaseValue))
    }
}

extension SQLiteMigrations {
    /// Refund requests and consent (`v11-consumption` on PostgreSQL). Not derived from the inbox:
    /// replay keeps them, and a replayed notification finds its request there already.
    static func registerConsumptionMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v13-consumption") { db in
            try db.execute(sql: """
                -- One row per CONSUMPTION_REQUEST notification, written in the transaction that
                -- applies it; the responder's attempts and Apple's answer are kept on it.
                -- Times are Unix ms; body is the JSON sent to Apple.
                CREATE TABLE appStoreConsumptionRequest (
                    environment TEXT NOT NULL, notificationUUID TEXT NOT NULL, transactionID TEXT NOT NULL,
                    originalTransactionID TEXT NOT NULL, appUserID TEXT, reason TEXT, signedDate INTEGER NOT NULL,
                    receivedAt INTEGER NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL, nextAttemptAt INTEGER,
                    lastAttemptAt INTEGER, sentAt INTEGER, body TEXT, appleStatus INTEGER, lastError TEXT,
                    PRIMARY KEY (environment, notificationUUID)
                ) WITHOUT ROWID;
                CREATE INDEX appStoreConsumptionRequest_due ON appStoreConsumptionRequest(status, nextAttemptAt);
                CREATE INDEX appStoreConsumptionRequest_user ON appStoreConsumptionRequest(appUserID, signedDate);
                CREATE INDEX appStoreConsumptionRequest_received ON appStoreConsumptionRequest(receivedAt);

                -- Each app user's consent to share consumption data with Apple, as the app last
                -- reported it (updatedAt in Unix seconds).
                CREATE TABLE appStoreConsumptionConsent (
                    appUserID TEXT PRIMARY KEY NOT NULL, consented BOOLEAN NOT NULL, updatedAt INTEGER NOT NULL
                ) WITHOUT ROWID;
                """)
        }
    }
}
