/// Which queue a request waits in when the rate limit is reached.
public enum RequestPriority: String, Sendable {
    /// A person or a webhook is waiting: served before any bulk request.
    case interactive
    /// Reconcile, backfill, export: uses what interactive calls leave.
    case bulk
}

/// A token bucket shared by every caller of one `StripeClient` (or several clients on one key):
/// `requestsPerSecond` tokens a second, at most max(1, rate) saved up. Callers without a token
/// wait FIFO within their priority, and every waiting `.interactive` caller is served before any
/// `.bulk` one. A rate that is not positive and finite turns the limit off.
public actor RequestRateLimiter {
    public nonisolated let requestsPerSecond: Double
    /// The most tokens that can be saved up, and so the largest burst.
    public nonisolated let burst: Double

    private let now: @Sendable () -> Duration
    private let sleepUntil: @Sendable (Duration) async throws -> Void
    private var tokens: Double
    private var refilledAt: Duration
    private var interactive: [Waiter] = []
    private var bulk: [Waiter] = []
    private var nextWaiterID = 0
    private var isDispatching = false

    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Result<Void, CancellationError>, Never>
    }

    public init(requestsPerSecond: Double) {
        self.init(requestsPerSecond: requestsPerSecond, clock: ContinuousClock())
    }

    /// - Parameter clock: the time source for refills and waits; tests pass a manual clock.
    public init<C: Clock>(requestsPerSecond: Double, clock: C) where C.Duration == Duration {
        let origin = clock.now
        self.requestsPerSecond = requestsPerSecond
        burst = max(1, requestsPerSecond.isFinite ? requestsPerSecond : 1)
        now = { origin.duration(to: clock.now) }
        sleepUntil = { deadline in try await clock.sleep(until: origin.advanced(by: deadline), tolerance: nil) }
        tokens = burst
        refilledAt = .zero
    }

    private var isUnlimited: Bool { !(requestsPerSecond > 0 && requestsPerSecond.isFinite) }

    /// Takes one token, waiting for it if needed; returns how long it waited.
    public func acquire(_ priority: RequestPriority) async throws(CancellationError) -> Duration {
        if Task.isCancelled { throw CancellationError() }
        if isUnlimited { return .zero }
        let start = now()
        refill(at: start)
        let queueAhead = priority == .interactive ? interactive.isEmpty : interactive.isEmpty && bulk.isEmpty
        if queueAhead, hasToken {
            tokens -= 1
            return .zero
        }
        let id = nextWaiterID
        nextWaiterID += 1
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let waiter = Waiter(id: id, continuation: continuation)
                switch priority {
                case .interactive: interactive.append(waiter)
                case .bulk: bulk.append(waiter)
                }
                startDispatching()
            }
        } onCancel: {
            Task { await self.cancel(waiterID: id) }
        }
        try result.get()
        return now() - start
    }

    /// Callers waiting now, per priority.
    public func waiting(_ priority: RequestPriority) -> Int {
        priority == .interactive ? interactive.count : bulk.count
    }

    /// Tokens available now (fractional while refilling).
    public var availableTokens: Double {
        refill(at: now())
        return tokens
    }

    // A token is "there" a hair early so that rounding in the wait cannot make the dispatcher spin.
    private var hasToken: Bool { tokens >= 1 - 1e-9 }

    private func refill(at instant: Duration) {
        guard instant > refilledAt else { return }
        tokens = min(burst, tokens + Self.seconds(instant - refilledAt) * requestsPerSecond)
        refilledAt = instant
    }

    /// One dispatcher at a time hands out tokens to waiters as they accrue, then ends.
    private func startDispatching() {
        guard !isDispatching else { return }
        isDispatching = true
        Task { await self.dispatch() }
    }

    private func dispatch() async {
        while true {
            refill(at: now())
            while hasToken, let waiter = nextWaiter() {
                tokens = max(0, tokens - 1)
                waiter.continuation.resume(returning: .success(()))
            }
            if interactive.isEmpty, bulk.isEmpty {
                isDispatching = false
                return
            }
            let missing = 1 - tokens
            let nanoseconds = (missing / requestsPerSecond * 1e9).rounded(.up)
            let deadline = refilledAt + .nanoseconds(Int64(min(nanoseconds, 1e15)))
            // Nothing cancels this task; a failed sleep just means checking again.
            try? await sleepUntil(deadline)
        }
    }

    private func nextWaiter() -> Waiter? {
        if !interactive.isEmpty { return interactive.removeFirst() }
        if !bulk.isEmpty { return bulk.removeFirst() }
        return nil
    }

    private func cancel(waiterID: Int) {
        if let index = interactive.firstIndex(where: { $0.id == waiterID }) {
            interactive.remove(at: index).continuation.resume(returning: .failure(CancellationError()))
        } else if let index = bulk.firstIndex(where: { $0.id == waiterID }) {
            bulk.remove(at: index).continuation.resume(returning: .failure(CancellationError()))
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}
