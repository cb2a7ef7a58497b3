/// A figure per store and in total.
public struct StoreSplit<Value: Sendable & Equatable & AdditiveArithmetic>: Sendable, Equatable {
    public var stripe: Value = .zero
    public var appStore: Value = .zero
    public var total: Value { stripe + appStore }

    public init(stripe: Value = .zero, appStore: Value = .zero) {
        self.stripe = stripe
        self.appStore = appStore
    }

    public subscript(store: MetricsStore) -> Value {
        get { store == .stripe ? stripe : appStore }
        set {
            if store == .stripe { stripe = newValue } else { appStore = newValue }
        }
    }
}

/// The figures at one instant: MRR per currency (never summed across currencies), active
/// subscriptions and trials, and both by plan.
public struct MetricsOverview: Sendable, Equatable {
    public var at: Int64
    /// Minor units per currency, per store.
    public var mrr: [String: StoreSplit<Int64>] = [:]
    public var activeSubscriptions = StoreSplit<Int64>()
    public var activeTrials = StoreSplit<Int64>()
    public var byPlan: [String: PlanFigures] = [:]
    /// Active subscriptions per store and plan (the `billingd_active_subscriptions` gauge's labels).
    public var byStoreAndPlan: [StorePlan: Int64] = [:]

    public struct PlanFigures: Sendable, Equatable {
        public var activeSubscriptions: Int64 = 0
        public var mrr: [String: Int64] = [:]
    }
}

/// How MRR moved in one currency over `[from, to)`. The identity holds to the minor unit:
/// `end − start = new + reactivation + expansion − contraction − churned`.
public struct MRRMovement: Sendable, Equatable {
    public var start: Int64 = 0
    public var end: Int64 = 0
    /// Paying at the end, never paying at or before the start.
    public var new: Int64 = 0
    /// Paying at the end, not at the start, paying some time before the start.
    public var reactivation: Int64 = 0
    /// Paying at both, more at the end.
    public var expansion: Int64 = 0
    /// Paying at both, less at the end (a positive amount).
    public var contraction: Int64 = 0
    /// Paying at the start, not at the end (a positive amount).
    public var churned: Int64 = 0

    public init(start: Int64 = 0, end: Int64 = 0, new: Int64 = 0, reactivation: Int64 = 0, expansion: Int64 = 0, contraction: Int64 = 0, churned: Int64 = 0) {
        self.start = start
        self.end = end
        self.new = new
        self.reactivation = reactivation
        self.expansion = expansion
        self.contraction = contraction
        self.churned = churned
    }

    /// Whether the identity holds.
    public var balances: Bool { end - start == new + reactivation + expansion - contraction - churned }
}

/// Subscriptions paying at the start of a range, and those of them not paying at its end.
public struct ChurnFigures: Sendable, Equatable, AdditiveArithmetic {
    public var atStart: Int64 = 0
    public var churned: Int64 = 0

    public init(atStart: Int64 = 0, churned: Int64 = 0) {
        self.atStart = atStart
        self.churned = churned
    }

    /// churned ÷ paying at the start; nil when none paid at the start.
    public var rate: Double? { atStart == 0 ? nil : Double(churned) / Double(atStart) }

    public static var zero: ChurnFigures { ChurnFigures() }
    public static func + (lhs: Self, rhs: Self) -> Self { Self(atStart: lhs.atStart + rhs.atStart, churned: lhs.churned + rhs.churned) }
    public static func - (lhs: Self, rhs: Self) -> Self { Self(atStart: lhs.atStart - rhs.atStart, churned: lhs.churned - rhs.churned) }
}

/// Trials started in a range: `converted + abandoned + pending = started`.
public struct TrialFigures: Sendable, Equatable, AdditiveArithmetic {
    public var started: Int64 = 0
    /// Paying after the trial (and the first paid period not refunded).
    public var converted: Int64 = 0
    /// Ended without paying.
    public var abandoned: Int64 = 0
    /// Still in trial.
    public var pending: Int64 = 0

    public init(started: Int64 = 0, converted: Int64 = 0, abandoned: Int64 = 0, pending: Int64 = 0) {
        self.started = started
        self.converted = converted
        self.abandoned = abandoned
        self.pending = pending
    }

    public static var zero: TrialFigures { TrialFigures() }
    public static func + (lhs: Self, rhs: Self) -> Self {
        Self(started: lhs.started + rhs.started, converted: lhs.converted + rhs.converted, abandoned: lhs.abandoned + rhs.abandoned, pending: lhs.pending + rhs.pending)
    }
    public static func - (lhs: Self, rhs: Self) -> Self {
        Self(started: lhs.started - rhs.started, converted: lhs.converted - rhs.converted, abandoned: lhs.abandoned - rhs.abandoned, pending: lhs.pending - rhs.pending)
    }
}

/// The revenue metrics over subscription histories. Every figure is a function of the histories
/// and the instants asked about, so it is the same whichever order the facts arrived in, and
/// `billingd replay` (which rebuilds the facts) gives it again.
public enum RevenueMetrics {
    /// MRR, active subscriptions and trials at `instant`.
    public static func overview(_ histories: some Sequence<SubscriptionHistory>, at instant: Int64) -> MetricsOverview {
        var overview = MetricsOverview(at: instant)
        for history in histories {
            switch history.state(at: instant) {
            case .paying(let currency, let monthly):
                overview.mrr[currency, default: StoreSplit()][history.store] += monthly
                overview.activeSubscriptions[history.store] += 1
                overview.byStoreAndPlan[MetricsOverview.StorePlan(store: history.store, plan: history.plan), default: 0] += 1
                if let plan = history.plan {
                    overview.byPlan[plan, default: .init()].activeSubscriptions += 1
                    overview.byPlan[plan, default: .init()].mrr[currency, default: 0] += monthly
                }
            case .trial:
                overview.activeTrials[history.store] += 1
            case .inactive:
                break
            }
        }
        return overview
    }

    /// MRR movement over `[from, to)`, per currency. A subscription that changes currency
    /// while paying churns in the old one and reactivates in the new.
    public static func movement(_ histories: some Sequence<SubscriptionHistory>, from: Int64, to: Int64) -> [String: MRRMovement] {
        var movements: [String: MRRMovement] = [:]
        for history in histories {
            let before = history.state(at: from)
            let after = history.state(at: to)
            if case .paying(let currency, let monthly) = before {
                movements[currency, default: .init()].start += monthly
            }
            if case .paying(let currency, let monthly) = after {
                movements[currency, default: .init()].end += monthly
            }
            switch (before, after) {
            case (.paying(let old, let was), .paying(let new, let now)) where old == new:
                if now > was { movements[new, default: .init()].expansion += now - was }
                if now < was { movements[new, default: .init()].contraction += was - now }
            case (.paying(let old, let was), .paying(let new, let now)):
                movements[old, default: .init()].churned += was
                movements[new, default: .init()].reactivation += now
            case (.paying(let currency, let was), _):
                movements[currency, default: .init()].churned += was
            case (_, .paying(let currency, let now)):
                if history.paid(before: from) {
                    movements[currency, default: .init()].reactivation += now
                } else {
                    movements[currency, default: .init()].new += now
                }
            default:
                break
            }
        }
        return movements
    }

    /// Churn over `[from, to)`: of the subscriptions paying at `from`, those not paying at `to`.
    public static func churn(_ histories: some Sequence<SubscriptionHistory>, from: Int64, to: Int64) -> StoreSplit<ChurnFigures> {
        var churn = StoreSplit<ChurnFigures>()
        for history in histories where history.state(at: from).isPaying {
            churn[history.store].atStart += 1
            if !history.state(at: to).isPaying { churn[history.store].churned += 1 }
        }
        return churn
    }

    /// Trials started in `[from, to)`, judged at `now`: converted if the subscription paid after
    /// the trial by `now`, pending if the trial still runs at `now`, abandoned otherwise.
    public static func trials(_ histories: some Sequence<SubscriptionHistory>, from: Int64, to: Int64, now: Int64) -> StoreSplit<TrialFigures> {
        var judged: [JudgedTrial] = []
        for history in histories {
            for trial in history.trials where from <= trial.start && trial.start < to && trial.start <= now {
                judged.append(JudgedTrial(store: history.store, trial: trial, stateNow: history.state(at: now)))
            }
        }
        return trials(judged, now: now)
    }

    /// The figures of trials already chosen (started in the range, by `now`), each with its
    /// subscription's state at `now`.
    public static func trials(_ judged: [JudgedTrial], now: Int64) -> StoreSplit<TrialFigures> {
        var trials = StoreSplit<TrialFigures>()
        for entry in judged {
            trials[entry.store].started += 1
            if let converted = entry.trial.convertedAt, converted <= now {
                trials[entry.store].converted += 1
            } else if entry.stateNow == .trial || entry.trial.end.map({ now < $0 }) ?? false {
                trials[entry.store].pending += 1
            } else {
                trials[entry.store].abandoned += 1
            }
        }
        return trials
    }
}

/// A trial with its subscription's store and state at the instant it is judged.
public struct JudgedTrial: Sendable, Equatable {
    public var store: MetricsStore
    public var trial: TrialRecord
    public var stateNow: SubscriptionState

    public init(store: MetricsStore, trial: TrialRecord, stateNow: SubscriptionState) {
        self.store = store
        self.trial = trial
        self.stateNow = stateNow
    }
}
