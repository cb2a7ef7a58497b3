import BillingCore
import Synchronization
import Testing

/// An operation that ignores cancellation, as a group commit waiting on its database does:
/// it ends only when `release()` is called.
final class Gate: Sendable {
    private let waiting = Mutex<[CheckedContinuation<Void, Never>]>([])
    private let open = Mutex(false)

    func pass() async {
        await withCheckedContinuation { continuation in
            let passed = open.withLock { open in
                if open { return true }
                waiting.withLock { $0.append(continuation) }
                return false
            }
            if passed { continuation.resume() }
        }
    }

    func release() {
        let continuations = open.withLock { open in
            open = true
            return waiting.withLock { waiting in
                defer { waiting = [] }
                return waiting
            }
        }
        for continuation in continuations { continuation.resume() }
    }
}

final class Flag: Sendable {
    private let storage = Mutex(false)
    func set(_ value: Bool) { storage.withLock { $0 = value } }
    var value: Bool { storage.withLock { $0 } }
}

@Suite("withDeadline: an answer on time whatever the operation does")
struct DeadlineTests {
    @Test("An operation that finishes in time gives its value, and its error as thrown")
    func inTime() async throws {
        #expect(try await withDeadline(.seconds(30)) { 42 } == 42)
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await withDeadline(.seconds(30)) { () async throws -> Int in throw Refused() }
        }
    }

    @Test("An operation that ignores cancellation and never ends is answered DeadlinePassed, and is cancelled")
    func pastTheDeadline() async throws {
        let gate = Gate()
        let sawCancellation = Flag()
        let outcome = await #expect(throws: DeadlinePassed.self) {
            try await withDeadline(.milliseconds(50)) {
                await gate.pass()
                sawCancellation.set(Task.isCancelled)
                return 1
            }
        }
        #expect(outcome?.limit == .milliseconds(50))
        gate.release()
        // The operation ran on to its end on its own task; it was told it is no longer awaited.
        for _ in 0..<500 where !sawCancellation.value { try await Task.sleep(for: .milliseconds(10)) }
        #expect(sawCancellation.value)
    }

    @Test("Cancelling the caller answers it at once with CancellationError")
    func callerCancelled() async throws {
        let gate = Gate()
        let caller = Task {
            try await withDeadline(.seconds(600)) {
                await gate.pass()
                return 1
            }
        }
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        gate.release()
    }
}
