import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import PostgresNIO
import Testing

/// The ledgers under Fixtures/ledgers/, written by an older billingd (see the README there), and
/// what every later billingd must find in them after opening and migrating them.
enum LedgerFixtures {
    /// The commit of main whose code wrote the fixtures.
    static let madeBy = "7da94e6"
    static let directory = EventFactory.root.appendingPathComponent("Fixtures/ledgers")
    static let sqlite = directory.appendingPathComponent("ledger-\(madeBy).sqlite3")
    static let postgresDump = directory.appendingPathComponent("ledger-\(madeBy).postgres.sql.gz")

    static let endpoint = "https://app.example.com/billing-hooks"
    /// The instant the fixtures' clock stood at, in milliseconds.
    static let now: Int64 = 1_790_000_000_000
    static let radars = UsageMeter(id: "radars", kind: .counter, limit: "radars", enforcement: .hard, stripeMeter: "radar_created")
    static let january = UsagePeriod(start: 1_767_225_600, end: 1_769_904_000)

    /// Fills an empty store with the fixtures' ledger through the store protocols only, so that
    /// both backends get the same rows: two Stripe customers' lifecycles, the App Store
    /// lifecycles and one purchase tied to a user by its appAccountToken, usage, a reconcile run,
    /// and the outbox's announcements of all of it (one of them delivered).
    static func fill(_ plain: any LedgerStore) async throws {
        let policy = OutboxPolicy(
            catalog: .freeOnly, endpoints: [endpoint], render: { billing, _ in Array(#"{"user":"\#(billing.user)"}"#.utf8) },
            now: { now / 1000 })
        let store = plain.announcing(policy)
        let token = try await store.appStore.accountToken(for: "user_7")
        let tied = AppStoreFactory.notification(
            "SUBSCRIBED", "INITIAL_BUY", original: "700", transaction: "700", purchase: AppStoreFactory.t0,
            expires: AppStoreFactory.t0 + 30 * AppStoreFactory.day, signed: AppStoreFactory.t0, token: token)
        let deliveries = try Lifecycle.events(customers: 2).map(EventFactory.delivery)
            + (AppStoreFactory.lifecycles + [tied]).map(AppStoreFactory.delivery)
        _ = try await store.inbox.insert(deliveries)
        let pass = try await store.applier(.init(firstRetryDelay: .zero)).drain()
        guard pass.failed + pass.dead == 0 else { throw FixtureNotWritten(reason: "\(pass)") }

        _ = try await store.usage.apply(
            (1...3).map { n in
                .record(UsageRecordInput(
                    scope: .test, user: "user_0", meter: radars, quantity: Int64(n), timestamp: january.start + Int64(n) * 60,
                    idempotencyKey: "fixture-\(n)", period: january, limit: .count(10)))
            }, now: january.start * 1000 + 600_000)

        try await store.reconcileRuns.acquire("reconcile", holder: "fixture", ttl: 60, now: now / 1000)
        let run = try await store.reconcileRuns.start(mode: "full", holder: "fixture", dryRun: false, now: now / 1000)
        try await store.reconcileRuns.finish(
            run, outcome: .completed, totals: ReconcileTotals(drift: 1, repaired: 1, recoveredEvents: 0, objects: 3), error: nil,
            report: Data(#"{"fixture":true}"#.utf8), now: now / 1000 + 5)
        try await store.reconcileRuns.release("reconcile", holder: "fixture")
        try await store.setMetaValue("fixture_made_by", madeBy)

        // The outbox queues at the wall clock's time, so it is asked with that clock.
        let wall = Int64(Date().timeIntervalSince1970 * 1000) + 60_000
        if let first = try await store.outbox.due(now: wall, limit: 1).first {
            try await store.outbox.record([OutboxAttempt(seq: first.seq, outcome: .delivered, at: wall)])
        }
    }

    struct FixtureNotWritten: Error {
        let reason: String
    }

    /// Runs `body` on the fixture ledger of `backend` as today's code opens it: on SQLite a copy of
    /// the file, on PostgreSQL a fresh database the dump was loaded into; migrated by opening.
    static func withFixtureLedger(_ backend: StoreBackend, _ body: (LedgerUnderTest) async throws -> Void) async throws {
        let configuration = ApplierConfiguration(firstRetryDelay: .zero)
        switch backend {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-fixture-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("ledger.sqlite3").path
            try FileManager.default.copyItem(atPath: sqlite.path, toPath: path)
            let database = try SQLiteDatabase.open(path: path)
            defer { try? database.close() }
            try await body(LedgerUnderTest(sqlite: database, configuration: configuration))
        case .postgres:
            let dump = try postgresStatements()
            try await PostgresTestDatabase.withFreshDatabase { database in
                try await PostgresTestDatabase.withConnection(database) { connection in
                    for statement in dump {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: PostgresTestDatabase.logger)
                    }
                }
                let store = try await PostgresLedgerStore.open(database, maximumConnections: 4, logger: PostgresTestDatabase.logger)
                do {
                    try await body(LedgerUnderTest(postgres: store, configuration: configuration))
                } catch {
                    await store.close()
                    throw error
                }
                await store.close()
            }
        }
    }

    /// The dump's statements one by one (postgres-nio runs one per query), without comments and
    /// psql's own commands (`\restrict`). pg_dump ends each statement with ";" at the end of a line.
    static func postgresStatements() throws -> [String] {
        let gunzip = Process()
        gunzip.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        gunzip.arguments = ["gzip", "-dc", postgresDump.path]
        let output = Pipe()
        gunzip.standardOutput = output
        try gunzip.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        gunzip.waitUntilExit()
        guard gunzip.terminationStatus == 0 else { throw FixtureNotWritten(reason: "gzip -dc \(postgresDump.path) failed") }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("\\") && !$0.hasPrefix("--") }
        var statements: [String] = []
        var current = ""
        for line in lines {
            current += line + "\n"
            if line.hasSuffix(";") {
                statements.append(current)
                current = ""
            }
        }
        return statements.filter { !$0.allSatisfy(\.isWhitespace) }
    }
}

/// Writes the fixtures; run only by scripts/make-ledger-fixtures, which names the directory and the
/// PostgreSQL database to fill, then dumps that database.
@Suite("Writing the ledger fixtures")
struct LedgerFixtureWriter {
    static let directory = ProcessInfo.processInfo.environment["BILLINGD_WRITE_LEDGER_FIXTURES"]
    static let database = ProcessInfo.processInfo.environment["BILLINGD_LEDGER_FIXTURE_DATABASE"]

    @Test("scripts/make-ledger-fixtures writes a SQLite ledger and fills a PostgreSQL database with the same rows",
        .enabled(if: directory != nil && database != nil, "only scripts/make-ledger-fixtures writes the fixtures"))
    func write() async throws {
        let directory = try #require(Self.directory), name = try #require(Self.database)
        let path = URL(fileURLWithPath: directory).appendingPathComponent("ledger-\(LedgerFixtures.madeBy).sqlite3").path
        let sqlite = try SQLiteDatabase.open(path: path)
        try await LedgerFixtures.fill(SQLiteLedgerStore(database: sqlite))
        try sqlite.close()

        var configuration = try PostgresTestDatabase.server()
        configuration.database = name
        let postgres = try await PostgresLedgerStore.open(configuration, maximumConnections: 4, logger: PostgresTestDatabase.logger)
        do {
            try await LedgerFixtures.fill(postgres)
        } catch {
            await postgres.close()
            throw error
        }
        await postgres.close()
    }
}
