import BillingCore
import BillingStore
import Foundation
import Synchronization

/// Every figure of `/console/overview`, computed at one instant (`asOf`): the revenue metrics
/// API's overview now and at each month start of the last 12 months, and the last 30 days'
/// movement, churn, trials and revenue.
struct ConsoleOverview: Sendable, Equatable {
    struct Point: Sendable, Equatable {
        var at: Int64
        var figures: MetricsOverview
    }

    /// Unix seconds.
    var asOf: Int64
    var overview: OverviewAnswer
    /// Each month start of the last 12 months, then `asOf`.
    var points: [Point]
    var movement: [String: MRRMovement]
    var churn: StoreSplit<ChurnFigures>
    var trials: StoreSplit<TrialFigures>
    /// Gross revenue and refunds of the last 30 days per currency.
    var revenue: [String: RevenueFigures]

    /// Computes the figures as of `now` from `index` (brought up to date by the caller), reusing
    /// the overview at `now` when the caller has it. Movement and churn share one read of the
    /// histories that changed in the 30 days, the most costly read of the page.
    static func compute(
        _ reader: RevenueMetricsReader, index: any MetricsIndexReads, now: Int64, overview: MetricsOverview? = nil
    ) async throws -> ConsoleOverview {
        let monthAgo = now - 30 * 86_400
        async let start = index.overview(at: monthAgo)
        async let changed = index.changedHistories(after: monthAgo, through: now)
        let current: MetricsOverview
        if let overview { current = overview } else { current = try await index.overview(at: now) }
        var points: [Point] = []
        for at in MetricsInterval.month.boundaries(from: now - 365 * 86_400, to: now) {
            points.append(Point(at: at, figures: try await index.overview(at: at)))
        }
        points.append(Point(at: now, figures: current))
        let range = try MetricsRange(from: monthAgo, to: now)
        let trials = try await RevenueMetricsReader.trials(index, range, now: now)
        var revenue: [String: RevenueFigures] = [:]
        for bucket in try await reader.revenue(range, interval: .month) {
            for (currency, split) in bucket.byCurrency { revenue[currency, default: .zero] += split.total }
        }
        let (before, histories) = (try await start, try await changed)
        return ConsoleOverview(
            asOf: now, overview: reader.answer(current), points: points,
            movement: MetricsIndexing.movement(start: before, end: current, changed: histories, from: monthAgo, to: now),
            churn: MetricsIndexing.churn(start: before, changed: histories, from: monthAgo, to: now),
            trials: trials, revenue: revenue)
    }
}

/// The overview page's figures, kept: a visit is served the last computation (and the page says
/// as of when), never waits for movement, churn and revenue to be computed from scratch — but the
/// first visit, which waits for the first computation. They are recomputed when the ledger
/// changed (``changed()``) at most every ``Configuration/interval``, and when older than
/// ``Configuration/maximumAge`` (time passing alone moves the last 30 days), while the console is
/// visited. In `serve` the revenue gauges do the recomputing, after the refresh of the metrics
/// index and the overview now they compute anyway (``RevenueGauges``); without them (a router on
/// its own) a visit that finds the figures due recomputes them itself.
public final class ConsoleOverviewFigures: Sendable {
    public struct Configuration: Sendable {
        /// At most one recomputation this often (seconds), however often the ledger changes.
        public var interval: Int64 = 60
        /// Recomputed when this old (seconds) even without a change.
        public var maximumAge: Int64 = 300
        /// Kept current in the background while the console was visited this recently (seconds);
        /// after that the figures wait for the next visit.
        public var idle: Int64 = 3_600

        public init() {}
    }

    private struct State {
        var figures: ConsoleOverview?
        /// Changes signalled so far, and how many the figures include.
        var changes: UInt64 = 0
        var included: UInt64 = 0
        /// Unix seconds; nil until the first visit (the first computation in `serve` is wanted
        /// anyway: it warms the page before anyone opens it).
        var lastVisit: Int64?
        /// Asks the background (the revenue gauges' loop) to recompute; nil without one.
        var wake: (@Sendable () -> Void)?
        /// How many computations finished, for tests.
        var computations = 0
    }

    let reader: RevenueMetricsReader
    let configuration: Configuration
    private let state = Mutex(State())

    public init(reader: RevenueMetricsReader, configuration: Configuration = .init()) {
        self.reader = reader
        self.configuration = configuration
    }

    private var now: Int64 { Int64(reader.configuration.now().timeIntervalSince1970) }

    /// The ledger changed: the figures are due again once ``Configuration/interval`` has passed
    /// since their computation. Cheap, callable from any task.
    public func changed() {
        state.withLock { $0.changes &+= 1 }
    }

    /// How many computations finished.
    var computations: Int { state.withLock(\.computations) }

    /// The figures of a visit at `now`: the last computation; the first visit waits for one. A
    /// visit that finds them due asks the background to recompute, or, without one, recomputes.
    func visit() async throws -> ConsoleOverview {
        let now = self.now
        let (figures, due, wake) = state.withLock { state in
            state.lastVisit = now
            return (state.figures, isDue(state, at: now), state.wake)
        }
        if let figures, !due { return figures }
        if let figures, let wake {
            wake()
            return figures
        }
        let index = try await reader.index()
        return try await compute(index: index, overview: nil, at: now)
    }

    /// Whether the figures are due at `at`: the ledger changed since they were computed and the
    /// interval has passed, or they are older than the maximum age.
    private func isDue(_ state: State, at: Int64) -> Bool {
        guard let figures = state.figures else { return true }
        let age = at - figures.asOf
        return (state.changes != state.included && age >= configuration.interval) || age >= configuration.maximumAge
    }

    /// Recomputes the figures as of `at` with the revenue gauges' index and overview when they are
    /// missing, or due while the console is visited.
    func refreshIfDue(index: any MetricsIndexReads, overview: MetricsOverview, at: Int64) async throws {
        let wanted = state.withLock { state in
            guard state.figures != nil else { return true }
            guard let visit = state.lastVisit, at - visit < configuration.idle else { return false }
            return isDue(state, at: at)
        }
        if wanted { _ = try await compute(index: index, overview: overview, at: at) }
    }

    /// Computes the figures as of `at` and keeps them unless newer ones were kept meanwhile.
    private func compute(index: any MetricsIndexReads, overview: MetricsOverview?, at: Int64) async throws -> ConsoleOverview {
        let changes = state.withLock(\.changes)
        let figures = try await ConsoleOverview.compute(reader, index: index, now: at, overview: overview)
        return state.withLock { state in
            state.computations += 1
            if let kept = state.figures, kept.asOf > figures.asOf { return kept }
            state.figures = figures
            state.included = changes
            return figures
        }
    }

    /// The background that recomputes the figures (the revenue gauges' loop, while it runs).
    func setWake(_ wake: (@Sendable () -> Void)?) {
        state.withLock { $0.wake = wake }
    }
}
