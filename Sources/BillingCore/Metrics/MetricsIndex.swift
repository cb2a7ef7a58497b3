import Crypto
import Foundation

/// One subscription's span as the metrics index keeps it: a stretch `[start, end)` in which the
/// subscription paid (an amount in a currency) or was in a free trial. Inactive stretches are
/// not kept: a subscription is inactive wherever none of its spans is.
public struct IndexedSpan: Sendable, Equatable {
    public var store: MetricsStore
    public var subscription: String
    public var plan: String?
    public var span: SubscriptionSpan

    public init(store: MetricsStore, subscription: String, plan: String?, span: SubscriptionSpan) {
        self.store = store
        self.subscription = subscription
        self.plan = plan
        self.span = span
    }

    /// The spans of a history that count (paying or trial), never overlapping: the state
    /// between two of the history's boundaries is ``SubscriptionHistory/state(at:)`` there, so
    /// where two of its spans overlap the later one wins, as it does for every figure.
    public static func spans(of history: SubscriptionHistory) -> [IndexedSpan] {
        var boundaries = Set<Int64>()
        for span in history.spans {
            boundaries.insert(span.start)
            if let end = span.end { boundaries.insert(end) }
        }
        let points = boundaries.sorted()
        var spans: [SubscriptionSpan] = []
        for (index, start) in points.enumerated() {
            let state = history.state(at: start)
            let end = index + 1 < points.count ? points[index + 1] : nil
            if let last = spans.last, last.state == state, last.end == start {
                spans[spans.count - 1].end = end
            } else {
                spans.append(SubscriptionSpan(start: start, end: end, state: state))
            }
        }
        return spans.filter { $0.state != .inactive }.map {
            IndexedSpan(store: history.store, subscription: history.id, plan: history.plan, span: $0)
        }
    }
}

/// What a group of subscriptions adds to the overview: how many pay, their MRR (one currency,
/// minor units) and how many are in a trial.
public struct MetricsTally: Sendable, Equatable, AdditiveArithmetic {
    public var paying: Int64 = 0
    public var mrr: Int64 = 0
    public var trials: Int64 = 0

    public init(paying: Int64 = 0, mrr: Int64 = 0, trials: Int64 = 0) {
        self.paying = paying
        self.mrr = mrr
        self.trials = trials
    }

    /// One subscription in `state`.
    public init(_ state: SubscriptionState) {
        switch state {
        case .paying(_, let monthly): self.init(paying: 1, mrr: monthly)
        case .trial: self.init(trials: 1)
        case .inactive: self.init()
        }
    }

    public var isZero: Bool { self == .zero }

    public static var zero: MetricsTally { MetricsTally() }
    public static func + (lhs: Self, rhs: Self) -> Self {
        Self(paying: lhs.paying + rhs.paying, mrr: lhs.mrr + rhs.mrr, trials: lhs.trials + rhs.trials)
    }
    public static func - (lhs: Self, rhs: Self) -> Self {
        Self(paying: lhs.paying - rhs.paying, mrr: lhs.mrr - rhs.mrr, trials: lhs.trials - rhs.trials)
    }
}

/// The group a tally counts: a store, a plan (nil: the subscription maps to none) and the
/// currency of the MRR (nil for trials, which have none).
public struct MetricsTallyKey: Sendable, Hashable {
    public var store: MetricsStore
    public var plan: String?
    public var currency: String?

    public init(store: MetricsStore, plan: String?, currency: String?) {
        self.store = store
        self.plan = plan
        self.currency = currency
    }

    init(_ span: IndexedSpan) {
        var currency: String?
        if case .paying(let code, _) = span.span.state { currency = code }
        self.init(store: span.store, plan: span.plan, currency: currency)
    }
}

/// A tally's group on one UTC day: what the spans that start or end that day change.
public struct MetricsDayKey: Sendable, Hashable {
    /// The day's first second (Unix, a multiple of 86,400).
    public var day: Int64
    public var key: MetricsTallyKey

    public init(day: Int64, key: MetricsTallyKey) {
        self.day = day
        self.key = key
    }
}

/// The pure parts of the metrics index (issue 32). The index keeps every subscription's spans,
/// and per UTC day and group the change those spans make to the overview: +1 subscription and
/// its amount on the day a paying span starts, −1 and the amount on the day it ends. The overview
/// at an instant is then the sum of the days before the instant's day, plus the spans that start
/// or end on its day up to the instant: a few thousand rows, whatever the ledger's size. Movement
/// and churn over a range need only the subscriptions whose state changed in it (a span starting
/// or ending inside it), with the overview at both ends for the rest.
public enum MetricsIndexing {
    public static let secondsPerDay: Int64 = 86_400
    /// The rules' version: raise it when a change to how histories are made (``SubscriptionHistory``)
    /// would give other spans from the same facts, and every index is rebuilt once.
    public static let version = 1

    /// The first second of the UTC day holding `instant`.
    public static func dayStart(_ instant: Int64) -> Int64 {
        let remainder = instant % secondsPerDay
        return instant - (remainder < 0 ? remainder + secondsPerDay : remainder)
    }

    /// What `spans` change per day and group: each span adds its tally on the day it starts and
    /// takes it away on the day it ends. Groups that net to zero are left out.
    public static func dayChanges(of spans: [IndexedSpan]) -> [MetricsDayKey: MetricsTally] {
        var changes: [MetricsDayKey: MetricsTally] = [:]
        for span in spans {
            let tally = MetricsTally(span.span.state)
            let key = MetricsTallyKey(span)
            changes[MetricsDayKey(day: dayStart(span.span.start), key: key), default: .zero] += tally
            if let end = span.span.end {
                changes[MetricsDayKey(day: dayStart(end), key: key), default: .zero] -= tally
            }
        }
        return changes.filter { !$0.value.isZero }
    }

    /// What replacing `old` spans with `new` ones changes per day and group.
    public static func dayChanges(replacing old: [IndexedSpan], with new: [IndexedSpan]) -> [MetricsDayKey: MetricsTally] {
        var changes = dayChanges(of: new)
        for (key, tally) in dayChanges(of: old) {
            changes[key, default: .zero] -= tally
        }
        return changes.filter { !$0.value.isZero }
    }

    /// What spans change in `[from, through]`, per group: a span's tally on its start, less it on
    /// its end, for the starts and ends inside the range (others are ignored). Spans are added one
    /// at a time, as a store reads them, so that a day on which a million subscriptions began
    /// costs the groups' tallies, never the million spans at once.
    public struct BoundaryChanges: Sendable {
        public let from: Int64
        public let through: Int64
        public private(set) var tallies: [MetricsTallyKey: MetricsTally] = [:]

        public init(from: Int64, through: Int64) {
            self.from = from
            self.through = through
        }

        public mutating func add(_ span: IndexedSpan) {
            let tally = MetricsTally(span.span.state)
            let key = MetricsTallyKey(span)
            if from <= span.span.start, span.span.start <= through { tallies[key, default: .zero] += tally }
            if let end = span.span.end, from <= end, end <= through { tallies[key, default: .zero] -= tally }
        }
    }

    /// The overview at `instant` from the sums of the day changes before its day (`before`, per
    /// group) and the spans with a start or an end on its day (`sameDay`; others are ignored).
    public static func overview(before sums: [MetricsTallyKey: MetricsTally], sameDay spans: [IndexedSpan], at instant: Int64) -> MetricsOverview {
        var changes = BoundaryChanges(from: dayStart(instant), through: instant)
        for span in spans { changes.add(span) }
        return overview(before: sums, sameDayChanges: changes.tallies, at: instant)
    }

    /// The overview at `instant` from the sums of the day changes before its day (`before`, per
    /// group) and what the spans starting or ending on its day up to `instant` change
    /// (``BoundaryChanges`` from the day's first second through `instant`).
    public static func overview(
        before sums: [MetricsTallyKey: MetricsTally], sameDayChanges: [MetricsTallyKey: MetricsTally], at instant: Int64
    ) -> MetricsOverview {
        var tallies = sums
        for (key, tally) in sameDayChanges { tallies[key, default: .zero] += tally }
        var overview = MetricsOverview(at: instant)
        for (key, tally) in tallies.sorted(by: { ($0.key.store.rawValue, $0.key.plan ?? "", $0.key.currency ?? "") < ($1.key.store.rawValue, $1.key.plan ?? "", $1.key.currency ?? "") }) {
            overview.activeTrials[key.store] += tally.trials
            guard tally.paying != 0 || tally.mrr != 0 else { continue }
            overview.activeSubscriptions[key.store] += tally.paying
            overview.byStoreAndPlan[MetricsOverview.StorePlan(store: key.store, plan: key.plan), default: 0] += tally.paying
            if let currency = key.currency {
                overview.mrr[currency, default: StoreSplit()][key.store] += tally.mrr
            }
            if let plan = key.plan {
                overview.byPlan[plan, default: .init()].activeSubscriptions += tally.paying
                if let currency = key.currency {
                    overview.byPlan[plan, default: .init()].mrr[currency, default: 0] += tally.mrr
                }
            }
        }
        overview.byStoreAndPlan = overview.byStoreAndPlan.filter { $0.value != 0 }
        return overview
    }

    /// MRR movement over `[from, to)` from the overviews at both ends and the histories of the
    /// subscriptions whose state changed in between (a span starting or ending in `(from, to]`):
    /// every other subscription adds the same to the start and the end and nothing else.
    public static func movement(start: MetricsOverview, end: MetricsOverview, changed: [SubscriptionHistory], from: Int64, to: Int64) -> [String: MRRMovement] {
        var movements = RevenueMetrics.movement(changed, from: from, to: to)
        for currency in Set(start.mrr.keys).union(end.mrr.keys).union(movements.keys) {
            movements[currency, default: .init()].start = start.mrr[currency]?.total ?? 0
            movements[currency, default: .init()].end = end.mrr[currency]?.total ?? 0
        }
        return movements.filter { $0.value != MRRMovement() }
    }

    /// Churn over `[from, to)`: the subscriptions paying at `from` (the overview there), and of
    /// those whose state changed in the range, the ones not paying at `to`.
    public static func churn(start: MetricsOverview, changed: [SubscriptionHistory], from: Int64, to: Int64) -> StoreSplit<ChurnFigures> {
        var churn = RevenueMetrics.churn(changed, from: from, to: to)
        for store in MetricsStore.allCases {
            churn[store].atStart = start.activeSubscriptions[store]
        }
        return churn
    }
}

extension MetricsOverview {
    /// A store and a plan (nil: none of the catalog's), for the active subscriptions per both.
    public struct StorePlan: Sendable, Hashable {
        public var store: MetricsStore
        public var plan: String?

        public init(store: MetricsStore, plan: String?) {
            self.store = store
            self.plan = plan
        }
    }
}

extension PlanCatalog {
    /// What the metrics index depends on in the catalog, as a SHA-256 (hex): which plan each
    /// Stripe price, lookup key and product and each App Store product names, and the App Store
    /// products' periods. The index is rebuilt when it changes; names, limits and features do not
    /// matter to it. ``MetricsIndexing/version`` is part of it, so that a billingd whose rules
    /// changed rebuilds the index too.
    public var metricsFingerprint: String {
        var text = "metrics-index \(MetricsIndexing.version)\n"
        for tier in tiers {
            text += "tier \(tier.id)\n"
            for price in tier.prices { text += "price \(price.id ?? "") \(price.lookupKey ?? "")\n" }
            for product in tier.products { text += "product \(product)\n" }
            for product in tier.appStoreProducts {
                text += "app_store \(product) \(tier.appStorePeriods[product]?.rawValue ?? "")\n"
            }
        }
        return SHA256.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
