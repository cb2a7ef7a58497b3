import GRDB

extension LedgerMigrations {
    /// Reconcile's own state: one row per run, the lease that keeps two runs (a cron job and the
    /// scheduler in `serve`, or two replicas) from overlapping, and the `/v1/events` cursor.
    static func registerReconcileMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-reconcile") { db in
            try db.execute(sql: """
                CREATE TABLE reconcileRun (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    mode TEXT NOT NULL,            -- 'full' or 'events'
                    holder TEXT NOT NULL,          -- host:pid that ran it
                    startedAt INTEGER NOT NULL,    -- unix seconds
                    finishedAt INTEGER,
                    outcome TEXT NOT NULL,         -- running, completed, failed, interrupted
                    dryRun BOOLEAN NOT NULL,
                    drift INTEGER NOT NULL DEFAULT 0,
                    repaired INTEGER NOT NULL DEFAULT 0,
                    recoveredEvents INTEGER NOT NULL DEFAULT 0,
                    objects INTEGER NOT NULL DEFAULT 0,
                    error TEXT,
                    report BLOB                    -- the JSON report of `reconcile --json`
                );
                CREATE INDEX reconcileRun_finished ON reconcileRun(mode, outcome, finishedAt);

                CREATE TABLE lease (
                    name TEXT PRIMARY KEY NOT NULL,
                    holder TEXT NOT NULL,
                    acquiredAt INTEGER NOT NULL,
                    expiresAt INTEGER NOT NULL
                );

                -- How far `/v1/events` has been walked, per account ('' = platform) and mode.
                CREATE TABLE eventCursor (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL,
                    created INTEGER NOT NULL,       -- newest event.created seen by a completed walk
                    walkedAt INTEGER NOT NULL,      -- when that walk completed
                    PRIMARY KEY (account, livemode)
                ) WITHOUT ROWID;
                """)
        }
    }
}
