import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import PostgresNIO
import Testing

/// Runs `body` on a ledger of `backend` in a fresh store (on SQLite, a file, as serve's), with
/// the means to fill it.
func withLedgerThatFills(_ backend: StoreBackend, _ body: (LedgerUnderTest, StoreRoom) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-full-\(UUID().uuidString).sqlite3").path
        let database = try SQLiteDatabase.open(path: path)
        defer {
            try? database.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        try await body(LedgerUnderTest(sqlite: database, configuration: .init(firstRetryDelay: .zero)), .sqlite(database))
    case .postgres:
        try await PostgresTestDatabase.withStore { store in
            let ledger = LedgerUnderTest(postgres: store, configuration: .init(firstRetryDelay: .zero))
            try await body(ledger, .postgres(store))
        }
    }
}

@Suite("A full store refuses writes whole and takes them once there is room")
struct StoreFullTests {
    /// A subscription event whose body and ledger rows need new pages (overflow pages on SQLite)
    /// wherever they are stored: 16 KB of metadata in the body (the ledger keeps the object's JSON
    /// there, once) and 60 items, each a row of the ledger, as a large real object carries.
    static func largeEvent(_ index: Int) -> [UInt8] {
        var object = EventFactory.object("subscription")
        object["id"] = "sub_full_\(index)"
        object["status"] = "active"
        // Random bytes in base64, so that neither PostgreSQL's TOAST nor the inbox's zstd can
        // compress it away: zstd keeps at least the 12 KB of randomness of its 16 KB.
        object["metadata"] = ["note": Data((0..<12_000).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()]
        if var items = object["items"] as? [String: Any], let item = (items["data"] as? [[String: Any]])?.first {
            items["data"] = (0..<60).map { number in item.merging(["id": "si_full_\(index)_\(number)"]) { $1 } }
            items["has_more"] = false
            items["total_count"] = 60
            object["items"] = items
        }
        return EventFactory.event(id: "evt_full_\(index)", type: "customer.subscription.updated", created: 100, object: object)
    }

    @Test("A group commit on a full store fails every delivery in it and stores none; the same deliveries are taken once there is room", arguments: StoreBackend.allCases)
    func groupCommitRefusedWhole(backend: StoreBackend) async throws {
        try await withLedgerThatFills(backend) { ledger, room in
            let committer = GroupCommitter(applier: ledger.applier)
            #expect(try await committer.submit(EventFactory.delivery(Self.largeEvent(0))) != .duplicate)
            let dumpBefore = try await ledger.dump()
            try await room.fill()

            // Submitted together, so that they share commits: every caller is refused.
            let refusals = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 1...4 {
                    group.addTask {
                        do {
                            _ = try await committer.submit(EventFactory.delivery(Self.largeEvent(index)))
                            return false
                        } catch {
                            return StoreFull.matches(error)
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(refusals == [true, true, true, true], "each delivery was refused for want of space")
            #expect(try await ledger.inbox.count() == 1, "the inbox holds none of the refused deliveries")
            #expect(try await ledger.dump() == dumpBefore, "the ledger is as it was")
            await #expect { try await ledger.store.checkSpace() } throws: { StoreFull.matches($0) }

            try await room.makeRoom()
            try await ledger.store.checkSpace()
            for index in 1...4 {
                #expect(try await committer.submit(EventFactory.delivery(Self.largeEvent(index))) != .duplicate)
                #expect(try await ledger.value("subscription", "sub_full_\(index)", "status") == "active")
            }
            #expect(try await ledger.inbox.list(.init()).map(\.status) == Array(repeating: .applied, count: 5))
        }
    }

    @Test("The applier's pass on a full store fails whole: its events stay due with no try counted, and apply once there is room", arguments: StoreBackend.allCases)
    func applierWaitsForRoom(backend: StoreBackend) async throws {
        try await withLedgerThatFills(backend) { ledger, room in
            _ = try await ledger.inbox.insert((0..<3).map { try EventFactory.delivery(Self.largeEvent($0)) })
            try await room.fill()

            await #expect { try await ledger.applier.drain() } throws: { StoreFull.matches($0) }
            let waiting = try await ledger.inbox.list(.init())
            #expect(waiting.map(\.status) == [.pending, .pending, .pending], "no event failed or died of a full store")
            #expect(waiting.map(\.attempts) == [0, 0, 0])
            #expect(waiting.allSatisfy { $0.lastError == nil })
            #expect(try await ledger.count("subscription") == 0)

            try await room.makeRoom()
            // Past any claim the refused pass left (PostgreSQL's), as the applier's next look would be.
            let later = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            let pass = try await ledger.applier.drain(now: { later }, progress: { _ in })
            #expect(pass.applied == 3)
            #expect(try await ledger.inbox.list(.init()).map(\.status) == [.applied, .applied, .applied])
        }
    }

    @Test("SQLITE_FULL is a full store; other SQLite errors are not")
    func sqliteErrors() {
        #expect(StoreFull.matches(DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full")))
        #expect(!StoreFull.matches(DatabaseError(resultCode: .SQLITE_IOERR, message: "disk I/O error")))
        #expect(!StoreFull.matches(DatabaseError(resultCode: .SQLITE_CONSTRAINT, message: "UNIQUE constraint failed")))
        #expect(!StoreFull.matches(CancellationError()))
    }

    @Test("PostgreSQL's SQLSTATE 53100 (disk_full), as the server sends it, is a full store; other server errors are not")
    func postgresErrors() async throws {
        try await PostgresTestDatabase.withStore { store in
            func serverError(_ condition: String) async throws -> any Error {
                do {
                    // The condition names are the test's own.
                    try await store.client.query(
                        PostgresQuery(unsafeSQL: "DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '\(condition)'; END $$"),
                        logger: PostgresTestDatabase.logger)
                } catch {
                    return error
                }
                Issue.record("the server raised no error")
                return CancellationError()
            }
            let diskFull = try await serverError("disk_full")
            #expect(StoreFull.matches(diskFull))
            #expect(PostgresStoreError.reason(diskFull).contains("SQLSTATE 53100"))
            #expect(!StoreFull.matches(try await serverError("out_of_memory")))
            #expect(!StoreFull.matches(try await serverError("unique_violation")))
            #expect(!StoreFull.matches(try await serverError("P0001")))
        }
    }

    @Test("The store's sizes: each table with its indexes, by its lower-case name on both backends, within the database's", arguments: StoreBackend.allCases)
    func sizes(backend: StoreBackend) async throws {
        try await withLedgerThatFills(backend) { ledger, _ in
            let before = try await ledger.store.sizes()
            for table in ["inboxevent", "inboxbody", "subscription", "meta"] {
                #expect(before.tables[table] != nil, "\(table) is measured")
            }
            try await ledger.ingest((0..<20).map(Self.largeEvent))
            let after = try await ledger.store.sizes()
            let grown = { (table: String) in (after.tables[table] ?? 0) - (before.tables[table] ?? 0) }
            // Each body, compressed, holds the 12 KB of randomness in it; the subscriptions' rows
            // do not, as their JSON is kept once, in the body of the event that wrote them.
            #expect(grown("inboxbody") >= 20 * 12_000)
            #expect(grown("subscription") < 20 * 12_000 / 4, "\(grown("subscription")) bytes")
            #expect(after.tables.values.reduce(0, +) + after.free <= after.database)
            #expect(after.database > before.database)
        }
    }
}
