import BillingCore
import Logging
import PostgresNIO

/// The PostgreSQL ``GrantStore``: the twin of SQLite/SQLiteGrants.swift, executing the shared
/// statements of ``GrantRows``. Two replicas given one idempotency key for one user insert one
/// grant: the unique index makes the second insert wait for the first and then do nothing, and
/// the second answers the first's grant.
struct PostgresGrants: GrantStore {
    let client: PostgresClient
    let logger: Logger
    /// How a grant's insert and revocation announce the user's view; nil: not at all.
    var outbox: OutboxPolicy?

    func create(_ request: GrantRequest, for user: String, in scope: ServiceScope, now: Int64) async throws -> GrantCreation {
        try await client.transaction(logger: logger) { connection in
            let key = GrantRows.userArguments(user, in: scope)
            if let idempotencyKey = request.idempotencyKey, let earlier = try await Self.byKey(idempotencyKey, key: key, connection: connection, logger: logger) {
                return GrantRows.replay(earlier.grant, fingerprint: earlier.fingerprint, request: request)
            }
            let grant = GrantRows.newGrant(request, now: now)
            var inserted = false
            for try await _ in try await connection.run(
                GrantRows.insertSQL, GrantRows.insertArguments(grant, request: request, user: user, in: scope), logger: logger)
            {
                inserted = true
            }
            guard inserted else {
                // A concurrent request with the key committed first: its grant is the answer.
                guard let idempotencyKey = request.idempotencyKey,
                    let earlier = try await Self.byKey(idempotencyKey, key: key, connection: connection, logger: logger)
                else { throw GrantStoreError.notInserted }
                return GrantRows.replay(earlier.grant, fingerprint: earlier.fingerprint, request: request)
            }
            if let outbox {
                try await PostgresOutbox.announce(user: user, scope: scope, policy: outbox, now: now * 1000, connection: connection, logger: logger)
            }
            return .created(grant)
        }
    }

    func grants(of user: String, in scope: ServiceScope) async throws -> [PromotionalGrant] {
        try await client.withConnection { connection in
            var grants: [PromotionalGrant] = []
            for try await row in try await connection.run(GrantRows.userSQL, GrantRows.userArguments(user, in: scope), logger: logger) {
                grants.append(GrantRows.grant(from: PostgresRowValues(values: try row.map(LedgerValue.init))))
            }
            return grants
        }
    }

    func revoke(_ id: String, of user: String, in scope: ServiceScope, by revoker: String, now: Int64) async throws -> PromotionalGrant? {
        try await client.transaction(logger: logger) { connection in
            let key: [LedgerValue] = [.text(scope.account), .boolean(scope.livemode), .text(id), .text(user)]
            var changed = false
            for try await _ in try await connection.run(GrantRows.revokeSQL, [.integer(now), .text(revoker)] + key, logger: logger) {
                changed = true
            }
            var grant: PromotionalGrant?
            for try await row in try await connection.run(GrantRows.oneSQL, key, logger: logger) {
                grant = GrantRows.grant(from: PostgresRowValues(values: try row.map(LedgerValue.init)))
            }
            if changed, let outbox {
                try await PostgresOutbox.announce(user: user, scope: scope, policy: outbox, now: now * 1000, connection: connection, logger: logger)
            }
            return grant
        }
    }

    private static func byKey(
        _ idempotencyKey: String, key: [LedgerValue], connection: PostgresConnection, logger: Logger
    ) async throws -> (grant: PromotionalGrant, fingerprint: String?)? {
        var found: (PromotionalGrant, String?)?
        for try await row in try await connection.run(GrantRows.byKeySQL, key + [.text(idempotencyKey)], logger: logger) {
            let values = PostgresRowValues(values: try row.map(LedgerValue.init))
            found = (GrantRows.grant(from: values), values.string(8))
        }
        return found
    }

    /// Promotional grants (`v10-grants` on SQLite). Not derived from the inbox: replay keeps them.
    static let migration = PostgresMigrations.Migration(
        version: "v8-grants",
        statements: [
            """
            CREATE TABLE promotionalGrant (
                account text NOT NULL, livemode boolean NOT NULL, id text NOT NULL, appUserID text NOT NULL,
                tier text NOT NULL, startsAt bigint NOT NULL, expiresAt bigint NOT NULL, reason text NOT NULL,
                createdBy text NOT NULL, revokedAt bigint, revokedBy text, idempotencyKey text, requestFingerprint text,
                PRIMARY KEY (account, livemode, id)
            )
            """,
            "CREATE INDEX promotionalGrant_user ON promotionalGrant (account, livemode, appUserID, startsAt)",
            """
            CREATE UNIQUE INDEX promotionalGrant_idempotency ON promotionalGrant (account, livemode, appUserID, idempotencyKey)
                WHERE idempotencyKey IS NOT NULL
            """,
        ])
}
