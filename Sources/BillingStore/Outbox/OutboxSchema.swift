import GRDB

extension LedgerMigrations {
    /// The outbox: events for the app's backend, one row per event and endpoint, and the last
    /// view announced per user. Not ledger tables: `billingd replay` keeps both.
    static func registerOutboxMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v6-outbox") { db in
            try db.execute(sql: """
                -- `id` is the webhook-id (one per event, shared by its endpoints' rows); `userKey`
                -- orders a user's events per endpoint (mode, account, user).
                CREATE TABLE outboxEvent (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL,
                    endpoint TEXT NOT NULL,
                    type TEXT NOT NULL,
                    account TEXT NOT NULL,
                    livemode BOOLEAN NOT NULL,
                    user TEXT NOT NULL,
                    userKey TEXT NOT NULL,
                    createdAt INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    status TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt INTEGER,
                    lastError TEXT,
                    deliveredAt INTEGER,
                    UNIQUE (id, endpoint)
                );
                CREATE INDEX outboxEvent_work ON outboxEvent(nextAttemptAt, seq) WHERE status IN ('pending', 'failed');
                CREATE INDEX outboxEvent_user ON outboxEvent(endpoint, userKey, seq) WHERE status IN ('pending', 'failed');
                CREATE INDEX outboxEvent_status ON outboxEvent(status, seq);

                -- The last state of each user's view the outbox diffed against (JSON of
                -- UserAccessState).
                CREATE TABLE outboxUserState (
                    account TEXT NOT NULL,
                    livemode BOOLEAN NOT NULL,
                    user TEXT NOT NULL,
                    state TEXT NOT NULL,
                    updatedAt INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user)
                ) WITHOUT ROWID;

                -- The meters whose limit was announced reached, per period (0 for a gauge, cleared
                -- when it goes back under), so that usage.limit_reached goes out once.
                CREATE TABLE outboxUsageLimit (
                    account TEXT NOT NULL,
                    livemode BOOLEAN NOT NULL,
                    user TEXT NOT NULL,
                    meter TEXT NOT NULL,
                    periodStart INTEGER NOT NULL,
                    reachedAt INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user, meter, periodStart)
                ) WITHOUT ROWID;

                -- Endpoints that answered 410 Gone, until `billingd outbox enable`.
                CREATE TABLE outboxEndpoint (
                    url TEXT PRIMARY KEY NOT NULL,
                    disabledAt INTEGER NOT NULL,
                    reason TEXT NOT NULL
                );
                """)
        }
        migrator.registerMigration("v7-outbox-review") { db in
            try db.execute(sql: """
                -- When time alone may next change the user's view (Unix ms): the end of what grants
                -- access; NULL when only a ledger change can. Views announced before this column
                -- existed are looked at once, at the first review.
                ALTER TABLE outboxUserState ADD COLUMN reviewAt INTEGER;
                UPDATE outboxUserState SET reviewAt = 0 WHERE json_extract(state, '$.entitled');
                CREATE INDEX outboxUserState_review ON outboxUserState(reviewAt) WHERE reviewAt IS NOT NULL;
                """)
        }
        migrator.registerMigration("v8-outbox-due") { db in
            try db.execute(sql: """
                -- The sender's work, per endpoint in the order it is due: a pass reads only what it
                -- sends, whatever the backlog, and a disabled endpoint's backlog is never walked.
                CREATE INDEX outboxEvent_due ON outboxEvent(endpoint, nextAttemptAt, seq) WHERE status IN ('pending', 'failed');
                DROP INDEX outboxEvent_work;
                """)
        }
    }
}
