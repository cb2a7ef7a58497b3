import GRDB

/// Every schema change of the ledger, registered in one place and applied in order at open.
enum SQLiteMigrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-inbox") { db in
            try db.execute(sql: """
                CREATE TABLE meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                );

                -- Every verified delivery, in commit order. `account` is '' for the platform
                -- account so that the unique key also holds for it (NULLs never collide).
                CREATE TABLE inboxEvent (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    eventID TEXT NOT NULL,
                    account TEXT NOT NULL,
                    livemode BOOLEAN NOT NULL,
                    type TEXT NOT NULL,
                    apiVersion TEXT,
                    created INTEGER NOT NULL,
                    objectID TEXT,
                    objectType TEXT,
                    receivedAt INTEGER NOT NULL,
                    source TEXT NOT NULL,
                    secretIndex INTEGER,
                    status TEXT NOT NULL DEFAULT 'pending',
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt INTEGER,
                    lastError TEXT,
                    processedAt INTEGER,
                    effect TEXT,
                    UNIQUE (eventID, account, livemode)
                );
                CREATE INDEX inboxEvent_work ON inboxEvent(status, seq) WHERE status IN ('pending', 'failed', 'dead');
                CREATE INDEX inboxEvent_object ON inboxEvent(objectID);

                -- The raw bodies, apart: the applier updates each event's status, and SQLite
                -- rewrites a whole row (overflow pages of a 5 KB body included) on update.
                CREATE TABLE inboxBody (
                    seq INTEGER PRIMARY KEY REFERENCES inboxEvent(seq) ON DELETE CASCADE,
                    body BLOB NOT NULL
                );
                CREATE INDEX inboxEvent_type ON inboxEvent(type);
                """)
        }
        registerLedgerMigrations(&migrator)
        registerReconcileMigrations(&migrator)
        registerServiceAPIMigrations(&migrator)
        registerAppStoreMigrations(&migrator)
        registerUsageMigrations(&migrator)
        registerOutboxMigrations(&migrator)
        registerMetricsMigrations(&migrator)
        registerGrantMigrations(&migrator)
        registerTimelineMigrations(&migrator)
        registerMetricsIndexMigrations(&migrator)
        registerConsumptionMigrations(&migrator)
        registerCustomerEmailMigrations(&migrator)
        registerTimelineCheckoutMigrations(&migrator)
        registerTimelineRepairMigrations(&migrator)
        registerMetricsSpanMigrations(&migrator)
        registerBodyEncodingMigrations(&migrator)
        return migrator
    }
}
