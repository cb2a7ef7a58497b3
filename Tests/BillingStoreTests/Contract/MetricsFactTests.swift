import BillingCore
import BillingSamples
import BillingStore
import Foundation
import Testing

/// Hand-computed lifecycles on both stores, as the events that carry them: what the revenue
/// metrics must read back from the ledger whatever the order of delivery.
enum MetricsScenario {
    static let day: Int64 = 86_400
    /// Stripe's events start here (Unix seconds).
    static let t0: Int64 = 1_770_000_000

    // MARK: Stripe

    /// A subscription of one licensed price, shaped from the committed fixture.
    static func subscription(
        _ id: String, status: String, price: String, unitAmount: Int64, interval: String = "month", quantity: Int64 = 1,
        trial: (start: Int64, end: Int64)? = nil, percentOffForever: Int? = nil, canceledAt: Int64? = nil
    ) -> [String: Any] {
        var object = EventFactory.object("subscription")
        object["id"] = id
        object["customer"] = "cus_metrics"
        object["status"] = status
        object["created"] = t0
        object["start_date"] = t0
        object["trial_start"] = trial.map { $0.start } ?? NSNull()
        object["trial_end"] = trial.map { $0.end } ?? NSNull()
        object["discounts"] = [String]()
        object["discount"] = percentOffForever.map { ["coupon": ["percent_off": $0, "duration": "forever"]] as [String: Any] } ?? NSNull()
        object["canceled_at"] = canceledAt ?? NSNull()
        object["ended_at"] = canceledAt ?? NSNull()
        var items = object["items"] as! [String: Any]
        var item = (items["data"] as! [[String: Any]])[0]
        var priceObject = item["price"] as! [String: Any]
        priceObject["id"] = price
        priceObject["unit_amount"] = unitAmount
        priceObject["unit_amount_decimal"] = String(unitAmount)
        priceObject["recurring"] = ["interval": interval, "interval_count": 1, "usage_type": "licensed", "meter": NSNull(), "trial_period_days": NSNull()]
        item["price"] = priceObject
        item["plan"] = NSNull()
        item["id"] = "si_\(id)"
        item["subscription"] = id
        item["quantity"] = quantity
        items["data"] = [item]
        object["items"] = items
        return object
    }

    /// A paid invoice of a subscription, paid by a charge (API before 2025-03-31) or a payment intent.
    static func invoice(_ id: String, subscription: String, amountPaid: Int64, paidAt: Int64, charge: String? = nil, paymentIntent: String? = nil) -> [String: Any] {
        var object = EventFactory.object("invoice")
        object["id"] = id
        object["customer"] = "cus_metrics"
        object["status"] = "paid"
        object["amount_due"] = amountPaid
        object["amount_paid"] = amountPaid
        object["amount_remaining"] = 0
        object["currency"] = "usd"
        object["created"] = paidAt
        object["status_transitions"] = ["finalized_at": paidAt, "paid_at": paidAt, "voided_at": NSNull(), "marked_uncollectible_at": NSNull()]
        object["parent"] = ["type": "subscription_details", "quote_details": NSNull(), "subscription_details": ["metadata": [String: String](), "subscription": subscription]]
        object["charge"] = charge ?? NSNull()
        object["payment_intent"] = paymentIntent ?? NSNull()
        return object
    }

    static func refund(_ id: String, amount: Int64, created: Int64, status: String, charge: String? = nil, paymentIntent: String? = nil) -> [String: Any] {
        [
            "id": id, "object": "refund", "amount": amount, "currency": "usd", "charge": charge ?? NSNull(),
            "payment_intent": paymentIntent ?? NSNull(), "status": status, "created": created, "metadata": [String: String](),
        ]
    }

    /// sub_m1: a 14-day trial of 20.00 a month, paid, then 3 seats (60.00), then a forever coupon of
    /// 25 % (45.00), then canceled; its first payment refunded. sub_m2: 120.00 a year (10.00 a
    /// month), paused on day 20, resumed on day 45.
    static let stripeEvents: [[UInt8]] = {
        func event(_ id: String, _ type: String, _ day: Int64, _ object: [String: Any]) -> [UInt8] {
            EventFactory.event(id: id, type: type, created: t0 + day * Self.day, object: object)
        }
        let trial = (start: t0, end: t0 + 14 * day)
        return [
            event("evt_m1_created", "customer.subscription.created", 0,
                  subscription("sub_m1", status: "trialing", price: "price_pro", unitAmount: 2000, trial: trial)),
            event("evt_m1_active", "customer.subscription.updated", 14,
                  subscription("sub_m1", status: "active", price: "price_pro", unitAmount: 2000, trial: trial)),
            event("evt_m1_seats", "customer.subscription.updated", 20,
                  subscription("sub_m1", status: "active", price: "price_pro", unitAmount: 2000, quantity: 3, trial: trial)),
            event("evt_m1_coupon", "customer.subscription.updated", 30,
                  subscription("sub_m1", status: "active", price: "price_pro", unitAmount: 2000, quantity: 3, trial: trial, percentOffForever: 25)),
            event("evt_m1_deleted", "customer.subscription.deleted", 40,
                  subscription("sub_m1", status: "canceled", price: "price_pro", unitAmount: 2000, quantity: 3, trial: trial,
                               percentOffForever: 25, canceledAt: t0 + 40 * day)),
            event("evt_m2_created", "customer.subscription.created", 0,
                  subscription("sub_m2", status: "active", price: "price_pro_yearly", unitAmount: 12000, interval: "year")),
            event("evt_m2_paused", "customer.subscription.paused", 20,
                  subscription("sub_m2", status: "paused", price: "price_pro_yearly", unitAmount: 12000, interval: "year")),
            event("evt_m2_resumed", "customer.subscription.resumed", 45,
                  subscription("sub_m2", status: "active", price: "price_pro_yearly", unitAmount: 12000, interval: "year")),
            // The $0 invoice that opens the trial: paid, but no payment (not the first one a refund undoes).
            event("evt_in_m1z", "invoice.paid", 0, invoice("in_m1z", subscription: "sub_m1", amountPaid: 0, paidAt: t0)),
            event("evt_in_m1a", "invoice.paid", 14, invoice("in_m1a", subscription: "sub_m1", amountPaid: 2000, paidAt: t0 + 14 * day, charge: "ch_m1a")),
            event("evt_in_m1b", "invoice.paid", 20,
                  invoice("in_m1b", subscription: "sub_m1", amountPaid: 4000, paidAt: t0 + 20 * day, paymentIntent: "pi_m1b")),
            event("evt_in_m2a", "invoice.paid", 0, invoice("in_m2a", subscription: "sub_m2", amountPaid: 12000, paidAt: t0, charge: "ch_m2a")),
            // The first payment refunded: pending, then succeeded; a refund of the second fails.
            event("evt_re_1_created", "refund.created", 16, refund("re_1", amount: 2000, created: t0 + 16 * day, status: "pending", charge: "ch_m1a")),
            event("evt_re_1_updated", "refund.updated", 17, refund("re_1", amount: 2000, created: t0 + 16 * day, status: "succeeded", charge: "ch_m1a")),
            event("evt_re_2_failed", "refund.failed", 22, refund("re_2", amount: 4000, created: t0 + 21 * day, status: "failed", paymentIntent: "pi_m1b")),
        ]
    }()

    // MARK: App Store (milliseconds, as Apple sends them)

    static let appStoreDay = AppStoreFactory.day
    static let a0 = AppStoreFactory.t0

    /// 3000: a 7-day free trial, two paid months of 9.99, the second refunded on day 40. 4000: a
    /// family member's copy. 5000: one paid month, then 6 days of billing grace.
    static let appStoreEvents: [[UInt8]] = {
        let F = AppStoreFactory.self
        let day = appStoreDay
        return [
            F.notification("SUBSCRIBED", "INITIAL_BUY", original: "3000", transaction: "3000", purchase: a0, expires: a0 + 7 * day, signed: a0,
                           transactionChanges: ["offerType": 1, "price": 0]),
            F.notification("DID_RENEW", original: "3000", transaction: "3001", purchase: a0 + 7 * day, expires: a0 + 37 * day, signed: a0 + 7 * day),
            F.notification("DID_RENEW", original: "3000", transaction: "3002", purchase: a0 + 37 * day, expires: a0 + 67 * day, signed: a0 + 37 * day),
            F.notification("REFUND", original: "3000", transaction: "3002", purchase: a0 + 37 * day, expires: a0 + 67 * day, signed: a0 + 40 * day,
                           transactionChanges: ["revocationDate": Int(a0 + 40 * day), "revocationReason": 0]),
            F.notification("SUBSCRIBED", "INITIAL_BUY", original: "4000", transaction: "4000", purchase: a0, expires: a0 + 30 * day, signed: a0,
                           transactionChanges: ["inAppOwnershipType": "FAMILY_SHARED"]),
            F.notification("SUBSCRIBED", "INITIAL_BUY", original: "5000", transaction: "5000", purchase: a0, expires: a0 + 30 * day, signed: a0),
            F.notification("DID_FAIL_TO_RENEW", "GRACE_PERIOD", original: "5000", transaction: "5000", purchase: a0, expires: a0 + 30 * day,
                           signed: a0 + 30 * day + 3_600_000, renewalChanges: ["gracePeriodExpiresDate": Int(a0 + 36 * day)]),
        ]
    }()

    /// Every delivery of both stores.
    static var deliveries: [MetricsDelivery] {
        stripeEvents.map { .stripe($0) } + appStoreEvents.map { .appStore($0) }
    }
}

/// A delivery of either store, as a test hands it to the inbox.
enum MetricsDelivery: Sendable {
    case stripe([UInt8])
    case appStore([UInt8])

    func inboxDelivery() throws -> InboxDelivery {
        switch self {
        case .stripe(let body): try EventFactory.delivery(body)
        case .appStore(let body): try AppStoreFactory.delivery(body)
        }
    }
}

/// The metrics' facts of a ledger, in one order whatever the order they were read in.
struct MetricsFacts: Equatable {
    var stripe: [StripeSubscriptionFacts]
    var appStore: [AppStoreSubscriptionFacts]
    var revenue: [RevenueEntry]

    static let environments = ["Sandbox"]
    static let scope = ServiceScope(livemode: false)

    init(_ store: any MetricsFactStore) async throws {
        stripe = try await store.stripeSubscriptions(scope: Self.scope).map { facts in
            var facts = facts
            facts.snapshots.sort { $0.version.eventID < $1.version.eventID }
            facts.paidInvoices.sort { $0.paidAt < $1.paidAt }
            return facts
        }.sorted { $0.id < $1.id }
        appStore = try await store.appStoreSubscriptions(environments: Self.environments).map { facts in
            var facts = facts
            facts.transactions.sort { $0.fact.transactionID < $1.fact.transactionID }
            return facts
        }.sorted { $0.originalTransactionID < $1.originalTransactionID }
        let stripeRange = try await store.revenueEntries(
            scope: Self.scope, appStoreEnvironments: [], from: MetricsScenario.t0, to: MetricsScenario.t0 + 60 * MetricsScenario.day)
        let appStoreRange = try await store.revenueEntries(
            scope: ServiceScope(account: "acct_none", livemode: true), appStoreEnvironments: Self.environments,
            from: MetricsScenario.a0 / 1000, to: MetricsScenario.a0 / 1000 + 60 * MetricsScenario.day)
        revenue = (stripeRange + appStoreRange).sorted { ($0.store.rawValue, $0.at, $0.amount) < ($1.store.rawValue, $1.at, $1.amount) }
    }

    /// The subscription histories the metrics build of these facts.
    var histories: [SubscriptionHistory] {
        stripe.map { facts in
            SubscriptionHistory.stripe(
                id: facts.id, plan: facts.price, snapshots: facts.snapshots, paidInvoices: facts.paidInvoices.map { ($0.paidAt, $0.refunded) })
        } + appStore.map { facts in
            SubscriptionHistory.appStore(
                id: facts.originalTransactionID, plan: nil, transactions: facts.transactions.map(\.fact), gracePeriodEnd: facts.gracePeriodEnd)
        }
    }
}

@Suite("Metrics facts, on both backends")
struct MetricsFactTests {
    typealias S = MetricsScenario

    /// Delivers in batches of three, so that a late event meets the ledger a newer one shaped.
    static func deliver(_ deliveries: [MetricsDelivery], to ledger: LedgerUnderTest) async throws {
        var index = 0
        while index < deliveries.count {
            let batch = deliveries[index..<min(index + 3, deliveries.count)]
            let pass = try await ledger.deliver(try batch.map { try $0.inboxDelivery() })
            if pass.failed + pass.dead > 0 {
                let failed = try await ledger.inbox.list(InboxFilter(statuses: [.failed, .dead]))
                Issue.record("\(pass.failed + pass.dead) deliveries not applied: \(failed.map { "\($0.type) \($0.eventID): \($0.lastError ?? "no error")" })")
            }
            index += 3
        }
    }

    /// Deliveries in a seeded random order, some of them twice or three times.
    static func shuffled(_ deliveries: [MetricsDelivery], seed: UInt64) -> [MetricsDelivery] {
        var random = SplitMix64(seed: seed)
        var result: [MetricsDelivery] = []
        for delivery in deliveries {
            result.append(delivery)
            if Int.random(in: 0..<10, using: &random) < 3 {
                for _ in 0..<Int.random(in: 1...2, using: &random) { result.append(delivery) }
            }
        }
        result.shuffle(using: &random)
        return result
    }

    static func snapshot(_ facts: StripeSubscriptionFacts, _ eventID: String) -> StripeSubscriptionSnapshot? {
        facts.snapshots.first { $0.version.eventID == eventID }
    }

    @Test("Delivered in order, the facts are the hand-computed ones", arguments: StoreBackend.allCases)
    func inOrder(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await Self.deliver(S.deliveries, to: ledger)
            let facts = try await MetricsFacts(ledger.store.metrics)

            #expect(facts.stripe.map(\.id) == ["sub_m1", "sub_m2"])
            let m1 = try #require(facts.stripe.first)
            #expect(m1.price == "price_pro")
            #expect(m1.snapshots.map(\.version.eventID) == ["evt_m1_active", "evt_m1_coupon", "evt_m1_created", "evt_m1_deleted", "evt_m1_seats"])
            let monthly = { (id: String) in Self.snapshot(m1, id)?.monthly.map { "\($0.currency) \($0.amount)" } }
            #expect(monthly("evt_m1_created") == "usd 2000")
            #expect(monthly("evt_m1_seats") == "usd 6000")
            #expect(monthly("evt_m1_coupon") == "usd 4500")
            #expect(Self.snapshot(m1, "evt_m1_created")?.status == .trialing)
            #expect(Self.snapshot(m1, "evt_m1_created")?.trialEnd == S.t0 + 14 * S.day)
            #expect(Self.snapshot(m1, "evt_m1_deleted")?.status == .canceled)
            #expect(Self.snapshot(m1, "evt_m1_deleted")?.version.terminal == true)
            #expect(m1.paidInvoices == [.init(paidAt: S.t0 + 14 * S.day, refunded: true), .init(paidAt: S.t0 + 20 * S.day, refunded: false)])
            let m2 = facts.stripe[1]
            #expect(m2.price == "price_pro_yearly")
            #expect(Self.snapshot(m2, "evt_m2_created")?.monthly.map { "\($0.currency) \($0.amount)" } == "usd 1000")
            #expect(Self.snapshot(m2, "evt_m2_paused")?.status == .paused)
            #expect(m2.paidInvoices == [.init(paidAt: S.t0, refunded: false)])

            #expect(facts.appStore.map(\.originalTransactionID) == ["3000", "4000", "5000"])
            let trial = facts.appStore[0].transactions.map(\.fact)
            #expect(trial.map(\.transactionID) == ["3000", "3001", "3002"])
            #expect(trial.map(\.isFreeTrial) == [true, false, false])
            #expect(trial.map(\.priceMilliunits) == [0, 9990, 9990])
            #expect(trial.map(\.purchase) == [S.a0 / 1000, (S.a0 + 7 * S.appStoreDay) / 1000, (S.a0 + 37 * S.appStoreDay) / 1000])
            #expect(trial[2].revokedAt == (S.a0 + 40 * S.appStoreDay) / 1000 && trial[2].refunded)
            #expect(trial[1].revokedAt == nil && !trial[1].refunded)
            #expect(facts.appStore[1].transactions.map(\.fact.isFamilyShared) == [true])
            #expect(facts.appStore[2].gracePeriodEnd == (S.a0 + 36 * S.appStoreDay) / 1000)
            #expect(facts.appStore[0].gracePeriodEnd == nil)

            let stripeDay = { (day: Int64) in S.t0 + day * S.day }
            let appStoreDay = { (day: Int64) in (S.a0 + day * S.appStoreDay) / 1000 }
            #expect(facts.revenue == [
                RevenueEntry(store: .appStore, kind: .payment, at: appStoreDay(0), currency: "usd", amount: 999),
                RevenueEntry(store: .appStore, kind: .payment, at: appStoreDay(7), currency: "usd", amount: 999),
                RevenueEntry(store: .appStore, kind: .payment, at: appStoreDay(37), currency: "usd", amount: 999),
                RevenueEntry(store: .appStore, kind: .refund, at: appStoreDay(40), currency: "usd", amount: 999),
                RevenueEntry(store: .stripe, kind: .payment, at: stripeDay(0), currency: "usd", amount: 12000),
                RevenueEntry(store: .stripe, kind: .payment, at: stripeDay(14), currency: "usd", amount: 2000),
                RevenueEntry(store: .stripe, kind: .refund, at: stripeDay(16), currency: "usd", amount: 2000),
                RevenueEntry(store: .stripe, kind: .payment, at: stripeDay(20), currency: "usd", amount: 4000),
            ])
        }
    }

    @Test("The figures of the facts are the hand-computed MRR, movement, trials and revenue", arguments: StoreBackend.allCases)
    func figures(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await Self.deliver(S.deliveries, to: ledger)
            let facts = try await MetricsFacts(ledger.store.metrics)
            let histories = facts.histories
            let day = { (day: Int64) in S.t0 + day * S.day }

            // Stripe: in trial, then 20.00, 3 seats and 10.00 a year's month, 45.00 after the coupon.
            let trialing = RevenueMetrics.overview(histories, at: day(1))
            #expect(trialing.mrr["usd"]?.stripe == 1000)
            #expect(trialing.activeSubscriptions.stripe == 1 && trialing.activeTrials.stripe == 1)
            #expect(RevenueMetrics.overview(histories, at: day(15)).mrr["usd"]?.stripe == 3000)
            #expect(RevenueMetrics.overview(histories, at: day(25)).mrr["usd"]?.stripe == 6000)
            #expect(RevenueMetrics.overview(histories, at: day(35)).mrr["usd"]?.stripe == 4500)
            #expect(RevenueMetrics.overview(histories, at: day(50)).mrr["usd"]?.stripe == 1000)

            // From day 15 to 25: sub_m1 grows by 40.00, sub_m2 pauses (10.00 churned).
            let growth = try #require(RevenueMetrics.movement(histories.filter { $0.store == .stripe }, from: day(15), to: day(25))["usd"])
            #expect(growth == MRRMovement(start: 3000, end: 6000, new: 0, reactivation: 0, expansion: 4000, contraction: 0, churned: 1000))
            // From day 25 to 35: the forever coupon takes 15.00 off.
            let coupon = try #require(RevenueMetrics.movement(histories.filter { $0.store == .stripe }, from: day(25), to: day(35))["usd"])
            #expect(coupon == MRRMovement(start: 6000, end: 4500, contraction: 1500))
            // From day 30 to 50: sub_m1 is canceled, sub_m2 resumes.
            let ending = try #require(RevenueMetrics.movement(histories.filter { $0.store == .stripe }, from: day(30), to: day(50))["usd"])
            #expect(ending == MRRMovement(start: 4500, end: 1000, new: 0, reactivation: 1000, expansion: 0, contraction: 0, churned: 4500))
            #expect(growth.balances && coupon.balances && ending.balances)

            // The refunded first payment undoes the trial's conversion.
            let trials = RevenueMetrics.trials(histories.filter { $0.store == .stripe }, from: day(0), to: day(1), now: day(60))
            #expect(trials.stripe == TrialFigures(started: 1, converted: 0, abandoned: 1, pending: 0))

            // App Store: a trial and a paying month; two paying; the second in grace; none.
            let appStoreAt = { (day: Int64) in RevenueMetrics.overview(histories, at: (S.a0 + day * S.appStoreDay) / 1000) }
            #expect(appStoreAt(3).mrr["usd"]?.appStore == 999 && appStoreAt(3).activeTrials.appStore == 1)
            #expect(appStoreAt(20).mrr["usd"]?.appStore == 1998 && appStoreAt(20).activeSubscriptions.appStore == 2)
            #expect(appStoreAt(33).mrr["usd"]?.appStore == 1998)
            #expect(appStoreAt(45).mrr["usd"]?.appStore == nil || appStoreAt(45).mrr["usd"]?.appStore == 0)

            let buckets = RevenueMetrics.revenue(facts.revenue.filter { $0.store == .stripe }, from: day(0), to: day(30), interval: .month)
            let gross = buckets.reduce(0) { $0 + ($1.byCurrency["usd"]?.stripe.gross ?? 0) }
            let refunds = buckets.reduce(0) { $0 + ($1.byCurrency["usd"]?.stripe.refunds ?? 0) }
            #expect(gross == 18000 && refunds == 2000)
        }
    }

    static func inOrderFacts(_ backend: StoreBackend) async throws -> (facts: MetricsFacts, dump: String) {
        var result: (MetricsFacts, String)?
        try await withLedger(backend) { ledger in
            try await deliver(S.deliveries, to: ledger)
            result = (try await MetricsFacts(ledger.store.metrics), try await ledger.dump())
        }
        return try #require(result)
    }

    @Test("Seeded random orders with duplicates and late events give the in-order facts, and replay gives them again",
          arguments: StoreBackend.allCases, [UInt64(1), 2, 3, 4])
    func randomOrders(_ backend: StoreBackend, seed: UInt64) async throws {
        let expected = try await Self.inOrderFacts(backend)
        try await withLedger(backend) { ledger in
            try await Self.deliver(Self.shuffled(S.deliveries, seed: seed), to: ledger)
            let facts = try await MetricsFacts(ledger.store.metrics)
            #expect(facts == expected.facts, "seed \(seed)")
            #expect(try await ledger.dump() == expected.dump, "seed \(seed)")

            let pass = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(pass.failed + pass.dead == 0)
            #expect(try await MetricsFacts(ledger.store.metrics) == expected.facts, "seed \(seed), after replay")
            #expect(try await ledger.dump() == expected.dump, "seed \(seed), after replay")
        }
    }

    @Test("Both backends keep the same facts and the same dump")
    func sameOnBothBackends() async throws {
        let sqlite = try await Self.inOrderFacts(.sqlite)
        let postgres = try await Self.inOrderFacts(.postgres)
        #expect(sqlite.facts == postgres.facts)
        #expect(sqlite.dump == postgres.dump)
    }

    @Test("A reconcile repair and a tombstone are facts at their fetches, and replay keeps them", arguments: StoreBackend.allCases)
    func reconcileFacts(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await Self.deliver([.stripe(S.stripeEvents[5])], to: ledger)
            // Reconcile finds sub_m2 paused (a missed event) and repairs it, then finds it gone.
            let json = try JSONSerialization.data(
                withJSONObject: S.subscription("sub_m2", status: "paused", price: "price_pro_yearly", unitAmount: 12000, interval: "year"))
            let fetched = try LedgerSnapshot.decode(
                kind: .subscription, deletion: false, eventType: nil, eventID: "fetch:req_repair", eventCreated: S.t0 + 20 * S.day,
                objectJSON: ArraySlice(json))
            let page = try await ledger.store.reconciliation.reconcile([fetched], account: "", livemode: false, dryRun: false, trackSeen: false, run: 1)
            #expect(page.drifts.map(\.outcome) == [.repaired])
            #expect(try await ledger.store.reconciliation.markGone(
                .subscription, id: "sub_m2", account: "", livemode: false, fetchedAt: S.t0 + 30 * S.day, fetchID: "fetch:req_gone", run: 1))

            let expected = ["evt_m2_created paying", "fetch:req_repair paused", "fetch:req_gone deleted"]
            func facts() async throws -> [String] {
                let facts = try await MetricsFacts(ledger.store.metrics).stripe
                return (facts.first?.snapshots ?? []).sorted { $0.version.eventCreated < $1.version.eventCreated }.map { snapshot in
                    "\(snapshot.version.eventID) " + (snapshot.version.deleted ? "deleted" : snapshot.status == .active ? "paying" : "\(snapshot.status)")
                }
            }
            #expect(try await facts() == expected)
            let history = try #require(try await MetricsFacts(ledger.store.metrics).histories.first)
            #expect(history.state(at: S.t0 + 10 * S.day) == .paying(currency: "usd", monthly: 1000))
            #expect(history.state(at: S.t0 + 25 * S.day) == .inactive)

            _ = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(try await facts() == expected, "replay rebuilds the events' facts and keeps the fetches'")
        }
    }
}
