import BillingStore
import Foundation
import GRDB
import Testing

@Suite("SQLite ledger file")
struct SQLiteDatabaseTests {
    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("billingd-store-\(UUID().uuidString).sqlite3").path
    }

    @Test("The writer runs with synchronous=FULL in WAL mode")
    func fullDurability() throws {
        let path = temporaryPath()
        let database = try SQLiteDatabase.open(path: path)
        defer { try? database.close() }
        #expect(try database.synchronousLevel() == 2)
        let mode = try database.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test("A database in a missing directory gives an error that says what to do")
    func missingDirectory() {
        #expect(throws: LedgerDatabaseError.self) { try SQLiteDatabase.open(path: "/nonexistent-dir-\(UUID())/x.sqlite3") }
    }
}
