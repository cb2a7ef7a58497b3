import BillingCore
import BillingSamples
import BillingStore
import Foundation
import Testing

/// The metrics index the ledger keeps (spans, day sums, trials, refreshed from the marks its
/// triggers make) against the reference: the same figures computed from every fact in memory.
@Suite("Metrics index, on both backends")
struct MetricsIndexTests {
    typealias S = MetricsScenario

    static let scope = MetricsScope(stripe: ServiceScope(livemode: false), appStoreEnvironments: ["Sandbox"])

    static func catalog(_ json: String) throws -> PlanCatalog {
        try PlanCatalog(document: JSONDecoder().decode(PlanCatalogDocument.self, from: Data(json.utf8)))
    }

    /// Pro by price and App Store product.
    static var byPrice: PlanCatalog {
        get throws {
            try catalog("""
                {"tiers": [{"id": "free", "name": "Free", "rank": 0},
                  {"id": "pro", "name": "Pro", "rank": 10, "stripe": {"prices": [{"id": "price_pro"}, {"id": "price_pro_yearly"}]},
                   "app_store": {"products": ["com.example.pro.monthly"]}}]}
                """)
        }
    }

    /// The yearly price is Team's, and the App Store product a yearly one: other plans, other
    /// amounts per month.
    static var otherPlans: PlanCatalog {
        get throws {
            try catalog("""
                {"tiers": [{"id": "free", "name": "Free", "rank": 0},
                  {"id": "pro", "name": "Pro", "rank": 10, "stripe": {"prices": [{"id": "price_pro"}]}},
                  {"id": "team", "name": "Team", "rank": 20, "stripe": {"prices": [{"id": "price_pro_yearly"}]},
                   "app_store": {"products": [{"id": "com.example.pro.monthly", "period": "P1Y"}]}}]}
                """)
        }
    }

    /// Instants around every event of the scenario (a second before, at, after, and the same
    /// day's noon), and the day starts between: where the day sums and a day's own spans meet.
    static let instants: [Int64] = {
        var instants = Set<Int64>()
        for day in Int64(-2)...75 {
            for base in [S.t0 + day * S.day, (S.a0 + day * S.appStoreDay) / 1000] {
                for offset: Int64 in [-1, 0, 1, 43_200] { instants.insert(base + offset) }
                instants.insert(MetricsIndexing.dayStart(base))
            }
        }
        return instants.sorted()
    }()

    /// The in-memory reference of the ledger's facts.
    static func reference(_ store: any MetricsFactStore, catalog: PlanCatalog) async throws -> HistoryMetricsIndex {
        HistoryMetricsIndex(SubscriptionHistory.histories(
            stripe: try await store.stripeSubscriptions(scope: scope.stripe),
            appStore: try await store.appStoreSubscriptions(environments: scope.appStoreEnvironments), catalog: catalog))
    }

    /// Expects the ledger's index to give every figure the reference gives: the overview at
    /// each instant, movement and churn over ranges between them, trials started in them.
    static func expectAgreement(_ store: any MetricsFactStore, catalog: PlanCatalog, _ context: String) async throws {
        let index = try await store.metricsIndex(scope, catalog: catalog)
        let reference = try await reference(store, catalog: catalog)
        var mismatches: [String] = []
        for instant in instants {
            let figures = try await index.overview(at: instant)
            if figures != RevenueMetrics.overview(reference.histories, at: instant) { mismatches.append("overview at \(instant)") }
        }
        let ends = stride(from: 0, to: instants.count, by: 7).map { instants[$0] }
        for (from, to) in zip(ends, ends.dropFirst(3)) {
            async let start = index.overview(at: from)
            async let end = index.overview(at: to)
            async let changed = index.changedHistories(after: from, through: to)
            let (startFigures, endFigures, changedHistories) = try await (start, end, changed)
            let movement = MetricsIndexing.movement(start: startFigures, end: endFigures, changed: changedHistories, from: from, to: to)
            if movement != RevenueMetrics.movement(reference.histories, from: from, to: to).filter({ $0.value != MRRMovement() }) {
                mismatches.append("movement \(from)–\(to)")
            }
            if !movement.values.allSatisfy(\.balances) { mismatches.append("movement identity \(from)–\(to)") }
            let churn = MetricsIndexing.churn(start: startFigures, changed: changedHistories, from: from, to: to)
            if churn != RevenueMetrics.churn(reference.histories, from: from, to: to) { mismatches.append("churn \(from)–\(to)") }
            let now = to + 20 * S.day
            let trials = RevenueMetrics.trials(try await index.trials(from: from, to: to, now: now), now: now)
            if trials != RevenueMetrics.trials(reference.histories, from: from, to: to, now: now) { mismatches.append("trials \(from)–\(to)") }
        }
        #expect(mismatches.isEmpty, "\(context): \(mismatches.prefix(8))")
    }

    @Test("The index gives the figures every fact gives, at every instant around the scenario's events", arguments: StoreBackend.allCases)
    func agreesInOrder(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await MetricsFactTests.deliver(S.deliveries, to: ledger)
            let overview = try await ledger.store.metrics.metricsIndex(Self.scope, catalog: Self.byPrice).overview(at: S.t0 + 25 * S.day)
            #expect(overview.mrr["usd"]?.stripe == 6000, "hand-computed: 3 seats of 20.00; the yearly one is paused")
            #expect(overview.byPlan["pro"]?.activeSubscriptions == 1)
            try await Self.expectAgreement(ledger.store.metrics, catalog: Self.byPrice, "\(backend) in order")
        }
    }

    @Test("Revenue streamed into its buckets equals the buckets of every entry read at once", arguments: StoreBackend.allCases)
    func streamedRevenue(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await MetricsFactTests.deliver(S.deliveries, to: ledger)
            let facts = ledger.store.metrics
            for (from, to) in [(S.a0 / 1000 - S.day, S.t0 + 60 * S.day), (S.t0 + S.day / 2, S.t0 + 21 * S.day + 7)] {
                for interval in MetricsInterval.allCases {
                    let streamed = try await facts.revenue(
                        scope: Self.scope.stripe, appStoreEnvironments: Self.scope.appStoreEnvironments,
                        into: RevenueTally(from: from, to: to, interval: interval))
                    let entries = try await facts.revenueEntries(
                        scope: Self.scope.stripe, appStoreEnvironments: Self.scope.appStoreEnvironments, from: from, to: to)
                    #expect(streamed.buckets == RevenueMetrics.revenue(entries, from: from, to: to, interval: interval), "\(backend) \(interval)")
                    #expect(!entries.isEmpty)
                }
            }
        }
    }

    @Test("Each batch of a shuffled delivery with duplicates updates the index; replay leaves it right",
          arguments: StoreBackend.allCases, [UInt64(5), 6])
    func followsEveryBatch(_ backend: StoreBackend, seed: UInt64) async throws {
        try await withLedger(backend) { ledger in
            let deliveries = MetricsFactTests.shuffled(S.deliveries, seed: seed)
            var delivered = 0
            while delivered < deliveries.count {
                let next = min(delivered + 5, deliveries.count)
                try await MetricsFactTests.deliver(Array(deliveries[delivered..<next]), to: ledger)
                delivered = next
                try await Self.expectAgreement(ledger.store.metrics, catalog: Self.byPrice, "\(backend) seed \(seed) after \(delivered)")
            }
            let pass = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(pass.failed + pass.dead == 0)
            try await Self.expectAgreement(ledger.store.metrics, catalog: Self.byPrice, "\(backend) seed \(seed) after replay")
        }
    }

    @Test("A refund of the first payment, arriving last, undoes the trial's conversion in the index", arguments: StoreBackend.allCases)
    func lateRefund(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let refund = S.stripeEvents.firstIndex { String(decoding: $0, as: UTF8.self).contains("evt_re_1_updated") }!
            var early = S.stripeEvents
            let late = early.remove(at: refund)
            try await MetricsFactTests.deliver(early.map { .stripe($0) }, to: ledger)
            let trials = { () async throws -> TrialFigures in
                let index = try await ledger.store.metrics.metricsIndex(Self.scope, catalog: Self.byPrice)
                let now = S.t0 + 60 * S.day
                return RevenueMetrics.trials(try await index.trials(from: S.t0, to: S.t0 + S.day, now: now), now: now).stripe
            }
            #expect(try await trials() == TrialFigures(started: 1, converted: 1))
            try await MetricsFactTests.deliver([.stripe(late)], to: ledger)
            #expect(try await trials() == TrialFigures(started: 1, abandoned: 1))
        }
    }

    @Test("Another catalog rebuilds the index under its plans and periods", arguments: StoreBackend.allCases)
    func catalogChange(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await MetricsFactTests.deliver(S.deliveries, to: ledger)
            try await Self.expectAgreement(ledger.store.metrics, catalog: Self.byPrice, "\(backend) by price")
            try await Self.expectAgreement(ledger.store.metrics, catalog: Self.otherPlans, "\(backend) other plans")
            // Day 10: the yearly subscription pays (Team now), the other is in its trial.
            let overview = try await ledger.store.metrics.metricsIndex(Self.scope, catalog: Self.otherPlans).overview(at: S.t0 + 10 * S.day)
            #expect(overview.byPlan["team"]?.activeSubscriptions == 1 && overview.byPlan["pro"] == nil)
            try await Self.expectAgreement(ledger.store.metrics, catalog: Self.byPrice, "\(backend) by price again")
        }
    }

    @Test("Both backends keep the same index")
    func sameOnBothBackends() async throws {
        var overviews: [[MetricsOverview]] = []
        for backend in StoreBackend.allCases {
            try await withLedger(backend) { ledger in
                try await MetricsFactTests.deliver(S.deliveries, to: ledger)
                let index = try await ledger.store.metrics.metricsIndex(Self.scope, catalog: Self.byPrice)
                var figures: [MetricsOverview] = []
                for instant in Self.instants { figures.append(try await index.overview(at: instant)) }
                overviews.append(figures)
            }
        }
        #expect(overviews.count == 2 && overviews[0] == overviews[1])
    }
}
