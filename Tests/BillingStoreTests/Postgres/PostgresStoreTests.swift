import BillingCore
@testable import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import PostgresNIO
import Synchronization
import Testing

@Suite("PostgreSQL store")
struct PostgresStoreTests {
    let logger = PostgresTestDatabase.logger

    @Test("The PostgreSQL store's sessions commit with synchronous_commit on")
    func postgresDurability() async throws {
        try await PostgresTestDatabase.withStore { store in
            let level = try await store.synchronousCommit()
            #expect(level == "on")
        }
    }

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
        #expect(applied[1] == ["v1-ledger", "v2-applier-claims", "v3-outbox", "v4-reconcile-seen", "v5-outbox-review", "v6-outbox-due", "v7-metrics", "v8-grants", "v9-timeline", "v10-metrics-index", "v11-consumption", "v12-customer-email", "v13-timeline-checkout", "v14-timeline-repairs", "v16-metrics-span-covering", "v17-inbox-body-encoding"])
        let versions = try await PostgresTestDatabase.withConnection(configuration) { connection in
            var versions: [String] = []
            for try await version in try await connection.query("SELECT version FROM schemaMigration", logger: logger).decode(String.self) {
                versions.append(version)
            }
            return versions
        }
        #expect(versions.sorted() == ["v1-ledger", "v2-applier-claims", "v3-outbox", "v4-reconcile-seen", "v5-outbox-review", "v6-outbox-due", "v7-metrics", "v8-grants", "v9-timeline", "v10-metrics-index", "v11-consumption", "v12-customer-email", "v13-timeline-checkout", "v14-timeline-repairs", "v16-metrics-span-covering", "v17-inbox-body-encoding"].sorted())
        // Both work on the one schema.
        #expect(try await stores[0].inbox.insert([delivery("evt_1")]) != [InboxInsertOutcome.duplicate])
        #expect(try await stores[1].inbox.insert([delivery("evt_1")]) == [InboxInsertOutcome.duplicate])

        let reopened = try await PostgresLedgerStore.open(configuration, maximumConnections: 1, logger: logger)
        #expect(reopened.appliedMigrations == [], "a current database is left as it is")
        await reopened.close()
        for store in stores { await store.close() }
    }

    /// Waits until `count` sessions wait for an advisory lock on the database.
    /// Thrown by a transaction's body once its connection closed.
    struct BodyFailed: Error {}

    @Test(
        "A transaction whose connection the server cuts ends with an error, never a wait forever: its ROLLBACK, or the body's next query, goes to a closed connection",
        arguments: [false, true])
    func transactionOnACutConnection(queriesAfterTheCut: Bool) async throws {
        try await PostgresTestDatabase.withFreshDatabase { configuration in
            try await PostgresTestDatabase.withConnection(configuration) { connection in
                // The body's session is ended by the server, as a restart or a dropped database
                // ends it, and the body goes on only once the connection has closed: it then
                // fails, so that the ROLLBACK goes to the closed connection, or it runs its next
                // query there. postgres-nio never answers either (its own transaction waits
                // forever).
                let outcome = Mutex<Result<Void, any Error>?>(nil)
                let logger = self.logger
                let transaction = Task {
                    do {
                        try await connection.transaction(logger: logger) { connection in
                            _ = try? await connection.query("SELECT pg_terminate_backend(pg_backend_pid())", logger: logger)
                            while !connection.isClosed { try await Task.sleep(for: .milliseconds(10)) }
                            if queriesAfterTheCut { try await connection.query("SELECT 1", logger: logger) }
                            throw BodyFailed()
                        }
                        outcome.withLock { $0 = .success(()) }
                    } catch {
                        outcome.withLock { $0 = .failure(error) }
                    }
                }
                let deadline = ContinuousClock.now + .seconds(30)
                while outcome.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                switch outcome.withLock({ $0 }) {
                case .failure(let error):
                    // The close is what the caller hears: it came before the body's own error,
                    // and the lost query never answers.
                    #expect(error is PostgresConnectionClosed, "the transaction ends as its connection's close: \(error)")
                case .success: Issue.record("a transaction on a cut connection committed")
                case nil:
                    transaction.cancel()
                    Issue.record("the transaction still waits 30 s after its connection closed")
                }
            }
        }
    }

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
