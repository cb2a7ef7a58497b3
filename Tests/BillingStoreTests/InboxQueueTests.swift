import BillingCore
import BillingStore
import Foundation
import GRDB
import Synchronization
import Testing

@Suite("Durable inbox")
struct InboxQueueTests {
    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("billingd-store-\(UUID().uuidString).sqlite3").path
    }

    func delivery(_ id: String, account: String? = nil, livemode: Bool = false) -> InboxDelivery {
        InboxDelivery(
            envelope: EventEnvelope(
                id: id, type: "invoice.paid", apiVersion: "2026-10-28.clover", created: 100, livemode: livemode,
                account: account, objectID: "in_\(id)", objectType: "invoice"),
            body: Array("{\"id\":\"\(id)\",\"account\":\"\(account ?? "")\",\"livemode\":\(livemode)}".utf8), receivedAt: 1,
            source: .webhook, secretIndex: 0)
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
        let inbox = InboxQueue(database: database)
        let outcomes = try await inbox.insert([
            delivery("evt_1"), delivery("evt_1"), delivery("evt_1", account: "acct_1"), delivery("evt_1", livemode: true),
        ])
        #expect(outcomes[1] == .duplicate)
        #expect(outcomes.filter { $0 != .duplicate }.count == 3)
        #expect(try await inbox.insert([delivery("evt_1")]) == [.duplicate])
        #expect(try await inbox.count() == 3)
    }

    @Test("Reading and re-queueing an event is scoped by account and mode: the same id elsewhere is another event")
    func scopedByAccountAndMode() async throws {
        let database = try LedgerDatabase.open(path: temporaryPath())
        defer { try? database.close() }
        let inbox = InboxQueue(database: database)
        let places: [(String?, Bool)] = [(nil, false), (nil, true), ("acct_1", false)]
        _ = try await inbox.insert(places.map { delivery("evt_1", account: $0.0, livemode: $0.1) })
        // Each body holds no object, so one try leaves each dead.
        let pass = try await InboxApplier(database: database, configuration: .init(maximumAttempts: 1)).drain()
        #expect(pass.dead == 3)

        #expect(try await inbox.retry(eventID: "evt_1", account: nil, livemode: true))
        let pending = try await inbox.list(.init(statuses: [.pending]))
        #expect(pending.map(\.livemode) == [true])
        #expect(pending.map(\.account) == [nil])
        #expect(try await inbox.list(.init(statuses: [.dead])).count == 2)
        #expect(try await !inbox.retry(eventID: "evt_1", account: "acct_2", livemode: false), "no such event in acct_2")

        for (account, livemode) in places {
            let body = try #require(try await inbox.body(eventID: "evt_1", account: account, livemode: livemode))
            #expect(body == delivery("evt_1", account: account, livemode: livemode).body)
        }
        #expect(try await inbox.body(eventID: "evt_1", account: "acct_1", livemode: true) == nil)
        #expect(try await inbox.retryAllFailed() == 2)
    }

    @Test("Group commit: concurrent submissions share transactions and all get their outcome")
    func groupCommit() async throws {
        let database = try LedgerDatabase.open(path: temporaryPath())
        defer { try? database.close() }
        let commits = CommitCounter()
        let committer = GroupCommitter(applier: InboxApplier(database: database), didCommit: { ingested in commits.add(ingested.outcomes.count { $0 != .duplicate }) })
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
        #expect(try await InboxQueue(database: database).count() == 400)
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
