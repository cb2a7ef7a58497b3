import Foundation
import Logging
import PostgresNIO

/// Every schema change of the PostgreSQL ledger, registered in one place and applied in order,
/// all in one transaction that first takes a transaction-scoped advisory lock: replicas starting
/// together queue on the lock, and the second finds the work done. A transaction-scoped lock
/// (not a session lock) is released by its own COMMIT, so it also holds behind PgBouncer's
/// transaction pooling, where a session lock would stay on a server connection other clients get.
package enum PostgresMigrations {
    struct Migration: Sendable {
        let version: String
        let statements: [String]
        /// Work the statements cannot express (decoding stored JSON in Swift), run after them in
        /// the same transaction.
        let backfill: (@Sendable (PostgresConnection, Logger) async throws -> Void)?

        init(
            version: String, statements: [String], backfill: (@Sendable (PostgresConnection, Logger) async throws -> Void)? = nil
        ) {
            self.version = version
            self.statements = statements
            self.backfill = backfill
        }
    }

    /// In order; a new schema change is a new version at the end, never an edit of one applied.
    static let all: [Migration] = [
        Migration(
            version: "v1-ledger",
            statements: PostgresSchema.inbox + PostgresSchema.ledger + PostgresSchema.reconcile + PostgresSchema.appStore
                + PostgresSchema.usage),
        PostgresInbox.claimMigration,
        Migration(version: "v3-outbox", statements: PostgresSchema.outbox),
        PostgresLedgerReconciliation.seenMigration,
        Migration(version: "v5-outbox-review", statements: PostgresSchema.outboxReview),
        Migration(version: "v6-outbox-due", statements: PostgresSchema.outboxDue),
        metricsMigration,
        PostgresGrants.migration,
        PostgresTimeline.migration,
        PostgresMetricsIndex.migration,
        PostgresAppStoreConsumption.migration,
        PostgresUsers.emailMigration,
        PostgresTimeline.checkoutMigration,
        PostgresTimeline.repairMigration,
        PostgresMetricsIndex.coveringMigration,
        PostgresBodyRetention.encodingMigration,
    ]

    /// The advisory lock's key: "billingd" in ASCII. Other applications on the database would
    /// have to pick the same 64-bit number to contend with it.
    package static let lockKey: Int64 = 0x6269_6c6c_696e_6764

    /// Applies, on `connection`, the migrations the database lacks; returns their versions (none
    /// when another process had applied them). Versions the database has and this build does not
    /// know (a newer replica migrated it during a rolling deploy) are left alone.
    static func migrate(_ connection: PostgresConnection, logger: Logger, now: Int64) async throws -> [String] {
        try await connection.transaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS schemaMigration (version text PRIMARY KEY, appliedAt bigint NOT NULL)",
                logger: logger)
            var applied = Set<String>()
            for try await version in try await connection.query("SELECT version FROM schemaMigration", logger: logger).decode(String.self) {
                applied.insert(version)
            }
            var versions: [String] = []
            for migration in all where !applied.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await migration.backfill?(connection, logger)
                try await connection.query(
                    "INSERT INTO schemaMigration (version, appliedAt) VALUES (\(migration.version), \(now))", logger: logger)
                versions.append(migration.version)
            }
            return versions
        }
    }
}
