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

    /// Every subscription's history in the scope.
    public func histories() async throws -> [SubscriptionHistory] {
        async let stripe = facts.stripeSubscriptions(scope: configuration.scope)
        async let appStore = facts.appStoreSubscriptions(environments: appStoreEnvironments)
        return SubscriptionHistory.histories(stripe: try await stripe, appStore: try await appStore, catalog: configuration.catalog)
    }

    /// MRR, active subscriptions and trials at `at`, with the reporting total when configured.
    public func overview(at: Int64) async throws -> OverviewAnswer {
        Self.overview(of: try await histories(), at: at, exchangeRates: configuration.exchangeRates)
    }

    static func overview(of histories: [SubscriptionHistory], at: Int64, exchangeRates: ExchangeRates?) -> OverviewAnswer {
        let figures = RevenueMetrics.overview(histories, at: at)
        let reporting = exchangeRates.map { rates in
            let total = rates.total(of: figures.mrr.mapValues(\.total), at: at)
            return ReportingTotal(currency: rates.reportingCurrency, mrr: total.amount, missingRates: total.missingRates)
        }
        return OverviewAnswer(figures: figures, reporting: reporting)
    }

    public func movement(_ range: MetricsRange) async throws -> [String: MRRMovement] {
        RevenueMetrics.movement(try await histories(), from: range.from, to: range.to)
    }

    public func churn(_ range: MetricsRange) async throws -> StoreSplit<ChurnFigures> {
        RevenueMetrics.churn(try await histories(), from: range.from, to: range.to)
    }

    /// Trials started in the range, judged now.
    public func trials(_ range: MetricsRange) async throws -> StoreSplit<TrialFigures> {
        let now = Int64(configuration.now().timeIntervalSince1970)
        return RevenueMetrics.trials(try await histories(), from: range.from, to: range.to, now: now)
    }

    public func revenue(_ range: MetricsRange, interval: MetricsInterval) async throws -> [RevenueBucket] {
        let entries = try await facts.revenueEntries(
            scope: configuration.scope, appStoreEnvironments: appStoreEnvironments, from: range.from, to: range.to)
        return RevenueMetrics.revenue(entries, from: range.from, to: range.to, interval: interval)
    }

    /// The overview at each boundary of `interval` in the range (see ``MetricsInterval/boundaries(from:to:)``).
    public func series(_ range: MetricsRange, interval: MetricsInterval) async throws -> [OverviewAnswer] {
        let histories = try await histories()
        return interval.boundaries(from: range.from, to: range.to).map {
            Self.overview(of: histories, at: $0, exchangeRates: configuration.exchangeRates)
        }
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
