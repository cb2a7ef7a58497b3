import BillingCore
import GRDB

/// The SQLite ``TimelineStore``: runs the statements of ``TimelineRows``, each source's reads in
/// one read transaction.
public struct SQLiteTimeline: TimelineStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    public func timeline(of user: String, in scope: ServiceScope, limit: Int, after cursor: TimelineCursor?, now: Int64) async throws -> TimelinePage {
        let writer = database.writer
        return try await TimelineRows.page(of: user, in: scope, limit: limit, after: cursor, now: now) { sql, arguments, item in
            try await writer.read { db in
                var items: [TimelineItem] = []
                try SQLiteColumns.forEachRow(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments.map(\.databaseValue))) { row in
                    if let found = item(row) { items.append(found) }
                }
                return items
            }
        }
    }
}

extension SQLiteMigrations {
    /// The customer timeline (`v9-timeline` on PostgreSQL): the access each change left a user
    /// with, refused consumes per day and usage periods begun, and the indexes that read a user's
    /// inbox events and outbound deliveries by time. Not derived from the inbox: replay keeps them.
    static func registerTimelineMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v11-timeline") { db in
            try db.execute(sql: """
                -- The access a ledger change left a user with, when it differs from the last
                -- announced (written by the outbox's announcing step). `at` is Unix ms.
                CREATE TABLE entitlementChange (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, "user" TEXT NOT NULL, at INTEGER NOT NULL,
                    tier TEXT, entitled BOOLEAN NOT NULL, source TEXT, validUntil INTEGER, why TEXT NOT NULL, ref TEXT,
                    PRIMARY KEY (account, livemode, "user", at)
                ) WITHOUT ROWID;

                -- Consumes refused at a hard limit, one row per user, meter and UTC day however many
                -- (count), and counters' first use in a new period. Times are Unix seconds.
                CREATE TABLE usageMark (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, "user" TEXT NOT NULL, kind TEXT NOT NULL, meter TEXT NOT NULL,
                    day INTEGER NOT NULL, at INTEGER NOT NULL, count INTEGER NOT NULL, lastAt INTEGER NOT NULL,
                    used INTEGER, limitCount INTEGER, periodStart INTEGER, periodEnd INTEGER,
                    PRIMARY KEY (account, livemode, "user", kind, meter, day)
                ) WITHOUT ROWID;
                CREATE INDEX usageMark_user ON usageMark(account, livemode, "user", at);

                -- A user's events by object and time; it serves every lookup by object alone too.
                CREATE INDEX inboxEvent_objectCreated ON inboxEvent(objectID, created);
                DROP INDEX inboxEvent_object;
                -- A user's deliveries by time, whatever their status.
                CREATE INDEX outboxEvent_userCreated ON outboxEvent(account, livemode, user, createdAt);
                """)
        }
    }

    /// A user's Checkout sessions on the timeline (`v13-timeline-checkout` on PostgreSQL): the
    /// sessions of their customers and those opened for them (`client_reference_id`), read by index.
    static func registerTimelineCheckoutMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v15-timeline-checkout") { db in
            try db.execute(sql: """
                CREATE INDEX checkoutSession_customer ON checkoutSession(account, livemode, customer);
                CREATE INDEX checkoutSession_clientReference ON checkoutSession(account, livemode, clientReferenceID);
                """)
        }
    }

    /// Reconcile's repairs and payment methods' customers on the timeline (`v14-timeline-repairs`
    /// on PostgreSQL): the repair log, written with each repair, and the customer each payment
    /// method was seen attached to, kept after it is detached; both read by customer and time.
    static func registerTimelineRepairMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v16-timeline-repairs") { db in
            try db.execute(sql: """
                -- One row per object a reconcile run wrote over the ledger (or into it, or tombstoned):
                -- the run (NULL for subscription repairs logged before this table), when Stripe
                -- answered (Unix seconds), the customer it concerns when known, and what changed.
                CREATE TABLE reconcileRepair (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, run INTEGER, at INTEGER NOT NULL,
                    kind TEXT NOT NULL, objectID TEXT NOT NULL, customer TEXT, drift TEXT NOT NULL, summary TEXT NOT NULL
                );
                CREATE INDEX reconcileRepair_customer ON reconcileRepair(account, livemode, customer, at);

                -- The customer a payment method was first seen attached to (events and reconcile);
                -- never removed on detach, when Stripe's object stops naming it.
                CREATE TABLE paymentMethodCustomer (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, paymentMethod TEXT NOT NULL, customer TEXT NOT NULL,
                    firstSeen INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, paymentMethod)
                ) WITHOUT ROWID;
                CREATE INDEX paymentMethodCustomer_customer ON paymentMethodCustomer(account, livemode, customer);
                """)
            try db.execute(sql: ReconcileRepairRows.backfillLinksSQL)
            try db.execute(sql: ReconcileRepairRows.backfillSubscriptionRepairsSQL)
        }
    }
}
