import BillingStore
import Foundation
import Testing

@Suite("Ledger files are private (issue 18)")
struct LedgerFileModeTests {
    func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber).intValue & 0o777
    }

    func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-mode-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test("A new ledger, its -wal and its -shm are created 0600, also when SQLite creates the -wal and -shm again after a reopen")
    func newLedgerIsPrivate() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.sqlite3").path
        for round in 0..<2 {
            let database = try SQLiteDatabase.open(path: path)
            try await database.setMetaValue("probe", "round \(round)")
            for file in [path, path + "-wal", path + "-shm"] {
                let found = try mode(file)
                #expect(found == 0o600, "\(URL(fileURLWithPath: file).lastPathComponent), round \(round): \(String(found, radix: 8))")
            }
            try database.close()  // SQLite removes the -wal and -shm; the next open makes them anew
        }
    }

    @Test("An existing ledger keeps the mode its owner gave it")
    func existingLedgerKeepsItsMode() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.sqlite3").path
        try SQLiteDatabase.open(path: path).close()
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
        let database = try SQLiteDatabase.open(path: path)
        defer { try? database.close() }
        #expect(try mode(path) == 0o640)
    }
}
