import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import NIOCore
import PostgresNIO
import Testing

/// A ledger on a fresh store of one backend, through the store protocols only (inbox, applier,
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

    func dump() async throws -> String { try await maintenance.dump() }
}

/// Runs `body` on a ledger of `backend` in a fresh store, closed (and dropped) afterwards.
func withLedger(
    _ backend: StoreBackend, configuration: ApplierConfiguration = .init(firstRetryDelay: .zero),
    _ body: (LedgerUnderTest) async throws -> Void
) async throws {
    switch backend {
    case .sqlite:
        let database = try SQLiteDatabase.inMemory()
        let store = SQLiteLedgerStore(database: database)
        try await body(LedgerUnderTest(
            backend: backend, inbox: store.inbox, applier: store.applier(configuration), maintenance: store.maintenance,
            users: store.users,
            value: { table, id, column in
                try await database.writer.read { db in
                    // Names from the test itself, never input.
                    guard let row = try Row.fetchOne(db, sql: "SELECT \(column) FROM \(table) WHERE id = ?", arguments: [id]) else {
                        return nil
                    }
                    return switch (row[0] as DatabaseValue).storage {
                    case .null: nil
                    case .int64(let number): String(number)
                    case .double(let number): String(number)
                    case .string(let text): text
                    case .blob(let data): String(decoding: data, as: UTF8.self)
                    }
                }
            },
            store: store,
            execute: { sql in try await database.writer.write { db in try db.execute(sql: sql) } }))
    case .postgres:
        try await PostgresTestDatabase.withStore { store in
            let values = PostgresLedgerValues(client: store.client)
            try await body(LedgerUnderTest(
                backend: backend, inbox: store.inbox, applier: store.applier(configuration), maintenance: store.maintenance,
                users: store.users, value: { try await values.value($0, $1, $2) }, store: store,
                execute: { sql in try await store.client.query(PostgresQuery(unsafeSQL: sql), logger: PostgresTestDatabase.logger) }))
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
        let rows = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT (\(column))::text, \(column) FROM \(table) WHERE id = $1", binds: binds),
            logger: PostgresTestDatabase.logger)
        for try await row in rows {
            let cells = Array(row)
            // bytea (raw JSON, bodies) as its bytes in UTF-8, as SQLite's blob reads.
            if cells[1].dataType == .bytea, cells[1].bytes != nil {
                return String(buffer: try cells[1].decode(ByteBuffer.self))
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
