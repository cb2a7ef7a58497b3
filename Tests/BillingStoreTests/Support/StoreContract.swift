import BillingCore
import BillingSamples
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import NIOCore
import PostgresNIO
import Testing

// The one way a test of store behaviour gets a store: written once with `arguments:
// StoreBackend.allCases`, it runs on SQLite and on PostgreSQL. PostgreSQL's side reaches the server
// named in BILLINGD_TEST_DATABASE_URL (see PostgresTestDatabase): without it the case is cancelled
// and says why, and with CI=true it fails — the PostgreSQL half is never skipped in CI.

/// The two implementations of the store protocols, for tests that must hold on both.
enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String {
        switch self {
        case .sqlite: "SQLite"
        case .postgres: "PostgreSQL"
        }
    }
}

// MARK: - A whole ledger

/// A ledger on a store of one backend, through the store protocols only (inbox, applier,
/// maintenance, users), for tests that must hold on both backends.
struct LedgerUnderTest: Sendable {
    let backend: StoreBackend
    let inbox: any EventInbox
    let applier: any EventApplier
    let maintenance: any LedgerMaintenanceStore
    let users: any UserLedgerStore
    /// One column of one ledger row by id, as text (booleans as 1 and 0 on both backends); nil
    /// when the row is missing or the value is NULL.
    let value: @Sendable (_ table: String, _ id: String, _ column: String) async throws -> String?
    /// The rows of a query the test spells in SQL both dialects read alike (no placeholders, names
    /// unquoted), each column as text: booleans 1 and 0, bytes as UTF-8, NULL absent.
    let rows: @Sendable (_ sql: String) async throws -> [LedgerRow]
    /// The whole store, for the roles beyond the ledger's core (reconcile, App Store, outbox).
    let store: any LedgerStore
    /// Runs one statement the test spells (both dialects read it alike).
    let execute: @Sendable (_ sql: String) async throws -> Void

    /// Stores the bodies as deliveries and applies everything due.
    @discardableResult
    func deliver(_ bodies: [[UInt8]]) async throws -> ApplyPass {
        try await deliver(bodies.map(EventFactory.delivery))
    }

    @discardableResult
    func deliver(_ deliveries: [InboxDelivery]) async throws -> ApplyPass {
        _ = try await inbox.insert(deliveries)
        return try await applier.drain()
    }

    /// Stores the bodies as the webhook route does when it answers 2xx: one group commit that
    /// stores each new delivery and applies it in the same transaction. Returns how many were
    /// left queued for the applier (none, for bodies that decode).
    @discardableResult
    func ingest(_ bodies: [[UInt8]]) async throws -> Int {
        let batch = try bodies.map { applier.prepare(try EventFactory.delivery($0)) }
        return try await applier.ingest(batch, now: 0).queued
    }

    func dump() async throws -> String { try await maintenance.dump() }

    /// The row of `table` with this `id`, every column.
    func row(_ table: String, id: String) async throws -> LedgerRow? {
        // Names and ids from the test itself, never input.
        try await rows("SELECT * FROM \(table) WHERE id = '\(id)'").first
    }

    /// How many rows `table` holds.
    func count(_ table: String) async throws -> Int {
        Int(try #require(try await rows("SELECT count(*) AS n FROM \(table)").first?.int("n")))
    }
}

/// One row of ``LedgerUnderTest/rows``: column names lower-cased (as PostgreSQL folds them), values
/// as text.
struct LedgerRow: Sendable, Equatable, CustomStringConvertible {
    var columns: Set<String> = []
    var values: [String: String] = [:]

    subscript(_ column: String) -> String? { values[column.lowercased()] }
    func int(_ column: String) -> Int64? { self[column].flatMap { Int64($0) } }
    /// SQLite's 0 and 1 and PostgreSQL's boolean alike; nil when NULL.
    func bool(_ column: String) -> Bool? { self[column].map { $0 == "1" } }
    func hasColumn(_ column: String) -> Bool { columns.contains(column.lowercased()) }

    var description: String { values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ") }

    init(_ row: Row) {
        var blobs: [String: [UInt8]] = [:]
        for (name, value) in row {
            columns.insert(name.lowercased())
            switch value.storage {
            case .null: break
            case .int64(let number): values[name.lowercased()] = String(number)
            case .double(let number): values[name.lowercased()] = String(number)
            case .string(let text): values[name.lowercased()] = text
            case .blob(let data): blobs[name.lowercased()] = Array(data)
            }
        }
        add(blobs)
    }

    init(_ row: PostgresRow) throws {
        var blobs: [String: [UInt8]] = [:]
        for cell in row {
            let name = cell.columnName.lowercased()
            columns.insert(name)
            guard cell.bytes != nil else { continue }
            switch cell.dataType {
            case .bool: values[name] = try cell.decode(Bool.self) ? "1" : "0"
            case .int2, .int4, .int8: values[name] = String(try cell.decode(Int64.self))
            case .bytea: blobs[name] = Array(try cell.decode(ByteBuffer.self).readableBytesView)
            default: values[name] = try cell.decode(String.self)
            }
        }
        add(blobs)
    }

    /// The row's blobs as text. A query that also selects `StoredJSON.eventBodyColumn` (named
    /// `eventBody`) reads a raw JSON its row keeps in its event's body as that JSON.
    private mutating func add(_ blobs: [String: [UInt8]]) {
        for (name, bytes) in blobs where name != "eventbody" {
            if name == "raw", bytes.isEmpty, let body = blobs["eventbody"], let json = try? Self.objectJSON(stored: bytes, eventBody: body) {
                values[name] = json
            } else {
                values[name] = Self.text(name, bytes)
            }
        }
    }

    /// Whether `column` of `table` is a Stripe object's raw JSON, which its row may keep in the
    /// body of the event that wrote it (StoredJSON).
    static func isObjectJSON(_ table: String, _ column: String) -> Bool {
        column == "raw" && !table.hasPrefix("appStore")
    }

    /// The stored raw JSON of the row of a Stripe object table with id `?`, then its event's body
    /// when the row keeps its JSON there.
    static func objectJSONSQL(_ table: String, placeholder: String = "?") -> String {
        "SELECT r.raw, \(StoredJSON.eventBodyColumn(of: "r")) FROM \(table) r WHERE r.id = \(placeholder)"
    }

    /// The JSON a Stripe object's row holds, as text.
    static func objectJSON(stored: [UInt8], eventBody: [UInt8]?) throws -> String {
        String(decoding: try StoredJSON.json(stored: stored, eventBody: eventBody), as: UTF8.self)
    }

    /// A blob as text: an object's raw JSON as the JSON it holds (the ledger stores it compressed,
    /// see StoredJSON), anything else (bodies) as its bytes.
    static func text(_ column: String, _ bytes: [UInt8]) -> String {
        let json = ["raw", "renewalraw"].contains(column.lowercased()) ? (try? StoredJSON.decode(bytes)) : nil
        return String(decoding: json ?? bytes, as: UTF8.self)
    }
}

extension LedgerUnderTest {
    /// The ledger of a SQLite store on `database`.
    init(sqlite database: SQLiteDatabase, configuration: ApplierConfiguration) {
        let store = SQLiteLedgerStore(database: database)
        self.init(
            backend: .sqlite, inbox: store.inbox, applier: store.applier(configuration), maintenance: store.maintenance,
            users: store.users,
            value: { table, id, column in
                try await database.writer.read { db in
                    // Names from the test itself, never input.
                    if LedgerRow.isObjectJSON(table, column) {
                        guard let row = try Row.fetchOne(db, sql: LedgerRow.objectJSONSQL(table), arguments: [id]), let stored = row[0] as Data? else {
                            return nil
                        }
                        return try LedgerRow.objectJSON(stored: Array(stored), eventBody: (row[1] as Data?).map { Array($0) })
                    }
                    guard let row = try Row.fetchOne(db, sql: "SELECT \(column) FROM \(table) WHERE id = ?", arguments: [id]) else {
                        return nil
                    }
                    return LedgerRow(row).values.values.first
                }
            },
            rows: { sql in try await database.writer.read { db in try Row.fetchAll(db, sql: sql).map(LedgerRow.init) } },
            store: store,
            execute: { sql in try await database.writer.write { db in try db.execute(sql: sql) } })
    }

    /// The ledger of a PostgreSQL store.
    init(postgres store: PostgresLedgerStore, configuration: ApplierConfiguration) {
        let values = PostgresLedgerValues(client: store.client)
        self.init(
            backend: .postgres, inbox: store.inbox, applier: store.applier(configuration), maintenance: store.maintenance,
            users: store.users, value: { try await values.value($0, $1, $2) },
            rows: { sql in
                var rows: [LedgerRow] = []
                for try await row in try await store.client.query(PostgresQuery(unsafeSQL: sql), logger: PostgresTestDatabase.logger) {
                    rows.append(try LedgerRow(row))
                }
                return rows
            },
            store: store,
            execute: { sql in try await store.client.query(PostgresQuery(unsafeSQL: sql), logger: PostgresTestDatabase.logger) })
    }
}

/// Runs `body` on a ledger of `backend` in a fresh store, closed (and dropped) afterwards.
func withLedger(
    _ backend: StoreBackend, configuration: ApplierConfiguration = .init(firstRetryDelay: .zero),
    _ body: (LedgerUnderTest) async throws -> Void
) async throws {
    switch backend {
    case .sqlite:
        let database = try SQLiteDatabase.inMemory()
        try await body(LedgerUnderTest(sqlite: database, configuration: configuration))
    case .postgres:
        try await PostgresTestDatabase.withStore { store in
            try await body(LedgerUnderTest(postgres: store, configuration: configuration))
        }
    }
}

/// Reads single ledger values from PostgreSQL for ``LedgerUnderTest/value``.
struct PostgresLedgerValues: Sendable {
    let client: PostgresClient

    func value(_ table: String, _ id: String, _ column: String) async throws -> String? {
        // Names from the test itself, never input.
        var binds = PostgresBindings()
        binds.append(id)
        if LedgerRow.isObjectJSON(table, column) {
            let rows = try await client.query(
                PostgresQuery(unsafeSQL: LedgerRow.objectJSONSQL(table, placeholder: "$1"), binds: binds), logger: PostgresTestDatabase.logger)
            for try await (stored, eventBody) in rows.decode((ByteBuffer?, ByteBuffer?).self) {
                guard let stored else { return nil }
                return try LedgerRow.objectJSON(stored: Array(stored.readableBytesView), eventBody: eventBody.map { Array($0.readableBytesView) })
            }
            return nil
        }
        let rows = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT (\(column))::text, \(column) FROM \(table) WHERE id = $1", binds: binds),
            logger: PostgresTestDatabase.logger)
        for try await row in rows {
            let cells = Array(row)
            // bytea (raw JSON, bodies) as its bytes in UTF-8, as SQLite's blob reads.
            if cells[1].dataType == .bytea, cells[1].bytes != nil {
                return LedgerRow.text(column, Array(try cells[1].decode(ByteBuffer.self).readableBytesView))
            }
            return switch try cells[0].decode(String?.self) {
            case "true": "1"
            case "false": "0"
            case let text: text
            }
        }
        return nil
    }
}

// MARK: - The inbox alone

/// An inbox on a fresh store of one backend.
struct InboxUnderTest {
    let inbox: any EventInbox
    /// Fails every pending event for good, as an applier with one try would; how many.
    let failEveryPending: @Sendable () async throws -> Int
}

/// Runs `body` on an inbox of `backend` in a fresh store (on SQLite, a file), closed afterwards.
func withInbox(_ backend: StoreBackend, _ body: (InboxUnderTest) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-store-\(UUID().uuidString).sqlite3").path
        let database = try SQLiteDatabase.open(path: path)
        defer {
            try? database.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        try await body(InboxUnderTest(
            inbox: SQLiteInbox(database: database),
            failEveryPending: { try await SQLiteApplier(database: database, configuration: .init(maximumAttempts: 1)).drain().dead }))
    case .postgres:
        try await PostgresTestDatabase.withStore { store in
            try await body(InboxUnderTest(
                inbox: store.inbox,
                failEveryPending: { try await store.applier(.init(maximumAttempts: 1)).drain().dead }))
        }
    }
}

// MARK: - Roles on several replicas

/// The roles whose stores exist on both backends, of one store (one replica).
struct RoleStores {
    let reconcileRuns: any ReconcileRunStore
    let usage: any UsageStore
    let usageReports: any UsageReportStore
    let invoiceExports: any InvoiceExportStore
}

extension RoleStores {
    init(_ store: any LedgerStore) {
        self.init(
            reconcileRuns: store.reconcileRuns, usage: store.usage, usageReports: store.usageReports,
            invoiceExports: store.invoiceExports)
    }
}

/// Runs `body` with `replicas` stores of `backend` on one fresh database — on SQLite, several
/// connections to one file; on PostgreSQL, several pools — closed and removed afterwards.
func withRoleStores(_ backend: StoreBackend, replicas: Int = 1, _ body: ([RoleStores]) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-roles-\(UUID().uuidString).sqlite3").path
        let databases = try (0..<replicas).map { _ in try SQLiteDatabase.open(path: path) }
        defer {
            for database in databases { try? database.close() }
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        try await body(databases.map { RoleStores(SQLiteLedgerStore(database: $0)) })
    case .postgres:
        try await PostgresTestDatabase.withFreshDatabase { configuration in
            var stores: [PostgresLedgerStore] = []
            do {
                for _ in 0..<replicas {
                    stores.append(try await PostgresLedgerStore.open(configuration, maximumConnections: 4, logger: PostgresTestDatabase.logger))
                }
                try await body(stores.map { RoleStores($0) })
            } catch {
                for store in stores { await store.close() }
                throw error
            }
            for store in stores { await store.close() }
        }
    }
}

// MARK: - Exports of a ledger written in SQL

/// Runs `body` with the invoice exports of `backend` over the ledger `source` holds: SQLite's own,
/// or a fresh PostgreSQL ledger that `billingd copy`'s code filled from it.
func withExports(_ backend: StoreBackend, of source: SQLiteDatabase, _ body: (any InvoiceExportStore) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        try await body(SQLiteLedgerStore(database: source).invoiceExports)
    case .postgres:
        try await PostgresTestDatabase.withStore { store in
            let report = try await PostgresLedgerCopy.copy(from: source, to: store)
            guard report.isVerified else { throw CopyNotVerified(report: report) }
            try await body(store.invoiceExports)
        }
    }
}

struct CopyNotVerified: Error {
    let report: PostgresLedgerCopy.Report
}

// MARK: - Orders

/// Deliveries in a seeded random order, with some delivered twice or three times.
func shuffledWithDuplicates(_ bodies: [[UInt8]], seed: UInt64) -> [[UInt8]] {
    var random = SplitMix64(seed: seed)
    var deliveries: [[UInt8]] = []
    for body in bodies {
        deliveries.append(body)
        if Int.random(in: 0..<10, using: &random) < 3 {
            for _ in 0..<Int.random(in: 1...2, using: &random) { deliveries.append(body) }
        }
    }
    deliveries.shuffle(using: &random)
    return deliveries
}
