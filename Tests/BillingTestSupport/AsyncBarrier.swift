import Synchronization

/// Holds every task that reaches it until `parties` tasks have: then all go on at once. For
/// races that must overlap, not merely be started together and run one after another.
public final class AsyncBarrier: Sendable {
    private struct State {
        var arrived = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let parties: Int
    private let state = Mutex(State())

    public init(parties: Int) {
        precondition(parties > 0, "a barrier for no one")
        self.parties = parties
    }

    /// Waits until `parties` tasks have arrived (this one included).
    public func arriveAndWait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let released = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.arrived += 1
                state.waiting.append(continuation)
                guard state.arrived == parties else { return [] }
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiting in released { waiting.resume() }
        }
    }
}
