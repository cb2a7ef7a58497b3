import BillingCore
import BillingStore
import Synchronization
import Testing

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
