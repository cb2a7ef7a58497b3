import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import PostgresNIO
import Testing

@Suite("PostgreSQL store")
struct PostgresStoreTests {
    let logger = PostgresTestDatabase.logger

    @Test("Two processes starting on a fresh database at once: one migrates, the other waits on the lock and finds it done")
    func concurrentMigrations() async throws {
        try await PostgresTestDatabase.withFreshDatabase { configuration in try await concurrentMigrations(configuration) }
    }

    private func concurrentMigrations(_ configuration: PostgresConfiguration) async throws {
        // The test holds the migrations' lock so that both migrators are surely waiting on it
        // together before either may start.
        let stores = try await PostgresTestDatabase.withConnection(configuration) { holder in
            try await holder.query("BEGIN", logger: logger)
            try await holder.query("SELECT pg_advisory_xact_lock(\(PostgresMigrations.lockKey))", logger: logger)
            return try await withThrowingTaskGroup(of: PostgresLedgerStore.self) { group in
                for _ in 0..<2 {
                    group.addTask { try await PostgresLedgerStore.open(configuration, maximumConnections: 2, logger: logger) }
                }
                try await waitUntil(waitingForLock: 2, connection: holder)
                try await holder.query("COMMIT", logger: logger)
                var stores: [PostgresLedgerStore] = []
                for try await store in group { stores.append(store) }
                return stores
            }
        }

        let applied = stores.map { $0.appliedMigrations }.sorted { $0.count < $1.count }
        #expect(applied[0] == [], "the second found the schema current")
        #expect(applied[1] == ["v1-ledger", "v2-applier-claims", "v3-outbox", "v4-reconcile-seen", "v5-outbox-review", "v6-outbox-due"])
        let versions = try await PostgresTestDatabase.withConnection(configuration) { connection in
            var versions: [String] = []
            for try await version in try await connection.query("SELECT version FROM schemaMigration", logger: logger).decode(String.self) {
                versions.append(version)
            }
            return versions
        }
        #expect(versions.sorted() == ["v1-ledger", "v2-applier-claims", "v3-outbox", "v4-reconcile-seen", "v5-outbox-review", "v6-outbox-due"])
        // Both work on the one schema.
        #expect(try await stores[0].inbox.insert([delivery("evt_1")]) != [InboxInsertOutcome.duplicate])
        #expect(try await stores[1].inbox.insert([delivery("evt_1")]) == [InboxInsertOutcome.duplicate])

        let reopened = try await PostgresLedgerStore.open(configuration, maximumConnections: 1, logger: logger)
        #expect(reopened.appliedMigrations == [], "a current database is left as it is")
        await reopened.close()
        for store in stores { await store.close() }
    }

    /// Waits until `count` sessions wait for an advisory lock on the database.
    private func waitUntil(waitingForLock count: Int, connection: PostgresConnection) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let rows = try await connection.query(
                """
                SELECT count(*) FROM pg_locks
                WHERE locktype = 'advisory' AND NOT granted
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """, logger: logger)
            for try await waiting in rows.decode(Int.self) where waiting >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the migrators never waited on the lock together")
    }

    @Test("The schema has every table, column, key and index the SQLite migrations create, in PostgreSQL's types")
    func schemaMatchesSQLite() async throws {
        let sqlite = try SQLiteDatabase.inMemory()
        var expected = try await sqlite.writer.read { db in try Self.sqliteSchema(db) }
        #expect(expected.tables.count == 30 && expected.indexes.count == 21, "the comparison covers the whole SQLite schema")
        // PostgreSQL's only additions, for replicas: the column of the applier's claims, and the
        // table of ids a reconcile run listed (a temporary table on SQLite).
        expected.tables["inboxevent"]?.append("claimedby text")
        expected.tables["reconcileseen"] = ["listing text not null", "kind text not null", "id text not null", "seenat bigint not null"]
        expected.primaryKeys["reconcileseen"] = ["listing", "kind", "id"]
        expected.indexes["reconcileseen_age"] = "reconcileseen(seenat)"
        try await PostgresTestDatabase.withStore { store in
            let actual = try await Self.postgresSchema(store.client)
            #expect(Set(actual.tables.keys) == Set(expected.tables.keys))
            for (table, columns) in expected.tables.sorted(by: { $0.key < $1.key }) {
                #expect(actual.tables[table] == columns, "table \(table)")
            }
            #expect(actual.primaryKeys == expected.primaryKeys)
            #expect(actual.indexes == expected.indexes)
        }
    }

    struct Schema {
        /// Table → its columns in order, as "name type" with " not null" where it applies.
        var tables: [String: [String]] = [:]
        /// Table → its primary key's columns in order.
        var primaryKeys: [String: [String]] = [:]
        /// Named indexes (not those behind a primary key or a unique constraint) → "table(columns)".
        var indexes: [String: String] = [:]
    }

    /// SQLite's schema, lower-cased as PostgreSQL folds names, its types as the PostgreSQL ones.
    static func sqliteSchema(_ db: GRDB.Database) throws -> Schema {
        let types = ["INTEGER": "bigint", "BOOLEAN": "boolean", "TEXT": "text", "BLOB": "bytea"]
        var schema = Schema()
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations'")
        for table in tables {
            var columns: [String] = []
            var key: [(Int, String)] = []
            for column in try Row.fetchAll(db, sql: "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)", arguments: [table]) {
                let name = (column["name"] as String).lowercased()
                let primary: Int = column["pk"]
                let notNull = (column["notnull"] as Bool) || primary > 0
                columns.append("\(name) \(types[column["type"] as String] ?? "?")" + (notNull ? " not null" : ""))
                if primary > 0 { key.append((primary, name)) }
            }
            schema.tables[table.lowercased()] = columns
            schema.primaryKeys[table.lowercased()] = key.sorted { $0.0 < $1.0 }.map(\.1)
        }
        for index in try Row.fetchAll(
            db, sql: "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex%'")
        {
            let name: String = index["name"]
            let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_info(?) ORDER BY seqno", arguments: [name])
            schema.indexes[name.lowercased()] = "\((index["tbl_name"] as String).lowercased())(\(columns.map { $0.lowercased() }.joined(separator: ", ")))"
        }
        return schema
    }

    /// The PostgreSQL schema of the store's database, without the migrations' own table.
    static func postgresSchema(_ client: PostgresClient) async throws -> Schema {
        var schema = Schema()
        let columns = try await client.query(
            """
            SELECT table_name::text, column_name::text, data_type::text, is_nullable::text FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name <> 'schemamigration'
            ORDER BY table_name, ordinal_position
            """)
        for try await (table, column, type, nullable) in columns.decode((String, String, String, String).self) {
            schema.tables[table, default: []].append("\(column) \(type)" + (nullable == "NO" ? " not null" : ""))
        }
        let keys = try await client.query(
            """
            SELECT c.relname::text, a.attname::text
            FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
            WHERE i.indisprimary AND c.relnamespace = current_schema()::regnamespace AND c.relname <> 'schemamigration'
            ORDER BY c.relname, k.n
            """)
        for try await (table, column) in keys.decode((String, String).self) {
            schema.primaryKeys[table, default: []].append(column)
        }
        let indexes = try await client.query(
            """
            SELECT ic.relname::text, tc.relname::text,
                (SELECT string_agg(a.attname, ', ' ORDER BY k.n) FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum)
            FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class tc ON tc.oid = i.indrelid
            WHERE tc.relnamespace = current_schema()::regnamespace AND NOT i.indisprimary
                AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid)
            """)
        for try await (name, table, columns) in indexes.decode((String, String, String).self) {
            schema.indexes[name] = "\(table)(\(columns))"
        }
        return schema
    }

    @Test("A database with synchronous_commit off is refused: an acknowledged delivery could be lost")
    func refusesAsynchronousCommit() async throws {
        try await PostgresTestDatabase.withFreshDatabase { configuration in
            try await PostgresTestDatabase.withConnection(configuration) { connection in
                try await connection.query(
                    PostgresQuery(unsafeSQL: "ALTER DATABASE \(configuration.database) SET synchronous_commit = off"), logger: logger)
            }
            await #expect {
                try await PostgresLedgerStore.open(configuration, maximumConnections: 1, logger: logger)
            } throws: { error in
                guard case PostgresStoreError.synchronousCommitOff(let database) = error else { return false }
                return database == configuration.database && String(describing: error).contains("synchronous_commit")
            }
        }
    }

    @Test("A database that does not exist is named in the error, with the server's reason and without the password")
    func missingDatabase() async throws {
        var configuration = try PostgresTestDatabase.server()
        configuration.database = "billingd_missing_\(UInt32.random(in: 0...UInt32.max))"
        configuration.password = PostgresPassword("hunter2")
        configuration.passwordSource = .variable
        await #expect {
            try await PostgresLedgerStore.open(configuration, maximumConnections: 1, logger: logger)
        } throws: { error in
            let message = String(describing: error)
            guard case PostgresStoreError.cannotConnect = error else { return false }
            return message.contains(configuration.database) && message.contains("does not exist") && !message.contains("hunter2")
        }
    }

    @Test("A socket where no server listens gives an error that says so")
    func nothingListening() async throws {
        _ = try PostgresTestDatabase.server()
        let configuration = try PostgresConfiguration(url: "postgres://billingd@/ledger?host=/nonexistent-\(UUID().uuidString)")
        await #expect {
            try await PostgresLedgerStore.open(configuration, maximumConnections: 1, logger: logger)
        } throws: { error in
            guard case PostgresStoreError.cannotConnect(let target, _) = error else { return false }
            return target.contains("/nonexistent-")
        }
    }

    @Test("Settings in meta round-trip, and the readiness check commits a write")
    func meta() async throws {
        try await PostgresTestDatabase.withStore { store in
            #expect(try await store.metaValue("local_webhook_secret") == nil)
            try await store.setMetaValue("local_webhook_secret", "whsec_1")
            try await store.setMetaValue("local_webhook_secret", "whsec_2")
            #expect(try await store.metaValue("local_webhook_secret") == "whsec_2")
            try await store.checkWritable()
            #expect(try await store.metaValue("ready_checked_at") != nil)
        }
    }

    @Test("A ledger statement is prepared once per connection, and a NULL bound first (where a column gives its type) does not change how later values bind")
    func preparedStatements() async throws {
        try await PostgresTestDatabase.withStore { store in
            try await store.client.withConnection { connection in
                try await connection.query("CREATE TABLE preparedNulls (n bigint, t text, b boolean)", logger: logger)
                let sql = "INSERT INTO preparedNulls (n, t, b) VALUES (?, ?, ?) RETURNING n, t, b"
                let bound: [[LedgerValue]] = [
                    [.null, .null, .null], [.integer(5), .text("five"), .boolean(true)], [.null, .text("none"), .null],
                    [.integer(-7), .null, .boolean(false)],
                ]
                var returned: [[LedgerValue]] = []
                for values in bound {
                    for try await row in try await connection.run(sql, values, logger: logger) {
                        returned.append(try row.map(LedgerValue.init))
                    }
                }
                #expect(returned == bound)
                let prepared = try await connection.query(
                    "SELECT count(*) FROM pg_prepared_statements WHERE statement = 'INSERT INTO preparedNulls (n, t, b) VALUES ($1, $2, $3) RETURNING n, t, b'",
                    logger: logger)
                for try await count in prepared.decode(Int.self) {
                    #expect(count == 1, "one statement for every run, prepared once")
                }
            }
        }
    }

    @Test("A statement whose preparation failed is prepared again on its next use, on the same connection")
    func failedPreparationIsRetried() async throws {
        try await PostgresTestDatabase.withStore { store in
            try await store.client.withConnection { connection in
                // As when a statement meets a table that a migration on another replica has not
                // yet created: postgres-nio keeps a failed preparation's error for its name.
                let sql = "SELECT count(*) FROM preparedLater WHERE x = ?"
                await #expect(throws: PSQLError.self) {
                    try await connection.run(sql, [.integer(1)], logger: logger)
                }
                try await connection.query("CREATE TABLE preparedLater (x bigint)", logger: logger)
                try await connection.query("INSERT INTO preparedLater VALUES (1), (1), (2)", logger: logger)
                var counts: [Int64] = []
                for _ in 0..<2 {
                    for try await row in try await connection.run(sql, [.integer(1)], logger: logger) {
                        counts.append(try row.decode(Int64.self))
                    }
                }
                #expect(counts == [2, 2])
            }
        }
    }

    @Test("A delivery that reaches two replicas at once is stored once; overlapping batches in opposite orders do not deadlock")
    func twoReplicas() async throws {
        try await PostgresTestDatabase.withFreshDatabase { configuration in try await twoReplicas(configuration) }
    }

    private func twoReplicas(_ configuration: PostgresConfiguration) async throws {
        let first = try await PostgresLedgerStore.open(configuration, maximumConnections: 2, logger: logger)
        let second = try await PostgresLedgerStore.open(configuration, maximumConnections: 2, logger: logger)
        let batch = (0..<40).map { delivery("evt_\($0)") }
        for round in 0..<5 {
            let events = batch.map { delivery("\($0.envelope.id)_\(round)") }
            async let a = first.inbox.insert(events)
            async let b = second.inbox.insert(events.reversed())
            let (outcomesA, outcomesB) = try await (a, b)
            // Each event stored by exactly one replica, and both answered for every one.
            for (index, outcome) in outcomesA.enumerated() {
                let other = outcomesB[events.count - 1 - index]
                #expect((outcome == .duplicate) != (other == .duplicate), "event \(index) of round \(round)")
            }
        }
        #expect(try await first.inbox.count() == 200)
        await first.close()
        await second.close()
    }

    func delivery(_ id: String) -> InboxDelivery {
        InboxDelivery(
            envelope: EventEnvelope(
                id: id, type: "invoice.paid", apiVersion: "2026-10-28.clover", created: 100, livemode: false, account: nil,
                objectID: "in_\(id)", objectType: "invoice"),
            body: Array("{\"id\":\"\(id)\"}".utf8), receivedAt: 1, source: .webhook, secretIndex: 0)
    }
}
