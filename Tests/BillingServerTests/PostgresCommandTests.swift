import Foundation
import Testing

@Suite("Commands with BILLINGD_DATABASE_URL")
struct PostgresCommandTests {
    static let url = "postgres://billingd@/billingd?host=/nonexistent-socket-dir&sslmode=disable"

    @Test("Every command goes to the PostgreSQL ledger, never falling back to SQLite: an unreachable server is exit 69", arguments: [
        ["events"], ["inspect", "cus_1"], ["replay"], ["export", "invoices"], ["serve", "--local"], ["outbox"],
    ])
    func postgresOrNothing(_ arguments: [String]) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-pg-cmd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let sqlite = directory.appendingPathComponent("ledger.sqlite3").path
        let result = try await billingd(arguments, environment: ["BILLINGD_DATABASE_URL": Self.url, "BILLINGD_DATABASE": sqlite])
        #expect(result.status == 69, "\(arguments): \(result.stderr)")
        #expect(result.stderr.contains("Cannot connect to the ledger database"))
        #expect(!FileManager.default.fileExists(atPath: sqlite), "no SQLite ledger is created instead")
    }

    @Test("backup of a PostgreSQL ledger says that is pg_dump's job, exit 78")
    func backupNamesPgDump() async throws {
        let result = try await billingd(["backup", "/tmp/billingd-never.sqlite3"], environment: ["BILLINGD_DATABASE_URL": Self.url])
        #expect(result.status == 78)
        #expect(result.stderr.contains("pg_dump"))
        #expect(!FileManager.default.fileExists(atPath: "/tmp/billingd-never.sqlite3"))
    }

    @Test("migrate: on SQLite it says the file migrates itself; an unreachable PostgreSQL is exit 69; copy names what is missing")
    func migrateAndCopyStatuses() async throws {
        let sqlite = try await billingd(["migrate"], environment: ["BILLINGD_DATABASE": "/nonexistent/ledger.sqlite3"])
        #expect(sqlite.status == 0 && sqlite.stdout.contains("migrates itself"))
        let unreachable = try await billingd(["migrate"], environment: ["BILLINGD_DATABASE_URL": Self.url])
        #expect(unreachable.status == 69, "\(unreachable.stderr)")
        #expect(unreachable.stderr.contains("Cannot connect"))
        let noTarget = try await billingd(["copy", "--from", "/nonexistent/ledger.sqlite3"], environment: [:])
        #expect(noTarget.status == 64)
        let noSource = try await billingd(["copy", "--from", "/nonexistent/ledger.sqlite3", "--to", Self.url], environment: [:])
        #expect(noSource.status == 66)
        #expect(noSource.stderr.contains("No SQLite ledger at /nonexistent/ledger.sqlite3"))
        let password = try await billingd(["events"], environment: ["BILLINGD_DATABASE_PASSWORD": "hunter2hunter2"])
        #expect(password.status == 78 && password.stderr.contains("BILLINGD_DATABASE_URL"))
        #expect(!password.stderr.contains("hunter2"))
    }
}
