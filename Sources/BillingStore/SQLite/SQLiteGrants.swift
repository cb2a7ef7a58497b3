import BillingCore
import GRDB

/// The SQLite ``GrantStore``: one owner of the `promotionalGrant` table, executing the shared
/// statements of ``GrantRows``. A grant's insert and revocation announce the user's view to the
/// outbox in the same transaction when the database announces (``SQLiteDatabase/announcing(_:)``).
public struct SQLiteGrants: GrantStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    public func create(_ request: GrantRequest, for user: String, in scope: ServiceScope, now: Int64) async throws -> GrantCreation {
        let policy = database.outbox
        return try await database.writer.write { db in
            let key = GrantRows.userArguments(user, in: scope)
            if let idempotencyKey = request.idempotencyKey, let earlier = try Self.byKey(idempotencyKey, key: key, db: db) {
                return GrantRows.replay(earlier.grant, fingerprint: earlier.fingerprint, request: request)
            }
            let grant = GrantRows.newGrant(request, now: now)
            var inserted = false
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: GrantRows.insertSQL),
                arguments: Self.arguments(GrantRows.insertArguments(grant, request: request, user: user, in: scope))
            ) { _ in inserted = true }
            guard inserted else {
                // Another request with the key won (SQLite's one writer makes this unreachable; kept for symmetry).
                guard let idempotencyKey = request.idempotencyKey, let earlier = try Self.byKey(idempotencyKey, key: key, db: db) else {
                    throw GrantStoreError.notInserted
                }
                return GrantRows.replay(earlier.grant, fingerprint: earlier.fingerprint, request: request)
            }
            if let policy { try SQLiteOutbox.announce(user: user, scope: scope, policy: policy, now: now * 1000, db: db) }
            return .created(grant)
        }
    }

    public func grants(of user: String, in scope: ServiceScope) async throws -> [PromotionalGrant] {
        try await database.writer.read { db in try Self.grants(of: user, in: scope, db: db) }
    }

    public func revoke(_ id: String, of user: String, in scope: ServiceScope, by revoker: String, now: Int64) async throws -> PromotionalGrant? {
        let policy = database.outbox
        return try await database.writer.write { db in
            var changed = false
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: GrantRows.revokeSQL),
                arguments: Self.arguments([.integer(now), .text(revoker)] + [.text(scope.account), .boolean(scope.livemode), .text(id), .text(user)])
            ) { _ in changed = true }
            var grant: PromotionalGrant?
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: GrantRows.oneSQL),
                arguments: Self.arguments([.text(scope.account), .boolean(scope.livemode), .text(id), .text(user)])
            ) { row in grant = GrantRows.grant(from: row) }
            if changed, let policy { try SQLiteOutbox.announce(user: user, scope: scope, policy: policy, now: now * 1000, db: db) }
            return grant
        }
    }

    // MARK: - Inside the caller's transaction

    /// The user's grants, newest first (the user's billing reads them with its subscriptions).
    static func grants(of user: String, in scope: ServiceScope, db: Database) throws -> [PromotionalGrant] {
        var grants: [PromotionalGrant] = []
        try SQLiteColumns.forEachRow(
            db.cachedStatement(sql: GrantRows.userSQL), arguments: arguments(GrantRows.userArguments(user, in: scope))
        ) { row in grants.append(GrantRows.grant(from: row)) }
        return grants
    }

    private static func byKey(_ idempotencyKey: String, key: [LedgerValue], db: Database) throws -> (grant: PromotionalGrant, fingerprint: String?)? {
        var found: (PromotionalGrant, String?)?
        try SQLiteColumns.forEachRow(
            db.cachedStatement(sql: GrantRows.byKeySQL), arguments: arguments(key + [.text(idempotencyKey)])
        ) { row in found = (GrantRows.grant(from: row), row.string(8)) }
        return found
    }

    private static func arguments(_ values: [LedgerValue]) -> StatementArguments {
        StatementArguments(values.map(\.databaseValue))
    }
}

extension SQLiteMigrations {
    /// Promotional grants (`v8-grants` on PostgreSQL). Not derived from the inbox: replay keeps them.
    static func registerGrantMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v10-grants") { db in
            try db.execute(sql: """
                CREATE TABLE promotionalGrant (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL, appUserID TEXT NOT NULL,
                    tier TEXT NOT NULL, startsAt INTEGER NOT NULL, expiresAt INTEGER NOT NULL, reason TEXT NOT NULL,
                    createdBy TEXT NOT NULL, revokedAt INTEGER, revokedBy TEXT, idempotencyKey TEXT, requestFingerprint TEXT,
                    PRIMARY KEY (account, livemode, id)
                );
                CREATE INDEX promotionalGrant_user ON promotionalGrant(account, livemode, appUserID, startsAt);
                -- One grant per idempotency key and user, also between two replicas.
                CREATE UNIQUE INDEX promotionalGrant_idempotency ON promotionalGrant(account, livemode, appUserID, idempotencyKey)
                    WHERE idempotencyKey IS NOT NULL;
                """)
        }
    }
}
