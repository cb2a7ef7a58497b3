import BillingCore
import Logging
import PostgresNIO

/// The PostgreSQL ``AppStoreConsumptionStore``: the twin of SQLite/SQLiteAppStoreConsumption.swift,
/// running the shared statements of ``AppStoreConsumptionRows``. Replicas claim due requests
/// with `FOR UPDATE SKIP LOCKED`, moving each one's next attempt to the end of the lease in the
/// same statement, so two replicas never answer one request at once.
struct PostgresAppStoreConsumption: AppStoreConsumptionStore {
    let client: PostgresClient
    let logger: Logger

    func setConsent(of user: String, consented: Bool, now: Int64) async throws -> ConsumptionConsent {
        try await client.withConnection { connection in
            try await connection.run(AppStoreConsumptionRows.setConsentSQL, [.text(user), .boolean(consented), .integer(now)], logger: logger)
            return ConsumptionConsent(consented: consented, updatedAt: now)
        }
    }

    func consent(of user: String) async throws -> ConsumptionConsent? {
        try await client.withConnection { connection in try await Self.consent(of: user, connection: connection, logger: logger) }
    }

    func claimDue(environments: [String], now: Int64, leaseUntil: Int64, limit: Int) async throws -> [AppStoreConsumptionRequest] {
        guard !environments.isEmpty, limit > 0 else { return [] }
        return try await client.withConnection { connection in
            var claimed: [AppStoreConsumptionRequest] = []
            for try await row in try await connection.run(
                AppStoreConsumptionRows.claimSQL(postgres: true, environments: environments.count),
                AppStoreConsumptionRows.claimArguments(environments: environments, now: now, leaseUntil: leaseUntil, limit: limit),
                logger: logger)
            {
                claimed.append(AppStoreConsumptionRows.request(from: PostgresRowValues(values: try row.map(LedgerValue.init))))
            }
            return claimed.sorted { ($0.signedDate, $0.notificationUUID) < ($1.signedDate, $1.notificationUUID) }
        }
    }

    func answerContext(for request: AppStoreConsumptionRequest) async throws -> AppStoreConsumptionContext {
        let logger = logger
        return try await client.withConnection { connection in
            var owner: String?
            for try await row in try await connection.run(
                AppStoreConsumptionRows.ownerSQL, [.text(request.environment), .text(request.originalTransactionID)], logger: logger)
            {
                owner = PostgresRowValues(values: try row.map(LedgerValue.init)).string(0)
            }
            let user = owner ?? request.user
            var transaction: AppStoreConsumptionContext.Transaction?
            for try await row in try await connection.run(
                AppStoreConsumptionRows.transactionSQL, [.text(request.environment), .text(request.transactionID)], logger: logger)
            {
                transaction = AppStoreConsumptionRows.transaction(from: PostgresRowValues(values: try row.map(LedgerValue.init)))
            }
            var history: (Int64, Int64)?
            var consent: ConsumptionConsent?
            if let user {
                let livemode = request.environment == AppStoreEnvironment.production.rawValue
                for try await row in try await connection.run(
                    AppStoreConsumptionRows.historySQL, [.text(request.originalTransactionID), .boolean(livemode), .text(user)], logger: logger)
                {
                    let values = PostgresRowValues(values: try row.map(LedgerValue.init))
                    history = (values.int64(0) ?? 0, values.int64(1) ?? 0)
                }
                consent = try await Self.consent(of: user, connection: connection, logger: logger)
            }
            return AppStoreConsumptionRows.context(request: request, owner: owner, consent: consent, transaction: transaction, history: history)
        }
    }

    @discardableResult
    func record(_ outcome: AppStoreConsumptionOutcome, environment: String, notificationUUID: String, at: Int64) async throws -> Bool {
        let (sql, values) = AppStoreConsumptionRows.record(outcome, environment: environment, notificationUUID: notificationUUID, at: at)
        return try await client.withConnection { connection in
            for try await _ in try await connection.run(sql, values, logger: logger) { return true }
            return false
        }
    }

    func expireOverdue(now: Int64) async throws -> Int {
        try await client.withConnection { connection in
            var count = 0
            for try await _ in try await connection.run(
                AppStoreConsumptionRows.expireOverdueSQL, AppStoreConsumptionRows.expireOverdueArguments(now: now), logger: logger)
            {
                count += 1
            }
            return count
        }
    }

    func requests(status: AppStoreConsumptionStatus?, limit: Int) async throws -> [AppStoreConsumptionRequest] {
        try await client.withConnection { connection in
            var requests: [AppStoreConsumptionRequest] = []
            let values: [LedgerValue] = (status.map { [.text($0.rawValue)] } ?? []) + [.integer(Int64(limit))]
            for try await row in try await connection.run(AppStoreConsumptionRows.listSQL(status: status != nil), values, logger: logger) {
                requests.append(AppStoreConsumptionRows.request(from: PostgresRowValues(values: try row.map(LedgerValue.init))))
            }
            return requests
        }
    }

    // MARK: - Inside the caller's transaction

    /// Records a `CONSUMPTION_REQUEST` in the transaction that applies it; a second delivery of
    /// the notification adds nothing, also when two replicas apply it at once.
    static func insert(
        _ notification: AppStoreNotification, transaction: AppStoreTransaction, environment: String, receivedAt: Int64,
        connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.run(
            AppStoreConsumptionRows.insertRequestSQL,
            AppStoreConsumptionRows.insertRequestArguments(notification, transaction: transaction, environment: environment, receivedAt: receivedAt),
            logger: logger)
    }

    static func consent(of user: String, connection: PostgresConnection, logger: Logger) async throws -> ConsumptionConsent? {
        var consent: ConsumptionConsent?
        for try await row in try await connection.run(AppStoreConsumptionRows.consentSQL, [.text(user)], logger: logger) {
            consent = AppStoreConsumptionRows.consent(from: PostgresRowValues(values: try row.map(LedgerValue.init)))
        }
        return consent
    }

    /// Refund requests and consent (`v13-consumption` on SQLite). Not derived from the inbox:
    /// replay keeps them.
    static let migration = PostgresMigrations.Migration(
        version: "v11-consumption",
        statements: [
            """
            CREATE TABLE appStoreConsumptionRequest (
                environment text NOT NULL, notificationUUID text NOT NULL, transactionID text NOT NULL,
                originalTransactionID text NOT NULL, appUserID text, reason text, signedDate bigint NOT NULL,
                receivedAt bigint NOT NULL, status text NOT NULL, attempts bigint NOT NULL, nextAttemptAt bigint,
                lastAttemptAt bigint, sentAt bigint, body text, appleStatus bigint, lastError text,
                PRIMARY KEY (environment, notificationUUID)
            )
            """,
            "CREATE INDEX appStoreConsumptionRequest_due ON appStoreConsumptionRequest (status, nextAttemptAt)",
            "CREATE INDEX appStoreConsumptionRequest_user ON appStoreConsumptionRequest (appUserID, signedDate)",
            "CREATE INDEX appStoreConsumptionRequest_received ON appStoreConsumptionRequest (receivedAt)",
            """
            CREATE TABLE appStoreConsumptionConsent (
                appUserID text PRIMARY KEY NOT NULL, consented boolean NOT NULL, updatedAt bigint NOT NULL
            )
            """,
        ])
}
