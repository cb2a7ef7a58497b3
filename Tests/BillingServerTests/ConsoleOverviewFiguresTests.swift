import BillingCore
import BillingStore
import Foundation
import Logging
import Synchronization
import Testing

@testable import BillingServer

/// Facts that a test swaps, as a ledger the applier writes to.
final class ChangingMetricsFacts: MetricsFactStore {
    private let facts: Mutex<InMemoryMetricsFacts>

    init(_ facts: InMemoryMetricsFacts) {
        self.facts = Mutex(facts)
    }

    func replace(with facts: InMemoryMetricsFacts) {
        self.facts.withLock { $0 = facts }
    }

    func stripeSubscriptions(scope: ServiceScope) async throws -> [StripeSubscriptionFacts] {
        try await facts.withLock { $0 }.stripeSubscriptions(scope: scope)
    }

    func appStoreSubscriptions(environments: [String]) async throws -> [AppStoreSubscriptionFacts] {
        try await facts.withLock { $0 }.appStoreSubscriptions(environments: environments)
    }

    func revenueEntries(scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64) async throws -> [RevenueEntry] {
        try await facts.withLock { $0 }.revenueEntries(scope: scope, appStoreEnvironments: appStoreEnvironments, from: from, to: to)
    }
}

/// A clock a test moves by hand.
final class OverviewClock: Sendable {
    private let seconds: Mutex<Int64>

    init(_ seconds: Int64) {
        self.seconds = Mutex(seconds)
    }

    func advance(_ by: Int64) {
        seconds.withLock { $0 += by }
    }

    var now: Int64 { seconds.withLock { $0 } }
    var date: @Sendable () -> Date { { [self] in Date(timeIntervalSince1970: TimeInterval(now)) } }
}

@Suite("The console overview's kept figures: served as of their computation, recomputed after the ledger changed at most every interval")
struct ConsoleOverviewFiguresTests {
    /// The scenario's facts with nothing in them yet, a clock on day 40, and figures kept over them.
    func kept(_ configuration: ConsoleOverviewFigures.Configuration = .init()) throws -> (ChangingMetricsFacts, OverviewClock, ConsoleOverviewFigures) {
        let facts = ChangingMetricsFacts(InMemoryMetricsFacts())
        let clock = OverviewClock(MetricsScenario.d(40))
        let reader = RevenueMetricsReader(facts: facts, configuration: .init(scope: .test, catalog: try MetricsScenario.catalog, now: clock.date))
        return (facts, clock, ConsoleOverviewFigures(reader: reader, configuration: configuration))
    }

    @Test("The first visit waits for the figures, which are the metrics API's at that instant")
    func firstVisit() async throws {
        let (facts, clock, figures) = try kept()
        facts.replace(with: try MetricsScenario.facts)
        let seen = try await figures.visit()
        let reader = RevenueMetricsReader(facts: try MetricsScenario.facts, configuration: .init(scope: .test, catalog: try MetricsScenario.catalog))
        let now = clock.now
        let range = try MetricsRange(from: now - 30 * 86_400, to: now)
        #expect(seen.asOf == now)
        #expect(seen.overview == (try await reader.overview(at: now)))
        #expect(!seen.overview.figures.mrr.isEmpty)
        #expect(seen.movement == (try await reader.movement(range)))
        #expect(seen.churn == (try await reader.churn(range)))
        #expect(seen.points.count == 13, "12 month starts and now")
        #expect(seen.points.last?.figures == seen.overview.figures)
        #expect(figures.computations == 1)
    }

    @Test("A change is served after the interval has passed since the last computation, not before; without a change, after the maximum age")
    func recomputedAfterChanges() async throws {
        let (facts, clock, figures) = try kept()
        let empty = try await figures.visit()
        #expect(empty.overview.figures.mrr.isEmpty)

        facts.replace(with: try MetricsScenario.facts)
        figures.changed()
        clock.advance(30)
        #expect(try await figures.visit() == empty, "within the interval the last figures are served")
        #expect(figures.computations == 1)

        clock.advance(30)
        let changed = try await figures.visit()
        #expect(changed.asOf == MetricsScenario.d(40) + 60)
        #expect(!changed.overview.figures.mrr.isEmpty, "the change is in the figures")
        #expect(figures.computations == 2)

        clock.advance(240)
        #expect(try await figures.visit() == changed, "no change, younger than the maximum age: kept")
        clock.advance(60)
        #expect(try await figures.visit().asOf == MetricsScenario.d(40) + 360, "five minutes old: recomputed")
        #expect(figures.computations == 3)
    }

    @Test("In serve the revenue gauges recompute due figures with their own index and overview; a visit that finds them due wakes them and is served the last figures")
    func recomputedByTheGauges() async throws {
        let (facts, clock, figures) = try kept()
        let reader = figures.reader
        let gauges = RevenueGauges(reader: reader, consoleOverview: figures, metrics: BillingMetrics(), logger: Logger(label: "test"))
        await gauges.recompute(at: clock.now)
        #expect(figures.computations == 1, "computed before the first visit")
        let first = try await figures.visit()
        #expect(first.asOf == MetricsScenario.d(40))

        let wakes = Mutex(0)
        figures.setWake { wakes.withLock { $0 += 1 } }
        facts.replace(with: try MetricsScenario.facts)
        gauges.changed()
        clock.advance(10)
        await gauges.recompute(at: clock.now)
        #expect(figures.computations == 1, "the gauges recompute at most every interval")
        clock.advance(60)
        #expect(try await figures.visit() == first, "a visit never waits for a recomputation")
        #expect(wakes.withLock { $0 } == 1, "it asked the gauges for one")
        await gauges.recompute(at: clock.now)
        #expect(figures.computations == 2)
        let second = try await figures.visit()
        #expect(second.asOf == MetricsScenario.d(40) + 70 && !second.overview.figures.mrr.isEmpty)
    }

    @Test("The gauges leave the figures alone once nobody visited the console for the idle time")
    func idle() async throws {
        var configuration = ConsoleOverviewFigures.Configuration()
        configuration.idle = 600
        let (_, clock, figures) = try kept(configuration)
        let gauges = RevenueGauges(reader: figures.reader, consoleOverview: figures, metrics: BillingMetrics(), logger: Logger(label: "test"))
        _ = try await figures.visit()
        clock.advance(300)
        await gauges.recompute(at: clock.now)
        #expect(figures.computations == 2, "visited 5 minutes ago, five minutes old: recomputed")
        clock.advance(600)
        await gauges.recompute(at: clock.now)
        #expect(figures.computations == 2, "not visited for 15 minutes: left alone")
    }
}

@Suite("Console errors in one line")
struct ConsoleErrorSummaryTests {
    @Test("A database error loses the statement it quotes; a long or several-line error is cut to one line with the whole text behind it")
    func summaries() {
        let sqlite = "SQLite error 13: database or disk is full - while executing `INSERT INTO invoice (account, livemode, id) VALUES (?, ?, ?)`"
        #expect(ConsolePages.summary(of: sqlite) == "SQLite error 13: database or disk is full")
        #expect(ConsolePages.summary(of: "first line\nsecond line") == "first line")
        let long = String(repeating: "word ", count: 60)
        #expect(ConsolePages.summary(of: long).count == 120 && ConsolePages.summary(of: long).hasSuffix("…"))
        #expect(ConsolePages.errorSummary("Stripe answered 401").text == "<span class=\"error\">Stripe answered 401</span>", "a short error stays as it is")
        let shown = ConsolePages.errorSummary(sqlite).text
        #expect(shown.hasPrefix("<details class=\"error\"><summary>SQLite error 13: database or disk is full</summary><pre>"))
        #expect(shown.contains("INSERT INTO invoice"), "the whole error is one click away")
        #expect(ConsolePages.errorSummary(nil) == .empty)
        #expect(!ConsolePages.errorSummary("<b>x</b>\ny").text.contains("<b>"), "escaped")
    }
}
