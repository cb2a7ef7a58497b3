import BillingCore
import BillingSamples
import Foundation
import Testing

/// Hand-computed scenarios: every figure below is worked out in the comments from the histories.
@Suite("Revenue metrics: MRR, movement, churn, trials, revenue and a reporting currency, by hand")
struct RevenueMetricsTests {
    static let t0: Int64 = 1_767_225_600  // 2026-01-01 00:00 UTC, a Thursday
    static let day: Int64 = 86_400
    static func d(_ days: Int64) -> Int64 { t0 + days * day }

    static func snapshot(_ id: String, _ at: Int64, _ status: SubscriptionStatus, _ amount: Int64?, currency: String = "usd", trialStart: Int64? = nil, trialEnd: Int64? = nil) -> StripeSubscriptionSnapshot {
        StripeSubscriptionSnapshot(
            version: SnapshotVersion(deleted: false, terminal: status == .canceled, eventCreated: at, transitionAt: 0, statusRank: 0, eventID: "evt_\(id)_\(at)_\(status)"),
            status: status, monthly: amount.map { (currency, ExactAmount(minorUnits: $0)) }, currency: currency, trialStart: trialStart, trialEnd: trialEnd)
    }

    static func transaction(_ id: String, _ from: Int64, _ to: Int64, price: Int64 = 9_990, currency: String = "USD", period: AppStorePeriod? = .oneMonth, trial: Bool = false, family: Bool = false, revokedAt: Int64? = nil, refunded: Bool = false) -> AppStoreTransactionFact {
        AppStoreTransactionFact(
            transactionID: id, purchase: from, expires: to, priceMilliunits: trial ? 0 : price, currency: currency, period: period,
            isFreeTrial: trial, isFamilyShared: family, revokedAt: revokedAt, refunded: refunded)
    }

    /// Stripe S1–S7 and App Store A1–A9, over January and February 2026.
    static var histories: [SubscriptionHistory] {
        [
            // S1: 10.00 a month, 15.00 from day 25 (a quantity change): expansion.
            .stripe(id: "S1", plan: "pro", snapshots: [snapshot("S1", d(0), .active, 1_000), snapshot("S1", d(25), .active, 1_500)]),
            // S2: a 14-day trial, then 20.00: converted on day 14.
            .stripe(id: "S2", plan: nil, snapshots: [
                snapshot("S2", d(0), .trialing, 2_000, trialStart: d(0), trialEnd: d(14)), snapshot("S2", d(14), .active, 2_000),
            ]),
            // S3: 15.00 EUR, canceled on day 30: churned.
            .stripe(id: "S3", plan: nil, snapshots: [snapshot("S3", d(0), .active, 1_500, currency: "eur"), snapshot("S3", d(30), .canceled, 1_500, currency: "eur")]),
            // S4: 5.00, 3.00 from day 22 (a downgrade), past_due from day 35 (still paying): contraction.
            .stripe(id: "S4", plan: nil, snapshots: [snapshot("S4", d(0), .active, 500), snapshot("S4", d(22), .active, 300), snapshot("S4", d(35), .pastDue, 300)]),
            // S5: starts paying 7.00 on day 30: new.
            .stripe(id: "S5", plan: nil, snapshots: [snapshot("S5", d(30), .active, 700)]),
            // S6: 4.00, unpaid from day 10, paid again on day 32: reactivation.
            .stripe(id: "S6", plan: nil, snapshots: [snapshot("S6", d(0), .active, 400), snapshot("S6", d(10), .unpaid, 400), snapshot("S6", d(32), .active, 400)]),
            // S7: a trial from day 5 to 19, canceled at its end: abandoned.
            .stripe(id: "S7", plan: nil, snapshots: [
                snapshot("S7", d(5), .trialing, 900, trialStart: d(5), trialEnd: d(19)), snapshot("S7", d(19), .canceled, 900),
            ]),
            // A1: 9.99 a month, renewed on day 30.
            .appStore(id: "A1", plan: "pro", transactions: [transaction("a1-1", d(0), d(30)), transaction("a1-2", d(30), d(60))]),
            // A2: a free week from day 35: pending on day 40.
            .appStore(id: "A2", plan: nil, transactions: [transaction("a2-1", d(35), d(42), trial: true)]),
            // A3: family-shared: never paying.
            .appStore(id: "A3", plan: nil, transactions: [transaction("a3-1", d(0), d(30), family: true), transaction("a3-2", d(30), d(60), family: true)]),
            // A4: 12,000 JPY a year: 1,000 yen a month.
            .appStore(id: "A4", plan: nil, transactions: [transaction("a4-1", d(0), d(365), price: 12_000_000, currency: "JPY", period: .oneYear)]),
            // A5: expired on day 38, in its billing grace period until day 44: still paying on day 40.
            .appStore(id: "A5", plan: nil, transactions: [transaction("a5-1", d(8), d(38))], gracePeriodEnd: d(44)),
            // A6: expired on day 38, in billing retry without grace: churned.
            .appStore(id: "A6", plan: nil, transactions: [transaction("a6-1", d(8), d(38))]),
            // A7: paid in December, resubscribed on day 33: reactivation.
            .appStore(id: "A7", plan: nil, transactions: [transaction("a7-1", d(-40), d(-10)), transaction("a7-2", d(33), d(63))]),
            // A8: a trial, then a paid month refunded on day 12: the conversion is undone.
            .appStore(id: "A8", plan: nil, transactions: [
                transaction("a8-1", d(1), d(8), trial: true), transaction("a8-2", d(8), d(38), revokedAt: d(12), refunded: true),
            ]),
            // A9: a trial, then paid months: converted.
            .appStore(id: "A9", plan: nil, transactions: [
                transaction("a9-1", d(2), d(9), trial: true), transaction("a9-2", d(9), d(39)), transaction("a9-3", d(39), d(69)),
            ]),
        ]
    }

    @Test("Overview on day 40: MRR per currency and store, actives, trials, by plan")
    func overview() {
        let overview = RevenueMetrics.overview(Self.histories, at: Self.d(40))
        // Stripe USD: S1 1500 + S2 2000 + S4 300 + S5 700 + S6 400. App Store USD: A1, A5 (grace), A7, A9 at 999.
        #expect(overview.mrr["usd"] == StoreSplit(stripe: 4_900, appStore: 3_996))
        #expect(overview.mrr["jpy"] == StoreSplit(stripe: 0, appStore: 1_000))
        #expect(overview.mrr["eur"] == nil, "S3 was canceled on day 30")
        #expect(overview.activeSubscriptions == StoreSplit(stripe: 5, appStore: 5))
        #expect(overview.activeTrials == StoreSplit(stripe: 0, appStore: 1))
        #expect(overview.byPlan["pro"]?.activeSubscriptions == 2)
        #expect(overview.byPlan["pro"]?.mrr == ["usd": 2_499])
        // On day 20 S2 pays, S6 is unpaid, A6 still pays.
        let earlier = RevenueMetrics.overview(Self.histories, at: Self.d(20))
        #expect(earlier.mrr["usd"] == StoreSplit(stripe: 3_500, appStore: 3_996))
        #expect(earlier.mrr["eur"]?.stripe == 1_500)
    }

    @Test("Movement from day 20 to day 40: new, reactivation, expansion, contraction and churn add up to the change")
    func movement() {
        let movement = RevenueMetrics.movement(Self.histories, from: Self.d(20), to: Self.d(40))
        let usd = movement["usd"]
        #expect(usd?.start == 7_496)
        #expect(usd?.end == 8_896)
        #expect(usd?.new == 700)  // S5
        #expect(usd?.reactivation == 1_399)  // S6 400 + A7 999
        #expect(usd?.expansion == 500)  // S1
        #expect(usd?.contraction == 200)  // S4
        #expect(usd?.churned == 999)  // A6
        #expect(usd?.balances == true)
        #expect(movement["eur"] == MRRMovement(start: 1_500, end: 0, churned: 1_500))
        #expect(movement["jpy"] == MRRMovement(start: 1_000, end: 1_000))
    }

    @Test("Churn from day 20 to day 40, per store and in total")
    func churn() {
        let churn = RevenueMetrics.churn(Self.histories, from: Self.d(20), to: Self.d(40))
        #expect(churn.stripe == ChurnFigures(atStart: 4, churned: 1))  // S1 S2 S3 S4; S3
        #expect(churn.appStore == ChurnFigures(atStart: 5, churned: 1))  // A1 A4 A5 A6 A9; A6
        #expect(churn.total == ChurnFigures(atStart: 9, churned: 2))
        #expect(churn.total.rate == 2.0 / 9.0)
        #expect(RevenueMetrics.churn([], from: 0, to: 1).total.rate == nil)
    }

    @Test("Trials started in January and February, judged on day 40: a refunded first period undoes the conversion")
    func trials() {
        let trials = RevenueMetrics.trials(Self.histories, from: Self.d(0), to: Self.d(60), now: Self.d(40))
        #expect(trials.stripe == TrialFigures(started: 2, converted: 1, abandoned: 1, pending: 0))  // S2; S7
        #expect(trials.appStore == TrialFigures(started: 3, converted: 1, abandoned: 1, pending: 1))  // A9; A8; A2
        #expect(trials.total.converted + trials.total.abandoned + trials.total.pending == trials.total.started)
        // Judged on day 3, S2 and A8 are still in trial and A9's has not started.
        let early = RevenueMetrics.trials(Self.histories, from: Self.d(0), to: Self.d(60), now: Self.d(1) + 3_600)
        #expect(early.total == TrialFigures(started: 2, converted: 0, abandoned: 0, pending: 2))
    }

    @Test("A Stripe history is the same whatever order its snapshots arrive in, duplicates included; nothing reopens a canceled one")
    func stripeOrder() {
        let snapshots = [
            Self.snapshot("X", Self.d(0), .trialing, 1_000, trialStart: Self.d(0), trialEnd: Self.d(7)), Self.snapshot("X", Self.d(7), .active, 1_000),
            Self.snapshot("X", Self.d(20), .pastDue, 1_000), Self.snapshot("X", Self.d(23), .active, 1_200), Self.snapshot("X", Self.d(40), .canceled, 1_200),
            Self.snapshot("X", Self.d(41), .active, 1_200),
        ]
        let expected = SubscriptionHistory.stripe(id: "X", plan: nil, snapshots: snapshots)
        #expect(expected.spans == [
            SubscriptionSpan(start: Self.d(0), end: Self.d(7), state: .trial),
            SubscriptionSpan(start: Self.d(7), end: Self.d(23), state: .paying(currency: "usd", monthly: 1_000)),
            SubscriptionSpan(start: Self.d(23), end: Self.d(40), state: .paying(currency: "usd", monthly: 1_200)),
            SubscriptionSpan(start: Self.d(40), end: nil, state: .inactive),
        ])
        var generator = SplitMix64(seed: 7)
        for _ in 0..<50 {
            let delivered = (snapshots + snapshots.filter { _ in Bool.random(using: &generator) }).shuffled(using: &generator)
            #expect(SubscriptionHistory.stripe(id: "X", plan: nil, snapshots: delivered) == expected)
        }
    }

    @Test("App Store: an upgrade takes over at its purchase; a refund ends coverage at the revocation; grace follows only a paid expiry")
    func appStoreSpans() {
        let upgraded = SubscriptionHistory.appStore(id: "U", plan: nil, transactions: [
            Self.transaction("u-2", Self.d(10), Self.d(40), price: 19_990),
            Self.transaction("u-1", Self.d(0), Self.d(30), price: 9_990, revokedAt: Self.d(10)),
        ])
        #expect(upgraded.state(at: Self.d(5)) == .paying(currency: "usd", monthly: 999))
        #expect(upgraded.state(at: Self.d(15)) == .paying(currency: "usd", monthly: 1_999))
        #expect(upgraded.state(at: Self.d(40)) == .inactive)
        let refunded = SubscriptionHistory.appStore(id: "R", plan: nil, transactions: [Self.transaction("r-1", Self.d(0), Self.d(30), revokedAt: Self.d(3), refunded: true)], gracePeriodEnd: Self.d(36))
        #expect(refunded.state(at: Self.d(2)).isPaying)
        #expect(refunded.state(at: Self.d(3)) == .inactive)
        #expect(refunded.state(at: Self.d(31)) == .inactive, "a revoked transaction has no grace period after it")
    }

    @Test("The movement identity holds to the minor unit over random histories, in three currencies")
    func identity() {
        var generator = SplitMix64(seed: 2026)
        for _ in 0..<200 {
            var histories: [SubscriptionHistory] = []
            for index in 0..<30 {
                let currency = ["usd", "eur", "jpy"][Int.random(in: 0..<3, using: &generator)]
                var snapshots: [StripeSubscriptionSnapshot] = []
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    let status: SubscriptionStatus = [.active, .pastDue, .trialing, .unpaid, .paused, .incomplete][Int.random(in: 0..<6, using: &generator)]
                    snapshots.append(Self.snapshot("R\(index)", Self.d(Int64.random(in: 0..<90, using: &generator)), status, Int64.random(in: 1...50_000, using: &generator), currency: currency))
                }
                histories.append(.stripe(id: "R\(index)", plan: nil, snapshots: snapshots))
                let start = Self.d(Int64.random(in: 0..<90, using: &generator))
                histories.append(.appStore(id: "Q\(index)", plan: nil, transactions: [
                    Self.transaction("q\(index)-1", start, start + 30 * Self.day, price: Int64.random(in: 990...99_990, using: &generator), currency: currency.uppercased(), period: nil),
                ]))
            }
            let from = Self.d(Int64.random(in: 0..<60, using: &generator))
            let to = from + Int64.random(in: 1...40, using: &generator) * Self.day
            let before = RevenueMetrics.overview(histories, at: from).mrr
            let after = RevenueMetrics.overview(histories, at: to).mrr
            for (currency, movement) in RevenueMetrics.movement(histories, from: from, to: to) {
                #expect(movement.balances, "\(currency): \(movement)")
                #expect(movement.start == before[currency]?.total ?? 0)
                #expect(movement.end == after[currency]?.total ?? 0)
            }
        }
    }

    @Test("Revenue in UTC day, ISO-week and month buckets, clipped to the range; refunds at their own time")
    func revenue() {
        let entries = [
            RevenueEntry(store: .stripe, kind: .payment, at: Self.d(0), currency: "USD", amount: 1_000),
            RevenueEntry(store: .appStore, kind: .payment, at: Self.d(3) + 3_599, currency: "usd", amount: 999),  // Sunday Jan 4
            RevenueEntry(store: .appStore, kind: .payment, at: Self.d(4) + 3_599, currency: "usd", amount: 999),  // Monday Jan 5
            RevenueEntry(store: .stripe, kind: .refund, at: Self.d(4) + 86_399, currency: "usd", amount: 400),
            RevenueEntry(store: .stripe, kind: .payment, at: Self.d(13), currency: "eur", amount: 1_500),
            RevenueEntry(store: .stripe, kind: .payment, at: Self.d(14), currency: "usd", amount: 5_000),  // outside [d0, d14)
        ]
        let weeks = RevenueMetrics.revenue(entries, from: Self.d(0), to: Self.d(14), interval: .week)
        #expect(weeks.map(\.start) == [Self.d(0), Self.d(4), Self.d(11)])
        #expect(weeks.map(\.end) == [Self.d(4), Self.d(11), Self.d(14)])
        #expect(weeks[0].byCurrency["usd"] == StoreSplit(stripe: RevenueFigures(gross: 1_000, transactions: 1), appStore: RevenueFigures(gross: 999, transactions: 1)))
        #expect(weeks[1].byCurrency["usd"] == StoreSplit(stripe: RevenueFigures(refunds: 400, refundedTransactions: 1), appStore: RevenueFigures(gross: 999, transactions: 1)))
        #expect(weeks[1].byCurrency["usd"]?.total.net == 599)
        #expect(weeks[2].byCurrency["eur"]?.total == RevenueFigures(gross: 1_500, transactions: 1))
        #expect(weeks[2].byCurrency["usd"] == nil)

        let months = RevenueMetrics.revenue(entries, from: Self.d(0), to: Self.d(45), interval: .month)
        #expect(months.map(\.start) == [Self.d(0), Self.d(31)])
        #expect(months[0].byCurrency["usd"]?.total == RevenueFigures(gross: 7_998, refunds: 400, transactions: 4, refundedTransactions: 1))
        #expect(months[0].byCurrency["usd"]?.total.refundRate == 0.25)
        let days = RevenueMetrics.revenue(entries, from: Self.d(4), to: Self.d(6), interval: .day)
        #expect(days.count == 2)
        #expect(days[0].byCurrency["usd"]?.appStore.transactions == 1)
        #expect(days[0].byCurrency["usd"]?.stripe.refundedTransactions == 1)
        #expect(days[1].byCurrency.isEmpty)
        #expect(MetricsInterval.month.boundaries(from: Self.d(-1), to: Self.d(59)) == [Self.d(0), Self.d(31), Self.d(59)])
    }

    @Test("A reporting currency: each currency at the latest rate on or before the instant; a currency without a rate is named, never guessed")
    func reportingCurrency() throws {
        let rates = try ExchangeRates(reportingCurrency: "USD", csv: """
            date,currency,rate
            2026-01-01,eur,1.10
            2026-01-20,EUR,1.20
            2026-01-01,jpy,0.0065
            """)
        let amounts: [String: Int64] = ["usd": 1_000, "eur": 1_000, "jpy": 1_000, "gbp": 500]
        // 10.00 USD + 10.00 EUR × 1.10 + 1,000 JPY × 0.0065 = 10.00 + 11.00 + 6.50.
        let january10 = rates.total(of: amounts, at: Self.d(9))
        #expect(january10.amount == 2_750)
        #expect(january10.missingRates == ["gbp"])
        #expect(rates.total(of: amounts, at: Self.d(19)).amount == 2_850)
        #expect(rates.total(of: ["eur": 1_000], at: Self.d(-1)).missingRates == ["eur"], "no rate before its first date")
        #expect(throws: ExchangeRates.ParseError.self) { try ExchangeRates(reportingCurrency: "usd", csv: "2026-13-01,eur,1.1") }
        #expect(throws: ExchangeRates.ParseError.self) { try ExchangeRates(reportingCurrency: "usd", csv: "2026-01-01,eur,-1") }
        #expect(throws: ExchangeRates.ParseError.self) { try ExchangeRates(reportingCurrency: "usd", csv: "2026-01-01,euro,1.1") }
    }
}
