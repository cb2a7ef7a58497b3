import BillingCore
import Logging
import PostgresNIO

/// The PostgreSQL ``TimelineStore``: the twin of SQLite/SQLiteTimeline.swift, running the
/// statements of ``TimelineRows`` in one read-only transaction, so that a page's sources see
/// one snapshot.
struct PostgresTimeline: TimelineStore {
    let client: PostgresClient
    let logger: Logger

    func timeline(of user: String, in scope: ServiceScope, limit: Int, after cursor: TimelineCursor?, now: Int64) async throws -> TimelinePage {
        let logger = logger
        return try await client.withConnection { connection in
            try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            do {
                let page = try await TimelineRows.page(of: user, in: scope, limit: limit, after: cursor, now: now) { sql, arguments, item in
                    var items: [TimelineItem] = []
                    for try await row in try await connection.run(sql, arguments, logger: logger) {
                        if let found = item(PostgresRowValues(values: try row.map(LedgerValue.init))) { items.append(found) }
                    }
                    return items
                }
                try await connection.query("COMMIT", logger: logger)
                return page
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// The customer timeline (`v11-timeline` on SQLite): what changes leave users with, refused
    /// consumes per day and usage periods begun, and the indexes of a user's events and deliveries by time.
    static let migration = PostgresMigrations.Migration(
        version: "v9-timeline",
        statements: [
            """
            CREATE TABLE entitlementChange (
                account text NOT NULL, livemode boolean NOT NULL, "user" text NOT NULL, at bigint NOT NULL,
                tier text, entitled boolean NOT NULL, source text, validUntil bigint, why text NOT NULL, ref text,
                PRIMARY KEY (account, livemode, "user", at)
            )
            """,
            """
            CREATE TABLE usageMark (
                account text NOT NULL, livemode boolean NOT NULL, "user" text NOT NULL, kind text NOT NULL, meter text NOT NULL,
                day bigint NOT NULL, at bigint NOT NULL, count bigint NOT NULL, lastAt bigint NOT NULL,
                used bigint, limitCount bigint, periodStart bigint, periodEnd bigint,
                PRIMARY KEY (account, livemode, "user", kind, meter, day)
            )
            """,
            #"CREATE INDEX usageMark_user ON usageMark (account, livemode, "user", at)"#,
            "CREATE INDEX inboxEvent_objectCreated ON inboxEvent (objectID, created)",
            "DROP INDEX inboxEvent_object",
            #"CREATE INDEX outboxEvent_userCreated ON outboxEvent (account, livemode, "user", createdAt)"#,
        ])

    /// A user's Checkout sessions on the timeline (`v15-timeline-checkout` on SQLite): the
    /// sessions of their customers and those opened for them (`client_reference_id`), read by index.
    static let checkoutMigration = PostgresMigrations.Migration(
        version: "v13-timeline-checkout",
        statements: [
            "CREATE INDEX checkoutSession_customer ON checkoutSession (account, livemode, customer)",
            "CREATE INDEX checkoutSession_clientReference ON checkoutSession (account, livemode, clientReferenceID)",
        ])
}
