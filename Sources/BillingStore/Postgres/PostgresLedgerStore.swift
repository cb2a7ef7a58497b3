import Foundation
import Logging
import PostgresNIO
import Synchronization

/// The ledger on PostgreSQL, for several billingd replicas on one database: postgres-nio's pool
/// (`PostgresClient`), bound parameters only, its own migrations. Every role of ``LedgerStore``
/// has its PostgreSQL twin here or in PostgresLedgerStore+Ledger.swift, sharing the SQLite
/// side's row builders and rules, so that both backends hold the same ledger.
public final class PostgresLedgerStore: Sendable {
    /// The pool behind every role. Package, not public: nothing above BillingStore spells SQL;
    /// the package's tests use it for raw-SQL assertions.
    package let client: PostgresClient
    /// The migrations this open applied; empty when the database was current (or another
    /// replica migrated it first).
    public let appliedMigrations: [String]
    let logger: Logger
    /// The database's name, for messages.
    let configurationDatabase: String
    /// How this handle's ledger transactions announce changes of users' views to the outbox;
    /// nil announces nothing (see ``announcing(_:)``).
    let outboxPolicy: OutboxPolicy?
    /// Runs the pool, shared by the handles ``announcing(_:)`` makes of one open store.
    private let pool: PoolRun
    /// Group commits this replica runs at once (see ``PostgresApplier/concurrentCommits``): half
    /// the pool, at most 8, leaving connections to the applier, the outbox, reconcile and reads.
    /// Measured on two cores: 226 durable events/s with one, 386 with four, 453 with eight.
    let concurrentCommits: Int

    private init(
        client: PostgresClient, pool: PoolRun, appliedMigrations: [String], database: String, outbox: OutboxPolicy?,
        concurrentCommits: Int, logger: Logger
    ) {
        self.client = client
        self.concurrentCommits = concurrentCommits
        self.configurationDatabase = database
        self.pool = pool
        self.appliedMigrations = appliedMigrations
        self.outboxPolicy = outbox
        self.logger = logger
    }

    /// The same store, its ledger transactions announcing under `policy` (nil: not at all).
    public func announcing(_ policy: OutboxPolicy?) -> any LedgerStore {
        PostgresLedgerStore(
            client: client, pool: pool, appliedMigrations: appliedMigrations, database: configurationDatabase, outbox: policy,
            concurrentCommits: concurrentCommits, logger: logger)
    }

    /// Connects once to check the database (reachable, `synchronous_commit` not off), migrates
    /// it under the advisory lock, and only then starts the pool.
    /// - Parameters:
    ///   - maximumConnections: the pool's size; every replica holds up to this many.
    ///   - concurrentCommits: the group commits run at once, at most half the pool. More than the
    ///     database's cores can serve only adds lock waits and smaller batches: on two cores,
    ///     one replica stored 809 events/s with 4 and 684 with 8, three replicas 746 with 2 each
    ///     and 518 with 4 each (docs/benchmarks.md, 2026-11-29).
    public static func open(
        _ configuration: PostgresConfiguration, maximumConnections: Int = 20, concurrentCommits: Int = 4,
        logger: Logger = Logger(label: "billingd.postgres")
    ) async throws -> PostgresLedgerStore {
        let target = configuration.redacted
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                configuration: configuration.connectionConfiguration(), id: 0, logger: logger)
        } catch {
            throw PostgresStoreError.cannotConnect(target: target, reason: PostgresStoreError.reason(error))
        }
        let applied: [String]
        do {
            let synchronousCommit = try await setting("synchronous_commit", connection: connection, logger: logger)
            guard synchronousCommit != "off" else {
                throw PostgresStoreError.synchronousCommitOff(database: configuration.database)
            }
            do {
                applied = try await PostgresMigrations.migrate(
                    connection, logger: logger, now: Int64(Date().timeIntervalSince1970 * 1000))
            } catch {
                throw PostgresStoreError.migrationFailed(target: target, reason: PostgresStoreError.reason(error))
            }
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
        let client = PostgresClient(
            configuration: try configuration.clientConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger)
        // The pool leases nothing until run() is under way (and warns when asked before): the
        // store is handed out once the task has reached it.
        let (started, signal) = AsyncStream<Void>.makeStream()
        let runTask = Task {
            signal.finish()
            await client.run()
        }
        for await _ in started {}
        return PostgresLedgerStore(
            client: client, pool: PoolRun(runTask), appliedMigrations: applied, database: configuration.database, outbox: nil,
            concurrentCommits: min(concurrentCommits, max(1, maximumConnections / 2)), logger: logger)
    }

    /// The inbox of verified deliveries.
    public var inbox: any EventInbox { PostgresInbox(client: client, logger: logger) }

    /// Reconcile's lease, run records and event cursors.
    public var reconcileRuns: any ReconcileRunStore { PostgresReconcileRuns(client: client, logger: logger) }
    /// Usage records, counters and gauges.
    public var usage: any UsageStore { PostgresUsage(client: client, logger: logger, outbox: outboxPolicy) }
    /// The queue of usage records reported to Stripe's meters.
    public var usageReports: any UsageReportStore { PostgresUsage(client: client, logger: logger) }
    /// Invoice exports, whole or streamed.
    public var invoiceExports: any InvoiceExportStore { PostgresInvoiceExporter(client: client, logger: logger) }

    /// A file copy of a PostgreSQL ledger is pg_dump's job, not billingd's: always throws
    /// ``PostgresStoreError/backupIsPgDump(database:)``.
    public func backup(to path: String, overwrite: Bool) async throws -> LedgerBackup {
        throw PostgresStoreError.backupIsPgDump(database: configurationDatabase)
    }

    /// Proves the database accepts writes (for `/readyz`): a committed write of the meta table.
    public func checkWritable() async throws {
        try await setMetaValue("ready_checked_at", String(Int64(Date().timeIntervalSince1970)))
    }

    /// Proves the database has room for a large delivery (``LedgerStore/checkSpace()``): writes
    /// ``spaceCheckBytes`` of text that does not compress (so TOAST stores it whole) and removes it
    /// in one committed transaction.
    public func checkSpace() async throws {
        try await client.transaction(logger: logger) { [logger] connection in
            try await connection.query(
                """
                INSERT INTO meta (key, value)
                SELECT 'space_checked', string_agg(md5(random()::text || n::text), '')
                FROM generate_series(1, \(spaceCheckBytes / 32)) AS n
                ON CONFLICT (key) DO UPDATE SET value = excluded.value
                """,
                logger: logger)
            try await connection.query("DELETE FROM meta WHERE key = 'space_checked'", logger: logger)
        }
    }

    /// How many bytes the database and each of its tables take (``LedgerStore/sizes()``): each
    /// table of billingd's schema with its indexes and TOAST (`pg_total_relation_size`), read from
    /// the files' sizes, not their pages.
    public func sizes() async throws -> StoreSizes {
        var tables: [String: Int64] = [:]
        let rows = try await client.query(
            """
            SELECT c.relname::text, pg_total_relation_size(c.oid)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
            """,
            logger: logger)
        for try await (name, bytes) in rows.decode((String, Int64).self) { tables[name.lowercased()] = bytes }
        let database = try await client.single("SELECT pg_database_size(current_database())", as: Int64.self, logger: logger) ?? 0
        return StoreSizes(tables: tables, database: database, free: 0)
    }

    /// A value from the `meta` key-value table; nil when unset.
    public func metaValue(_ key: String) async throws -> String? {
        let rows = try await client.query("SELECT value FROM meta WHERE key = \(key)", logger: logger)
        for try await value in rows.decode(String.self) { return value }
        return nil
    }

    /// Writes a value into the `meta` key-value table.
    public func setMetaValue(_ key: String, _ value: String) async throws {
        try await client.query(
            "INSERT INTO meta (key, value) VALUES (\(key), \(value)) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            logger: logger)
    }

    /// The server's `synchronous_commit` for billingd's sessions: a 2xx follows the commit's
    /// flush only when it is not `off` (the store refuses to open when it is).
    public func synchronousCommit() async throws -> String {
        try await client.withConnection { connection in
            try await Self.setting("synchronous_commit", connection: connection, logger: logger)
        }
    }

    /// Stops the pool and waits for its connections to close; a second close (of this handle
    /// or of another of the same open store) does nothing.
    public func close() async {
        await pool.stop()
    }

    private static func setting(_ name: String, connection: PostgresConnection, logger: Logger) async throws -> String {
        let rows = try await connection.query("SELECT current_setting(\(name))", logger: logger)
        for try await value in rows.decode(String.self) { return value }
        return ""
    }
}

/// Why the PostgreSQL ledger could not be opened; messages never hold the password.
public enum PostgresStoreError: Error, CustomStringConvertible {
    /// The server was not reached, or refused the login or the database.
    case cannotConnect(target: String, reason: String)
    /// A migration failed; its transaction was rolled back, so the schema is as it was.
    case migrationFailed(target: String, reason: String)
    /// `synchronous_commit` is off: a commit could be acknowledged before it is durable.
    case synchronousCommitOff(database: String)
    /// `backup` on PostgreSQL: the server's own tools make its backups.
    case backupIsPgDump(database: String)

    public var description: String {
        switch self {
        case .cannotConnect(let target, let reason):
            "Cannot connect to the ledger database \(target): \(reason). Check BILLINGD_DATABASE_URL and the password."
        case .migrationFailed(let target, let reason):
            "Migrating the ledger database \(target) failed and was rolled back: \(reason)."
        case .synchronousCommitOff(let database):
            """
            The database \(database) runs with synchronous_commit = off: a delivery could be acknowledged before it \
            is durable (invariant 1). Set it on for billingd's role or database (ALTER ROLE … SET synchronous_commit = on).
            """
        case .backupIsPgDump(let database):
            """
            billingd backup copies a SQLite ledger; a PostgreSQL ledger is backed up with PostgreSQL's own tools: \
            pg_dump --format=custom --file=billingd.dump \(database) (or your provider's snapshots, or pg_basebackup with WAL archiving).
            """
        }
    }

    /// Whether `error` is the server's SQLSTATE `53100` (`disk_full`, see ``StoreFull``): a data
    /// file, a TOAST table or a temporary file could not grow. (A WAL write the disk refuses may
    /// stop the server instead: billingd then sees the database down, `store_unavailable`.)
    public static func isDiskFull(_ error: any Error) -> Bool {
        if let transaction = error as? PostgresTransactionError {
            let inner: [(any Error)?] = [transaction.closureError, transaction.commitError, transaction.beginError]
            return inner.contains { $0.map(isDiskFull) ?? false }
        }
        guard let error = error as? PSQLError, error.code == .server else { return false }
        return error.serverInfo?[.sqlState] == diskFullState
    }

    /// PostgreSQL's SQLSTATE of a full disk (class 53, insufficient resources).
    public static let diskFullState = "53100"

    /// What went wrong, from postgres-nio's error: the server's message and SQLSTATE, or the
    /// connection's failure. PSQLError's own description hides all of it (the query's binds could
    /// hold secrets); this shows neither the query nor its binds.
    public static func reason(_ error: any Error) -> String {
        if let transaction = error as? PostgresTransactionError {
            if let inner = transaction.closureError ?? transaction.commitError ?? transaction.beginError {
                return reason(inner)
            }
        }
        guard let error = error as? PSQLError else { return String(describing: error) }
        if let info = error.serverInfo, let message = info[.message] {
            var text = message
            if let detail = info[.detail] { text += " (\(detail))" }
            if let hint = info[.hint] { text += "; \(hint)" }
            if let state = info[.sqlState] { text += " [SQLSTATE \(state)]" }
            return text
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }
}

/// The task running a store's pool (`client.run()`), which leases no connection without it.
/// Unstructured, because the pool outlives the call that opens it and commands open stores
/// outside any ServiceGroup: ``stop()`` cancels it and waits for it to end.
private final class PoolRun: Sendable {
    private let task: Task<Void, Never>
    private let stopped = Atomic<Bool>(false)

    init(_ task: Task<Void, Never>) { self.task = task }

    func stop() async {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        task.cancel()
        await task.value
    }
}
