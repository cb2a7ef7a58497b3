import BillingCore
import BillingStore
import Foundation

/// The revenue metrics of one mode, as `GET /v1/metrics/…` and `billingd metrics` answer them:
/// the ledger's facts of the scope (Stripe's test or live data, and the App Store environment of
/// that mode: Production for live, Sandbox for test) made into histories with the plan catalog,
/// and the figures of ``RevenueMetrics`` over them. Every figure is computed from the facts as
/// the ledger holds them now, so a late event corrects the past.
public struct RevenueMetricsReader: Sendable {
    public struct Configuration: Sendable {
        /// Stripe's mode and account; the App Store environment follows the mode.
        public var scope: ServiceScope
        /// Plan names and App Store products' periods.
        public var catalog: PlanCatalog
        /// The reporting currency and its rates; nil: figures per currency only.
        public var exchangeRates: ExchangeRates?
        /// The most buckets of a revenue answer, or points of a series.
        public var maximumPoints: Int
        /// The instant a trial is judged at (pending or abandoned).
        public var now: @Sendable () -> Date

        public init(
            scope: ServiceScope, catalog: PlanCatalog = .freeOnly, exchangeRates: ExchangeRates? = nil, maximumPoints: Int = 1000,
            now: @escaping @Sendable () -> Date = Date.init
        ) {
            self.scope = scope
            self.catalog = catalog
            self.exchangeRates = exchangeRates
            self.maximumPoints = maximumPoints
            self.now = now
        }
    }

    let facts: any MetricsFactStore
    public let configuration: Configuration

    public init(facts: any MetricsFactStore, configuration: Configuration) {
        self.facts = facts
        self.configuration = configuration
    }

    /// The App Store environment of the scope's mode.
    public var appStoreEnvironments: [String] {
        [configuration.scope.livemode ? AppStoreEnvironment.production.rawValue : AppStoreEnvironment.sandbox.rawValue]
    }

    /// Whose subscriptions the figures count.
    public var scope: MetricsScope {
        MetricsScope(stripe: configuration.scope, appStoreEnvironments: appStoreEnvironments)
    }

    /// The metrics index of the scope, up to date with the ledger's facts: the overview, movement,
    /// churn, trials and series read it (see ``MetricsIndexing``), so their cost follows the days
    /// and the subscriptions that changed, not the ledger's size.
    public func index() async throws -> any MetricsIndexReads {
        try await facts.metricsIndex(scope, catalog: configuration.catalog)
    }

    /// MRR, active subscriptions and trials at `at`, with the reporting total when configured.
    public func overview(at: Int64) async throws -> OverviewAnswer {
        answer(try await index().overview(at: at))
    }

    /// The overview's figures with the reporting total when configured.
    func answer(_ figures: MetricsOverview) -> OverviewAnswer {
        let reporting = configuration.exchangeRates.map { rates in
            let total = rates.total(of: figures.mrr.mapValues(\.total), at: figures.at)
            return ReportingTotal(currency: rates.reportingCurrency, mrr: total.amount, missingRates: total.missingRates)
        }
        return OverviewAnswer(figures: figures, reporting: reporting)
    }

    public func movement(_ range: MetricsRange) async throws -> [String: MRRMovement] {
        try await Self.movement(index(), range)
    }

    static func movement(_ index: any MetricsIndexReads, _ range: MetricsRange) async throws -> [String: MRRMovement] {
        async let start = index.overview(at: range.from)
        async let end = index.overview(at: range.to)
        async let changed = index.changedHistories(after: range.from, through: range.to)
        return MetricsIndexing.movement(start: try await start, end: try await end, changed: try await changed, from: range.from, to: range.to)
    }

    public func churn(_ range: MetricsRange) async throws -> StoreSplit<ChurnFigures> {
        try await Self.churn(index(), range)
    }

    static func churn(_ index: any MetricsIndexReads, _ range: MetricsRange) async throws -> StoreSplit<ChurnFigures> {
        async let start = index.overview(at: range.from)
        async let changed = index.changedHistories(after: range.from, through: range.to)
        return MetricsIndexing.churn(start: try await start, changed: try await changed, from: range.from, to: range.to)
    }

    /// Trials started in the range, judged now.
    public func trials(_ range: MetricsRange) async throws -> StoreSplit<TrialFigures> {
        try await Self.trials(index(), range, now: Int64(configuration.now().timeIntervalSince1970))
    }

    static func trials(_ index: any MetricsIndexReads, _ range: MetricsRange, now: Int64) async throws -> StoreSplit<TrialFigures> {
        RevenueMetrics.trials(try await index.trials(from: range.from, to: range.to, now: now), now: now)
    }

    public func revenue(_ range: MetricsRange, interval: MetricsInterval) async throws -> [RevenueBucket] {
        try await facts.revenue(
            scope: configuration.scope, appStoreEnvironments: appStoreEnvironments,
            into: RevenueTally(from: range.from, to: range.to, interval: interval)
        ).buckets
    }

    /// The overview at each boundary of `interval` in the range (see ``MetricsInterval/boundaries(from:to:)``).
    public func series(_ range: MetricsRange, interval: MetricsInterval) async throws -> [OverviewAnswer] {
        let index = try await index()
        var answers: [OverviewAnswer] = []
        for boundary in interval.boundaries(from: range.from, to: range.to) {
            answers.append(answer(try await index.overview(at: boundary)))
        }
        return answers
    }

    /// Checks a range's buckets (revenue) or points (series) against ``Configuration/maximumPoints``
    /// before any is computed.
    public func checkPoints(_ range: MetricsRange, interval: MetricsInterval, series: Bool) throws(MetricsParameterError) {
        var count = 0
        if series {
            var boundary = interval.bucketStart(containing: range.from)
            if boundary < range.from { boundary = interval.next(after: boundary) }
            while boundary <= range.to, count <= configuration.maximumPoints {
                count += 1
                boundary = interval.next(after: boundary)
            }
        } else {
            var start = range.from
            while start < range.to, count <= configuration.maximumPoints {
                count += 1
                start = interval.next(after: interval.bucketStart(containing: start))
            }
        }
        guard count <= configuration.maximumPoints else {
            throw MetricsParameterError(
                "interval",
                "from \(range.from) to \(range.to) by \(interval.rawValue) gives more than \(configuration.maximumPoints) \(series ? "points" : "buckets"), the most one answer holds; ask for a longer interval or a shorter range")
        }
    }
}

/// `[from, to)` in Unix seconds, `from` before `to`.
public struct MetricsRange: Sendable, Equatable {
    public let from: Int64
    public let to: Int64

    public init(from: Int64, to: Int64) throws(MetricsParameterError) {
        guard from < to else {
            throw MetricsParameterError("from", "from (\(from)) must be before to (\(to))")
        }
        self.from = from
        self.to = to
    }
}

/// A metrics parameter that is missing or malformed: which, and what it takes.
public struct MetricsParameterError: Error, Sendable, Equatable, CustomStringConvertible {
    public let parameter: String
    public let message: String

    public init(_ parameter: String, _ message: String) {
        self.parameter = parameter
        self.message = message
    }

    public var description: String { message }
}

/// The overview's figures and, with a reporting currency, their total in it.
public struct OverviewAnswer: Sendable, Equatable {
    public var figures: MetricsOverview
    public var reporting: ReportingTotal?
}

/// MRR in the reporting currency: the currencies with a rate converted exactly and summed, the
/// sum rounded once; the currencies without one named, never guessed.
public struct ReportingTotal: Sendable, Equatable {
    public var currency: String
    public var mrr: Int64
    public var missingRates: [String]
}

/// What a series follows.
public enum MetricsSeriesMetric: String, Sendable, CaseIterable {
    case mrr
    case activeSubscriptions = "active_subscriptions"
    case activeTrials = "active_trials"
}
