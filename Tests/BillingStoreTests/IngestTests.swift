import BillingCore
import BillingStore
import Foundation
import GRDB
import Synchronization
import Testing

@Suite("Group commit applies each new delivery in the transaction that stores it")
struct IngestTests {
    func subscriptionEvent(_ id: String, created: Int64, status: String) -> [UInt8] {
        var object = EventFactory.object("subscription")
        object["status"] = status
        return EventFactory.event(id: id, type: "customer.subscription.updated", created: created, object: object)
    }

    @Test("An acknowledged delivery is already in the ledger and its inbox row is done; a duplicate changes nothing", arguments: StoreBackend.allCases)
    func appliedOnCommit(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let committer = GroupCommitter(applier: ledger.applier)
            let body = subscriptionEvent("evt_new", created: 10, status: "active")
            #expect(try await committer.submit(EventFactory.delivery(body)) != .duplicate)

            let subscriptionID = EventFactory.object("subscription")["id"] as! String
            #expect(try await ledger.value("subscription", subscriptionID, "status") == "active")
            let event = try #require(try await ledger.inbox.list(.init()).first)
            #expect(event.status == .applied)
            #expect(event.effect == ApplyEffect.applied.rawValue)
            #expect(event.attempts == 1)
            #expect(try await ledger.applier.drain().processed == 0, "nothing was left for the applier")

            #expect(try await committer.submit(EventFactory.delivery(body)) == .duplicate)
            #expect(try await ledger.inbox.count() == 1)
        }
    }

    @Test("Out of order within one group: the ledger keeps the newest snapshot, the older is recorded stale", arguments: StoreBackend.allCases)
    func orderInsideAGroup(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let newer = subscriptionEvent("evt_2", created: 20, status: "past_due")
            let older = subscriptionEvent("evt_1", created: 10, status: "active")
            // One group, the newer first.
            let result = try await ledger.applier.ingest(
                [ledger.applier.prepare(try EventFactory.delivery(newer)), ledger.applier.prepare(try EventFactory.delivery(older))],
                now: 1)
            #expect(result.pass.applied == 1 && result.pass.stale == 1)
            let subscriptionID = EventFactory.object("subscription")["id"] as! String
            #expect(try await ledger.value("subscription", subscriptionID, "status") == "past_due")
            let effects = try await ledger.inbox.list(.init()).map { "\($0.eventID):\($0.effect ?? "-")" }.sorted()
            #expect(effects == ["evt_1:stale", "evt_2:applied"])
        }
    }

    @Test("A delivery that does not decode is stored pending for the applier, which retries it with backoff", arguments: StoreBackend.allCases)
    func undecodableIsQueued(backend: StoreBackend) async throws {
        try await withLedger(backend) { (ledger: LedgerUnderTest) async throws in
            let counter = QueuedCounter()
            let committer = GroupCommitter(applier: ledger.applier, didCommit: { counter.add($0.queued) })
            let body = Array(#"{"id":"evt_bad","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1","currency":7}}}"#.utf8)
            #expect(try await committer.submit(EventFactory.delivery(body)) != .duplicate)
            #expect(counter.total == 1)
            #expect(try await ledger.inbox.list(.init()).map(\.status) == [.pending])
            #expect(try await ledger.applier.drain().failed == 1)
        }
    }

    @Test("If a ledger write fails, the whole group is stored pending and nothing of it is half-applied")
    func ledgerFailureFallsBack() async throws {
        let ledger = try TestLedger()
        // A trigger stands in for a ledger write that fails (a full disk, a constraint).
        try await ledger.database.writer.write { db in
            try db.execute(sql: "CREATE TEMP TRIGGER refuse BEFORE INSERT ON main.subscription BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let committer = GroupCommitter(applier: ledger.applier)
        let body = subscriptionEvent("evt_refused", created: 10, status: "active")
        #expect(try await committer.submit(EventFactory.delivery(body)) != .duplicate)
        #expect(try await ledger.inbox.list(.init()).map(\.status) == [.pending])
        #expect(try await ledger.rows("SELECT id FROM subscription").isEmpty)
    }
}

final class QueuedCounter: Sendable {
    private let value = Mutex(0)
    func add(_ count: Int) { value.withLock { $0 += count } }
    var total: Int { value.withLock { $0 } }
}

/// A commit that never returns, as one on a PostgreSQL connection that died mid-transaction
/// without the driver noticing, until `release()`.
final class StuckCommit: Sendable {
    private let state = Mutex<(stuck: Bool, waiting: [CheckedContinuation<Void, Never>])>((true, []))

    func commit(_ items: [Int]) async -> [String] {
        await withCheckedContinuation { continuation in
            let passes = state.withLock { state in
                guard state.stuck else { return true }
                // Only the first commit sticks.
                state.stuck = false
                state.waiting.append(continuation)
                return false
            }
            if passes { continuation.resume() }
        }
        return items.map { "stored \($0)" }
    }

    func release() {
        let waiting = state.withLock { state in
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

@Suite("Batch commits go on past a commit that never returns")
struct StuckCommitTests {
    @Test("The stuck commit's callers are failed at the commit deadline, and the next batch commits")
    func nextBatchCommits() async throws {
        let stuck = StuckCommit()
        let committer = BatchCommitter<Int, String>(commitDeadline: .milliseconds(200)) { items in await stuck.commit(items) }
        await #expect(throws: DeadlinePassed.self) { try await committer.submit(1) }
        #expect(try await committer.submit(2) == "stored 2")
        stuck.release()
    }
}

/// Commits that are held until `open()`, counting how many are in flight at once; once open,
/// held commits go on and later ones are not held.
final class HeldCommits: Sendable {
    private let state = Mutex<(inFlight: Int, most: Int, open: Bool, held: [CheckedContinuation<Void, Never>])>((0, 0, false, []))

    func commit(_ items: [Int]) async -> [String] {
        await withCheckedContinuation { continuation in
            let passes = state.withLock { state in
                state.inFlight += 1
                state.most = max(state.most, state.inFlight)
                if !state.open { state.held.append(continuation) }
                return state.open
            }
            if passes { continuation.resume() }
        }
        state.withLock { $0.inFlight -= 1 }
        return items.map { "stored \($0)" }
    }

    var inFlight: Int { state.withLock { $0.inFlight } }
    var most: Int { state.withLock { $0.most } }

    /// Waits until `count` commits are held; false after two minutes (a starved test process).
    func waitForHeld(_ count: Int) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while state.withLock({ $0.held.count }) < count {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    func open() {
        let held = state.withLock { state in
            state.open = true
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }
}

@Suite("Concurrent group commits")
struct ConcurrentCommitTests {
    @Test("With three slots, three batches commit at once, each caller hearing its own outcome; a fourth waits for a slot")
    func threeSlots() async throws {
        let commits = HeldCommits()
        defer { commits.open() }
        let committer = BatchCommitter<Int, String>(concurrentCommits: 3) { items in await commits.commit(items) }
        var submitted: [Task<String, any Error>] = []
        for item in 1...3 {
            submitted.append(Task { try await committer.submit(item) })
            #expect(try await commits.waitForHeld(item), "commit \(item) starts while the others are held")
        }
        #expect(commits.inFlight == 3)
        submitted.append(Task { try await committer.submit(4) })
        try await Task.sleep(for: .milliseconds(100))
        #expect(commits.most == 3, "no fourth commit while three are in flight")
        commits.open()
        var outcomes: [String] = []
        for task in submitted { outcomes.append(try await task.value) }
        #expect(outcomes == ["stored 1", "stored 2", "stored 3", "stored 4"])
    }

    @Test("With one slot (SQLite's one writer), a second batch waits for the first commit")
    func oneSlot() async throws {
        let commits = HeldCommits()
        defer { commits.open() }
        let committer = BatchCommitter<Int, String> { items in await commits.commit(items) }
        let first = Task { try await committer.submit(1) }
        #expect(try await commits.waitForHeld(1))
        let second = Task { try await committer.submit(2) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(commits.most == 1)
        commits.open()
        #expect(try await first.value == "stored 1")
        #expect(try await second.value == "stored 2")
        #expect(commits.most == 1, "the second commit started only after the first")
    }
}
