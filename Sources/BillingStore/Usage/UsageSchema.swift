import GRDB

extension LedgerMigrations {
    /// Usage metering: every usage record (kept for idempotency, the Stripe report and
    /// reconcile), the running total of each counter's current period, and gauges.
    static func registerUsageMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v5-usage") { db in
            try db.execute(sql: """
                -- One row per accepted usage record. `seq` is billingd's id of the record (the
                -- Stripe meter event's identifier). `reportState` is NULL for meters that report
                -- nowhere, else pending, reported, failed or skipped (no Stripe customer).
                CREATE TABLE usageRecord (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, user TEXT NOT NULL, meter TEXT NOT NULL,
                    quantity INTEGER NOT NULL,
                    timestamp INTEGER NOT NULL,
                    idempotencyKey TEXT NOT NULL,
                    source TEXT NOT NULL,
                    recordedAt INTEGER NOT NULL,
                    stripeMeter TEXT,
                    reportState TEXT,
                    reportAttempts INTEGER NOT NULL DEFAULT 0,
                    reportNextAt INTEGER,
                    reportError TEXT,
                    reportedAt INTEGER,
                    stripeCustomer TEXT,
                    UNIQUE (account, livemode, user, meter, idempotencyKey)
                );
                CREATE INDEX usageRecord_time ON usageRecord(account, livemode, user, meter, timestamp, quantity);
                CREATE INDEX usageRecord_report ON usageRecord(reportState, seq) WHERE reportState IN ('pending', 'failed');

                -- The total of each counter over the period it was last used in, so that a
                -- consume reads one row instead of adding up the period's records. A request in
                -- another period recomputes it from usageRecord.
                CREATE TABLE usageTotal (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, user TEXT NOT NULL, meter TEXT NOT NULL,
                    periodStart INTEGER NOT NULL, periodEnd INTEGER NOT NULL, used INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user, meter)
                ) WITHOUT ROWID;

                CREATE TABLE usageGauge (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, user TEXT NOT NULL, meter TEXT NOT NULL,
                    value INTEGER NOT NULL, updatedAt INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user, meter)
                ) WITHOUT ROWID;
                """)
        }
    }
}
