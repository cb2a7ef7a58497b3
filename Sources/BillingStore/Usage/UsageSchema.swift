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

        migrator.registerMigration("v6-usage-report") { db in
            try db.execute(sql: """
                -- The report to Stripe Billing Meters. Its times are Unix seconds, like `timestamp`
                -- and Stripe's: reportNextAt (when the record is due; set for every pending or
                -- retrying record, empty once reported or given up), reportedAt, and
                -- reportInFlightSince: the earliest attempt whose answer is unknown (a timeout, a
                -- 5xx, a crash), so that a resend is never made once Stripe's 24-hour identifier
                -- window may have passed. A record's meter event identifier is
                -- billingd-<namespace>-<seq>-<fingerprint> (MeterEventIdentifier; the namespace is in
                -- meta), not the bare seq: a restored backup hands seqs out again.
                ALTER TABLE usageRecord ADD COLUMN reportInFlightSince INTEGER;
                UPDATE usageRecord SET reportNextAt = recordedAt / 1000 WHERE reportState = 'pending' AND reportNextAt IS NULL;

                -- What is due, in order: the reporter walks it by (reportNextAt, seq). Records given
                -- up (failed, no reportNextAt) stay out of the range scan.
                DROP INDEX usageRecord_report;
                CREATE INDEX usageRecord_due ON usageRecord(reportNextAt, seq) WHERE reportState IN ('pending', 'failed');

                -- Records tied to a Stripe customer by time: reconcile compares them with Stripe's
                -- event summaries.
                CREATE INDEX usageRecord_customer ON usageRecord(livemode, timestamp) WHERE stripeCustomer IS NOT NULL;
                """)
        }
    }
}
