import APITransport
import StripeAPI
import Synchronization
import Testing

/// A clock that moves only when the test says so; sleepers wake when it passes their deadline.
final class ManualClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let state = Mutex<(now: Instant, sleepers: [(deadline: Instant, continuation: CheckedContinuation<Void, Never>)])>(
        (Instant(offset: .zero), [])
    )

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .nanoseconds(1) }
    var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if deadline <= state.now { return true }
                state.sleepers.append((deadline, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func advance(by duration: Duration) {
        let woken = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let woken = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return woken
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }
}

/// A flag one task sets and another polls.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
}

/// The order in which tasks got through.
actor Arrivals {
    private(set) var names: [String] = []
    func append(_ name: String) { names.append(name) }
    var count: Int { names.count }
}

@Suite("Rate limiter")
struct RateLimiterTests {
    @Test("A full bucket allows a burst of max(1, rate), then one token per 1/rate seconds")
    func burstThenRate() async throws {
        let clock = ManualClock()
        let limiter = RequestRateLimiter(requestsPerSecond: 5, clock: clock)
        #expect(limiter.burst == 5)
        for _ in 0..<5 { #expect(try await limiter.acquire(.interactive) == .zero) }
        #expect(await limiter.availableTokens < 1e-9)

        clock.advance(by: .milliseconds(500))
        #expect(abs(await limiter.availableTokens - 2.5) < 1e-9)
        clock.advance(by: .seconds(60))
        #expect(await limiter.availableTokens == 5, "never more than the burst saved up")

        #expect(RequestRateLimiter(requestsPerSecond: 0.2, clock: clock).burst == 1)
    }

    @Test("A caller without a token waits exactly until one has accrued")
    func waitsForToken() async throws {
        let clock = ManualClock()
        let limiter = RequestRateLimiter(requestsPerSecond: 4, clock: clock)
        for _ in 0..<4 { _ = try await limiter.acquire(.bulk) }
        let waiting = Task { try await limiter.acquire(.bulk) }
        await eventually("the caller to queue") { await limiter.waiting(.bulk) == 1 }
        await eventually("the dispatcher to sleep") { clock.sleeperCount == 1 }
        clock.advance(by: .milliseconds(200))
        #expect(await limiter.waiting(.bulk) == 1, "a quarter second per token: 200 ms is not enough")
        clock.advance(by: .milliseconds(50))
        #expect(try await waiting.value == .milliseconds(250))
        #expect(await limiter.waiting(.bulk) == 0)
    }

    @Test("Sixty acquisitions at 10/s with a burst of 10 take 5 s of clock time")
    func sustainedRate() async throws {
        let clock = ManualClock()
        let limiter = RequestRateLimiter(requestsPerSecond: 10, clock: clock)
        let finished = Flag()
        let done = Task {
            for _ in 0..<60 { _ = try await limiter.acquire(.bulk) }
            finished.set()
        }
        // Move the clock in 10 ms steps while the limiter sleeps, until every caller has passed.
        for _ in 0..<10_000 {
            await eventually("the limiter to sleep or the caller to finish") {
                clock.sleeperCount > 0 || finished.isSet
            }
            if finished.isSet { break }
            clock.advance(by: .milliseconds(10))
        }
        try await done.value
        #expect(clock.now.offset == .seconds(5))
    }

    @Test("Waiting interactive callers go before every waiting bulk caller; FIFO within a priority")
    func interactiveFirst() async throws {
        let clock = ManualClock()
        let limiter = RequestRateLimiter(requestsPerSecond: 1, clock: clock)
        _ = try await limiter.acquire(.interactive)
        let arrivals = Arrivals()
        var tasks: [Task<Void, any Error>] = []
        let queue: [(String, RequestPriority)] = [
            ("bulk1", .bulk), ("bulk2", .bulk), ("interactive1", .interactive), ("bulk3", .bulk), ("interactive2", .interactive),
        ]
        for (index, (name, priority)) in queue.enumerated() {
            tasks.append(Task {
                _ = try await limiter.acquire(priority)
                await arrivals.append(name)
            })
            let queued = queue.prefix(index + 1)
            await eventually("\(name) to queue") {
                let bulk = await limiter.waiting(.bulk)
                let interactive = await limiter.waiting(.interactive)
                return bulk == queued.filter { $0.1 == .bulk }.count && interactive == queued.filter { $0.1 == .interactive }.count
            }
        }
        #expect(await limiter.availableTokens < 1)
        for served in 1...queue.count {
            clock.advance(by: .seconds(1))
            await eventually("caller \(served) to pass") { await arrivals.count == served }
        }
        for task in tasks { try await task.value }
        #expect(await arrivals.names == ["interactive1", "interactive2", "bulk1", "bulk2", "bulk3"])
    }

    @Test("A cancelled waiter leaves the queue and throws CancellationError")
    func cancellation() async throws {
        let clock = ManualClock()
        let limiter = RequestRateLimiter(requestsPerSecond: 1, clock: clock)
        _ = try await limiter.acquire(.bulk)
        let waiter = Task { try await limiter.acquire(.bulk) }
        await eventually("the waiter to queue") { await limiter.waiting(.bulk) == 1 }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(await limiter.waiting(.bulk) == 0)
        clock.advance(by: .seconds(1))
        #expect(try await limiter.acquire(.bulk) == .zero, "the cancelled caller's token is still there")
    }

    @Test("A rate that is not positive and finite turns the limit off")
    func unlimited() async throws {
        for rate in [0, -1, Double.infinity] {
            let limiter = RequestRateLimiter(requestsPerSecond: rate, clock: ManualClock())
            for _ in 0..<100 { #expect(try await limiter.acquire(.bulk) == .zero) }
        }
    }
}
