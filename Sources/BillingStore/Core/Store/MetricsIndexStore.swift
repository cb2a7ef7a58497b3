import BillingCore

/// Whose subscriptions the revenue metrics count: Stripe's of one scope (account and mode) and
/// the App Store's of the environments of that mode.
public struct MetricsScope: Sendable, Equatable {
    public var stripe: ServiceScope
    public var appStoreEnvironments: [String]

    public init(stripe: ServiceScope, appStoreEnvironments: [String]) {
        self.stripe = stripe
        self.appStoreEnvironments = appStoreEnvironments
    }
}

/// The reads the revenue metrics answer from (see ``MetricsIndexing``): the day sums of the
/// overview, the spans around an instant, the histories of the subscriptions that changed in a
/// range, and the trials started in one. Each read's cost follows what it returns, not the
/// ledger's size.
public protocol MetricsIndexReads: Sendable {
    /// The changes of every day before `day` (a UTC day's first second), summed per group.
    func sums(before day: Int64) async throws -> [MetricsTallyKey: MetricsTally]
    /// What the spans with a start or an end in `[from, through]` change there, per group, folded
    /// as they are read (``MetricsIndexing/BoundaryChanges``).
    func boundaryChanges(from: Int64, through: Int64) async throws -> [MetricsTallyKey: MetricsTally]
    /// The histories (spans only) of the subscriptions with a span starting or ending in
    /// `(after, through]`: those whose state at `through` may differ from their state at `after`.
    func changedHistories(after: Int64, through: Int64) async throws -> [SubscriptionHistory]
    /// The trials started in `[from, to)`, each with its subscription's state at `now`.
    func trials(from: Int64, to: Int64, now: Int64) async throws -> [JudgedTrial]
}

extension MetricsIndexReads {
    /// The overview at `instant`: the day sums before its day and its day's spans up to it.
    public func overview(at instant: Int64) async throws -> MetricsOverview {
        let day = MetricsIndexing.dayStart(instant)
        async let sums = sums(before: day)
        async let changes = boundaryChanges(from: day, through: instant)
        return MetricsIndexing.overview(before: try await sums, sameDayChanges: try await changes, at: instant)
    }
}

extension MetricsFactStore {
    /// The index of `scope`'s metrics under `catalog`, brought up to date with the facts. This
    /// default builds it in memory from every fact (the reference the ledger's own index is
    /// tested against); the SQLite and PostgreSQL stores keep theirs in the ledger.
    public func metricsIndex(_ scope: MetricsScope, catalog: PlanCatalog) async throws -> any MetricsIndexReads {
        async let stripe = stripeSubscriptions(scope: scope.stripe)
        async let appStore = appStoreSubscriptions(environments: scope.appStoreEnvironments)
        return HistoryMetricsIndex(SubscriptionHistory.histories(stripe: try await stripe, appStore: try await appStore, catalog: catalog))
    }
}

/// The metrics index of histories held in memory: every read is a pass over them.
public struct HistoryMetricsIndex: MetricsIndexReads {
    public let histories: [SubscriptionHistory]
    let spans: [IndexedSpan]

    public init(_ histories: [SubscriptionHistory]) {
        self.histories = histories
        spans = histories.flatMap(IndexedSpan.spans(of:))
    }

    public func sums(before day: Int64) async throws -> [MetricsTallyKey: MetricsTally] {
        var sums: [MetricsTallyKey: MetricsTally] = [:]
        for (key, tally) in MetricsIndexing.dayChanges(of: spans) where key.day < day {
            sums[key.key, default: .zero] += tally
        }
        return sums
    }

    public func boundaryChanges(from: Int64, through: Int64) async throws -> [MetricsTallyKey: MetricsTally] {
        var changes = MetricsIndexing.BoundaryChanges(from: from, through: through)
        for span in spans { changes.add(span) }
        return changes.tallies
    }

    public func changedHistories(after: Int64, through: Int64) async throws -> [SubscriptionHistory] {
        let changed = Set(spans.filter { span in
            (after + 1...through).contains(span.span.start) || span.span.end.map { (after + 1...through).contains($0) } ?? false
        }.map { "\($0.store.rawValue)/\($0.subscription)" })
        return histories.filter { changed.contains("\($0.store.rawValue)/\($0.id)") }.map { history in
            var spansOnly = history
            spansOnly.spans = IndexedSpan.spans(of: history).map(\.span)
            spansOnly.trials = []
            return spansOnly
        }
    }

    public func trials(from: Int64, to: Int64, now: Int64) async throws -> [JudgedTrial] {
        histories.flatMap { history in
            history.trials.filter { from <= $0.start && $0.start < to && $0.start <= now }.map {
                JudgedTrial(store: history.store, trial: $0, stateNow: history.state(at: now))
            }
        }
    }
}
