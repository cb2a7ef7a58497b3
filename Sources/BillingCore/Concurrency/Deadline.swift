internal import Synchronization

/// An operation did not finish within its deadline; it may still finish later.
public struct DeadlinePassed: Error, CustomStringConvertible {
    /// How long the caller waited.
    public let limit: Duration

    public var description: String { "no answer within \(limit)" }
}

/// Waits at most `limit` for `operation`, then throws ``DeadlinePassed``.
///
/// The operation runs on a task of its own, so the caller is answered on time even when the
/// operation ignores cancellation (a group commit waiting for a database that is down). Past the
/// deadline the operation is cancelled and its outcome dropped: use it only where finishing
/// late is harmless, such as a store write whose sender retries and is then told "duplicate".
public func withDeadline<Value: Sendable>(
    _ limit: Duration, _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    let race = FirstOutcome<Value>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            guard race.arm(continuation) else { return }
            let work = Task {
                do { race.settle(.success(try await operation())) } catch { race.settle(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: limit)
                if race.settle(.failure(DeadlinePassed(limit: limit))) { work.cancel() }
            }
            race.onSettled { timer.cancel() }
        }
    } onCancel: {
        race.settle(.failure(CancellationError()))
    }
}

/// The continuation of ``withDeadline(_:_:)``, resumed once by whichever outcome comes first.
private final class FirstOutcome<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var early: Result<Value, any Error>?
        var settled = false
        var cleanup: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// Hands over the caller's continuation; false when an outcome (cancellation) came first
    /// and has resumed it already.
    func arm(_ continuation: CheckedContinuation<Value, any Error>) -> Bool {
        let early: Result<Value, any Error>? = state.withLock { state in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        // Cancelled before the continuation existed.
        guard let early else { return true }
        continuation.resume(with: early)
        return false
    }

    /// Runs `cleanup` once settled (at once if it already is).
    func onSettled(_ cleanup: @escaping @Sendable () -> Void) {
        let now = state.withLock { state in
            if state.settled { return true }
            state.cleanup = cleanup
            return false
        }
        if now { cleanup() }
    }

    /// Resumes the caller with `outcome` unless another came first; true when this one won.
    @discardableResult
    func settle(_ outcome: Result<Value, any Error>) -> Bool {
        let (continuation, cleanup, won): (CheckedContinuation<Value, any Error>?, (@Sendable () -> Void)?, Bool) =
            state.withLock { state in
                guard !state.settled else { return (nil, nil, false) }
                state.settled = true
                let taken = (state.continuation, state.cleanup)
                state.continuation = nil
                state.cleanup = nil
                if taken.0 == nil { state.early = outcome }
                return (taken.0, taken.1, true)
            }
        continuation?.resume(with: outcome)
        cleanup?()
        return won
    }
}
