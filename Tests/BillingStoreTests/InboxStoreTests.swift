import BillingCore
import BillingStore
import Foundation
import GRDB
import Synchronization
import Testing

@Suite("Durable inbox")
struct InboxStoreTests {
    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("billingd-store-\(UUID().uuidString).sqlite3").path
    }

    func delivery(_ id: String, account: String? = nil, livemode: Bool = false) -> InboxDelivery {
        InboxDelivery(
            envelope: EventEnvelope(
                id: id, type: "invoice.paid", apiVersion: "2026-10-28.clover", created: 100, livemode: livemode,
                account: account, objectID: "in_\(id)", objectType: "invoice"),
            body: Array("{\"id\":\"\(id)\"}".utf8), receivedAt: 1, source: .webhook, secretIndex: 0)
    }

    @Test("The writer runs with synchronous=FULL in WAL mode")
    func fullDurability() throws {
        let path = temporaryPath()
        let database = try LedgerDatabase.open(path: path)
        defer { try? database.close() }
        #expect(try database.synchronousLevel() == 2)
        let mode = try database.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test("The same event id is stored once; other accounts and modes are other keys")
    func uniqueness() async throws {
        let database = try LedgerDatabase.open(path: temporaryPath())
        defer { try? database.close() }
        let inbox = InboxStore(database: database)
        let outcomes = try await inbox.insert([
            delivery("evt_1"), delivery("evt_1"), delivery("evt_1", account: "acct_1"), delivery("evt_1", livemode: true),
        ])
        #expect(outcomes[1] == .duplicate)
        #expect(outcomes.filter { $0 != .duplicate }.count == 3)
        #expect(try await inbox.insert([delivery("evt_1")]) == [.duplicate])
        #expect(try await inbox.count() == 3)
    }

    @Test("Group commit: concurrent submissions share transactions and all get their outcome")
    func groupCommit() async throws {
        let database = try LedgerDatabase.open(path: temporaryPath())
        defer { try? database.close() }
        let commits = CommitCounter()
        let committer = GroupCommitter(inbox: InboxStore(database: database)) { stored in commits.add(stored) }
        let outcomes = try await withThrowingTaskGroup(of: InboxInsertOutcome.self) { group in
            for index in 0..<500 {
                group.addTask { try await committer.submit(self.delivery("evt_\(index % 400)")) }
            }
            var all: [InboxInsertOutcome] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.count == 500)
        #expect(outcomes.filter { $0 == .duplicate }.count == 100)
        #expect(try await InboxStore(database: database).count() == 400)
        #expect(commits.total == 400)
        #expect(commits.calls < 500, "deliveries shared commits")
    }

    @Test("A database in a missing directory gives an error that says what to do")
    func missingDirectory() {
        #expect(throws: LedgerDatabaseError.self) { try LedgerDatabase.open(path: "/nonexistent-dir-\(UUID())/x.sqlite3") }
    }
}

final class CommitCounter: Sendable {
    private let state = Mutex((calls: 0, total: 0))
    func add(_ stored: Int) { state.withLock { $0.calls += 1; $0.total += stored } }
    var calls: Int { state.withLock { $0.calls } }
    var total: Int { state.withLock { $0.total } }
}
