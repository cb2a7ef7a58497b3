import BillingCore
import BillingSamples
import Testing

/// The metrics index's arithmetic against the direct figures: over random histories, the
/// overview from day sums and a day's spans, and movement and churn from the changed
/// subscriptions, equal what ``RevenueMetrics`` computes from every history.
@Suite("Metrics indexing")
struct MetricsIndexingTests {
    static let day = MetricsIndexing.secondsPerDay
    static let origin: Int64 = 1_760_000_000

    /// Random histories: spans of random states, lengths (minutes to months), gaps and overlaps,
    /// some left open; plans and currencies from small sets.
    static func histories(seed: UInt64, count: Int = 60) -> [SubscriptionHistory] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { number in
            var spans: [SubscriptionSpan] = []
            var start = origin + Int64.random(in: 0..<(40 * day), using: &random)
            for index in 0..<Int.random(in: 1...6, using: &random) {
                let length = [Int64(300), 3_600, day, 7 * day, 30 * day][Int.random(in: 0..<5, using: &random)]
                let state: SubscriptionState = switch Int.random(in: 0..<4, using: &random) {
                case 0: .trial
                case 1: .inactive
                default: .paying(currency: ["usd", "eur", "jpy"][Int.random(in: 0..<3, using: &random)], monthly: Int64.random(in: 0...5000, using: &random))
                }
                let open = index > 0 && Int.random(in: 0..<8, using: &random) == 0
                spans.append(SubscriptionSpan(start: start, end: open ? nil : start + length, state: state))
                // A gap, back to back, or an overlap.
                start += length + [Int64(0), 0, 600, day, -120][Int.random(in: 0..<5, using: &random)]
                if open { break }
            }
            let trials = spans.filter { $0.state == .trial }.map { TrialRecord(start: $0.start, end: $0.end, convertedAt: nil) }
            return SubscriptionHistory(
                store: number % 2 == 0 ? .stripe : .appStore, id: "s\(number)", plan: [nil, "pro", "team"][number % 3], spans: spans, trials: trials)
        }
    }

    static func instants(seed: UInt64) -> [Int64] {
        var random = SplitMix64(seed: seed &+ 100)
        var instants: [Int64] = []
        for history in histories(seed: seed) {
            for span in history.spans { instants += around(span) }
        }
        for _ in 0..<40 { instants.append(origin + Int64.random(in: -day..<(90 * day), using: &random)) }
        return instants.sorted()
    }

    /// A second before, at and after each end of a span.
    static func around(_ span: SubscriptionSpan) -> [Int64] {
        var instants: [Int64] = [span.start - 1, span.start, span.start + 1]
        if let end = span.end { instants += [end - 1, end, end + 1] }
        return instants
    }

    /// The overview from the index's parts, as a ledger's index reads them.
    static func indexedOverview(_ spans: [IndexedSpan], at instant: Int64) -> MetricsOverview {
        let dayStart = MetricsIndexing.dayStart(instant)
        var sums: [MetricsTallyKey: MetricsTally] = [:]
        for (key, tally) in MetricsIndexing.dayChanges(of: spans) where key.day < dayStart { sums[key.key, default: .zero] += tally }
        let sameDay = spans.filter { (dayStart...instant).contains($0.span.start) || $0.span.end.map { (dayStart...instant).contains($0) } ?? false }
        return MetricsIndexing.overview(before: sums, sameDay: sameDay, at: instant)
    }

    @Test("A history's indexed spans never overlap and give its state everywhere", arguments: [UInt64(1), 2, 3])
    func spans(seed: UInt64) {
        for history in Self.histories(seed: seed) {
            let spans = IndexedSpan.spans(of: history).map(\.span)
            for (earlier, later) in zip(spans, spans.dropFirst()) {
                #expect(earlier.end.map { $0 <= later.start } ?? false, "\(history.id): \(earlier) overlaps \(later)")
            }
            let rebuilt = SubscriptionHistory(store: history.store, id: history.id, plan: history.plan, spans: spans, trials: [])
            for instant in history.spans.flatMap(Self.around) {
                #expect(rebuilt.state(at: instant) == history.state(at: instant), "\(history.id) at \(instant)")
            }
        }
    }

    @Test("The overview from day sums and the day's own spans is the direct overview", arguments: [UInt64(1), 2, 3, 4])
    func overview(seed: UInt64) {
        let histories = Self.histories(seed: seed)
        let spans = histories.flatMap(IndexedSpan.spans(of:))
        for instant in Self.instants(seed: seed) {
            #expect(Self.indexedOverview(spans, at: instant) == RevenueMetrics.overview(histories, at: instant), "at \(instant)")
        }
    }

    @Test("Movement and churn from the changed subscriptions are the direct ones, and the identity holds", arguments: [UInt64(1), 2, 3, 4])
    func movementAndChurn(seed: UInt64) {
        let histories = Self.histories(seed: seed)
        let spans = histories.flatMap(IndexedSpan.spans(of:))
        let instants = Self.instants(seed: seed)
        for (from, to) in zip(instants, instants.dropFirst(5)) where from < to {
            let changedIDs = Set(spans.filter { span in
                (from + 1...to).contains(span.span.start) || span.span.end.map { (from + 1...to).contains($0) } ?? false
            }.map(\.subscription))
            let changed = histories.filter { changedIDs.contains($0.id) }
            let start = Self.indexedOverview(spans, at: from)
            let end = Self.indexedOverview(spans, at: to)
            let movement = MetricsIndexing.movement(start: start, end: end, changed: changed, from: from, to: to)
            #expect(movement == RevenueMetrics.movement(histories, from: from, to: to).filter { $0.value != MRRMovement() }, "\(from)–\(to)")
            let balanced = movement.values.allSatisfy { $0.balances }
            #expect(balanced, "\(from)–\(to): end − start = new + reactivation + expansion − contraction − churned")
            #expect(MetricsIndexing.churn(start: start, changed: changed, from: from, to: to) == RevenueMetrics.churn(histories, from: from, to: to))
        }
    }

    @Test("Day changes of replaced spans: what was added is taken away, nothing else")
    func replacing() {
        let old = IndexedSpan(store: .stripe, subscription: "s", plan: "pro", span: SubscriptionSpan(start: Self.origin, end: Self.origin + 40 * Self.day, state: .paying(currency: "usd", monthly: 1000)))
        var new = old
        new.span.end = Self.origin + 10 * Self.day
        let changes = MetricsIndexing.dayChanges(replacing: [old], with: [new])
        let key = MetricsTallyKey(store: .stripe, plan: "pro", currency: "usd")
        #expect(changes == [
            MetricsDayKey(day: MetricsIndexing.dayStart(Self.origin + 10 * Self.day), key: key): MetricsTally(paying: -1, mrr: -1000),
            MetricsDayKey(day: MetricsIndexing.dayStart(Self.origin + 40 * Self.day), key: key): MetricsTally(paying: 1, mrr: 1000),
        ])
        #expect(MetricsIndexing.dayChanges(replacing: [old], with: [old]).isEmpty)
        #expect(MetricsIndexing.dayStart(-1) == -Self.day && MetricsIndexing.dayStart(Self.day) == Self.day)
    }

    @Test("The catalog's metrics fingerprint follows plans and periods, not names")
    func fingerprint() throws {
        let pro = PlanTier(id: "pro", name: "Pro", rank: 10, prices: [PlanPrice(id: "price_pro", lookupKey: nil, interval: .month)])
        let renamed = PlanTier(id: "pro", name: "Professional", rank: 10, prices: [PlanPrice(id: "price_pro", lookupKey: nil, interval: .month)])
        let moved = PlanTier(id: "pro", name: "Pro", rank: 10, prices: [PlanPrice(id: "price_pro_v2", lookupKey: nil, interval: .month)])
        let free = PlanTier(id: "free", name: "Free", rank: 0)
        let fingerprint = { (tier: PlanTier) in try PlanCatalog(tiers: [free, tier]).metricsFingerprint }
        let (original, afterRenaming, afterMoving) = (try fingerprint(pro), try fingerprint(renamed), try fingerprint(moved))
        #expect(original == afterRenaming)
        #expect(original != afterMoving)
        #expect(original.count == 64)
    }
}
