import BillingCore
import Foundation
import Testing

private let day: Int64 = 86_400
private let now: Int64 = 1_800_000_000

/// Free, Pro (7 days of grace), Team (per seat, unlimited grace), Enterprise (no grace).
private let catalog = try! planCatalog("""
    {"tiers": [
      {"id": "free", "name": "Free", "rank": 0, "features": ["read"], "limits": {"projects": 3, "storage_gb": 1}},
      {"id": "pro", "name": "Pro", "rank": 10, "stripe": {"prices": [{"lookup_key": "pro_monthly", "interval": "month"},
        {"id": "price_ProYearly", "interval": "year"}], "products": ["prod_TjU5xN8wKq3Rme"]},
       "features": ["read", "export"], "limits": {"projects": 100, "storage_gb": 50}, "past_due_grace_days": 7},
      {"id": "team", "name": "Team", "rank": 20, "stripe": {"prices": [{"lookup_key": "team_seat"}]},
       "features": ["read", "export", "share"], "limits": {"seats": "quantity", "storage_gb": {"per_quantity": 5}, "projects": "unlimited"},
       "past_due_grace_days": "unlimited"},
      {"id": "enterprise", "name": "Enterprise", "rank": 30, "stripe": {"prices": [{"id": "price_Ent"}]}}
    ]}
    """)

/// A subscription to `lookupKey` (or `price`) in `status`, its period from 10 days ago to 20
/// days ahead, on the items (the 2025+ shape).
private func subscription(
    _ id: String = "sub_1", status: SubscriptionStatus, lookupKey: String? = "pro_monthly", price: String = "price_X",
    quantity: Int64? = 1, created: Int64 = now - 100 * day, periodStart: Int64 = now - 10 * day, periodEnd: Int64 = now + 20 * day,
    configure: (inout LedgerSubscription) -> Void = { _ in }
) -> LedgerSubscription {
    var subscription = LedgerSubscription(
        id: id, customer: "cus_1", status: status, created: created, currency: "usd",
        currentPeriodStart: periodStart, currentPeriodEnd: periodEnd,
        items: [.init(
            id: "si_\(id)", price: price, product: "prod_Other", lookupKey: lookupKey, quantity: quantity, unitAmount: 2900,
            currency: "usd", interval: .month, intervalCount: 1, currentPeriodStart: periodStart, currentPeriodEnd: periodEnd)])
    configure(&subscription)
    return subscription
}

private func limits(_ resolution: PlanResolution) -> [String: EntitlementLimit] {
    Dictionary(uniqueKeysWithValues: resolution.limits.map { ($0.key, $0.value) })
}

@Suite("Plan resolution: a user's tier from their subscriptions")
struct PlanResolutionTests {
    @Test("A user without subscriptions gets the default tier")
    func noSubscriptions() {
        let resolution = catalog.resolve([], now: now)
        #expect(resolution.plan == "free")
        #expect(resolution.why == .free)
        #expect(!resolution.entitled)
        #expect(resolution.subscription == nil)
        #expect(resolution.validUntil == nil)
        #expect(resolution.features == ["read"])
        #expect(limits(resolution) == ["projects": .count(3), "storage_gb": .count(1)])
    }

    @Test("Every status: what it grants and why", arguments: [
        (SubscriptionStatus.trialing, AccessReason.trialing, "pro"),
        (.active, .active, "pro"),
        (.pastDue, .grace, "pro"),
        (.unpaid, .expired, "free"),
        (.incomplete, .incomplete, "free"),
        (.incompleteExpired, .expired, "free"),
        (.canceled, .expired, "free"),
        (.paused, .paused, "free"),
        ("some_future_status", .expired, "free"),
    ])
    func everyStatus(status: SubscriptionStatus, why: AccessReason, plan: String) {
        // past_due three days after the invoice fell due: inside Pro's 7 days of grace.
        let resolution = catalog.resolve(
            [subscription(status: status) { $0.unpaidInvoiceDueAt = now - 3 * day; $0.trialEnd = now + 5 * day }], now: now)
        #expect(resolution.why == why)
        #expect(resolution.plan == plan)
        #expect(resolution.entitled == why.grantsAccess)
        #expect(resolution.subscription?.status == status)
        #expect(resolution.features == catalog.tier(id: plan)?.features)
        if !why.grantsAccess { #expect(resolution.validUntil == nil) }
    }

    @Test("trialing is valid until the trial ends; active until the period ends")
    func validity() {
        let trial = catalog.resolve([subscription(status: .trialing) { $0.trialEnd = now + 5 * day }], now: now)
        #expect(trial.validUntil == now + 5 * day)
        #expect(trial.endsAt == nil)
        let active = catalog.resolve([subscription(status: .active)], now: now)
        #expect(active.validUntil == now + 20 * day)
        #expect(active.endsAt == nil)
        #expect(active.graceUntil == nil)
        #expect(active.item?.lookupKey == "pro_monthly")
    }

    @Test("past_due keeps the tier for its grace days from the unpaid invoice's due date, not after")
    func pastDueGrace() {
        let inside = catalog.resolve([subscription(status: .pastDue) { $0.unpaidInvoiceDueAt = now - 6 * day }], now: now)
        #expect(inside.why == .grace)
        #expect(inside.plan == "pro")
        #expect(inside.graceUntil == now + day)
        #expect(inside.validUntil == now + day)

        let after = catalog.resolve([subscription(status: .pastDue) { $0.unpaidInvoiceDueAt = now - 8 * day }], now: now)
        #expect(after.why == .expired)
        #expect(after.plan == "free")
        #expect(!after.entitled)
        #expect(after.subscription?.status == .pastDue)
        #expect(after.graceUntil == nil)

        let exactlyAtTheEnd = catalog.resolve([subscription(status: .pastDue) { $0.unpaidInvoiceDueAt = now - 7 * day }], now: now)
        #expect(exactlyAtTheEnd.why == .expired)
    }

    @Test("Without the unpaid invoice in the ledger, grace counts from the current period's start")
    func pastDueFromPeriodStart() {
        let inside = catalog.resolve([subscription(status: .pastDue, periodStart: now - 2 * day)], now: now)
        #expect(inside.why == .grace)
        #expect(inside.graceUntil == now + 5 * day)
        let after = catalog.resolve([subscription(status: .pastDue, periodStart: now - 9 * day)], now: now)
        #expect(after.why == .expired)
    }

    @Test("A tier without grace loses access at once; unlimited grace lasts while Stripe keeps it past_due")
    func graceKinds() {
        let none = catalog.resolve([subscription(status: .pastDue, lookupKey: nil, price: "price_Ent") { $0.unpaidInvoiceDueAt = now - 60 }], now: now)
        #expect(none.why == .expired)
        #expect(none.plan == "free")

        let unlimited = catalog.resolve([subscription(status: .pastDue, lookupKey: "team_seat") { $0.unpaidInvoiceDueAt = now - 300 * day }], now: now)
        #expect(unlimited.why == .grace)
        #expect(unlimited.plan == "team")
        #expect(unlimited.graceUntil == nil)
        #expect(unlimited.validUntil == now + 20 * day)
    }

    @Test("Canceled at period end: the tier lasts until the end, even before Stripe's deleted event arrives, and not after")
    func cancelAtPeriodEnd() {
        let before = catalog.resolve([subscription(status: .active, periodEnd: now + 5 * day) { $0.cancelAtPeriodEnd = true }], now: now)
        #expect(before.why == .canceling)
        #expect(before.plan == "pro")
        #expect(before.validUntil == now + 5 * day)
        #expect(before.endsAt == now + 5 * day)

        // The period is over but customer.subscription.deleted has not arrived yet.
        let after = catalog.resolve([subscription(status: .active, periodEnd: now - 1) { $0.cancelAtPeriodEnd = true }], now: now)
        #expect(after.why == .expired)
        #expect(after.plan == "free")
        #expect(after.endsAt == now - 1)

        // Then Stripe's deleted event makes it canceled.
        let deleted = catalog.resolve(
            [subscription(status: .canceled, periodEnd: now - 1) { $0.canceledAt = now - 10 * day; $0.endedAt = now - 1 }], now: now)
        #expect(deleted.why == .expired)
        #expect(deleted.endsAt == now - 1)

        let trialCanceled = catalog.resolve(
            [subscription(status: .trialing) { $0.trialEnd = now + 3 * day; $0.cancelAt = now + 3 * day }], now: now)
        #expect(trialCanceled.why == .canceling)
        #expect(trialCanceled.validUntil == now + 3 * day)
    }

    @Test("cancel_at ends access at that time, also while past_due")
    func cancelAt() {
        let scheduled = catalog.resolve([subscription(status: .active) { $0.cancelAt = now + 2 * day }], now: now)
        #expect(scheduled.why == .canceling)
        #expect(scheduled.validUntil == now + 2 * day)
        let graceCut = catalog.resolve(
            [subscription(status: .pastDue) { $0.cancelAt = now + day; $0.unpaidInvoiceDueAt = now - day }], now: now)
        #expect(graceCut.why == .grace)
        #expect(graceCut.graceUntil == now + 6 * day)
        #expect(graceCut.validUntil == now + day)
        let passed = catalog.resolve([subscription(status: .pastDue) { $0.cancelAt = now - 1; $0.unpaidInvoiceDueAt = now - day }], now: now)
        #expect(passed.why == .expired)
    }

    @Test("Several subscriptions: the highest-ranked granting tier wins")
    func highestRank() {
        let both = catalog.resolve(
            [subscription("sub_pro", status: .active), subscription("sub_team", status: .trialing, lookupKey: "team_seat", quantity: 3)],
            now: now)
        #expect(both.plan == "team")
        #expect(both.subscription?.id == "sub_team")

        // A higher tier that grants nothing does not win over a lower one that does.
        let lapsed = catalog.resolve(
            [subscription("sub_pro", status: .active), subscription("sub_ent", status: .pastDue, lookupKey: nil, price: "price_Ent")],
            now: now)
        #expect(lapsed.plan == "pro")
        #expect(lapsed.subscription?.id == "sub_pro")
    }

    @Test("Same tier twice: the later valid_until wins")
    func tieOnRank() {
        let resolution = catalog.resolve(
            [subscription("sub_a", status: .active, periodEnd: now + 5 * day), subscription("sub_b", status: .active, periodEnd: now + 50 * day),
             subscription("sub_c", status: .active, periodEnd: now + 10 * day)],
            now: now)
        #expect(resolution.subscription?.id == "sub_b")
        #expect(resolution.validUntil == now + 50 * day)
    }

    @Test("When nothing grants, the most relevant subscription explains why: a live one before an ended one")
    func decidingWithoutAccess() {
        let resolution = catalog.resolve(
            [subscription("sub_new", status: .incomplete, created: now - day),
             subscription("sub_old", status: .canceled, created: now - 10 * day) { $0.endedAt = now - 5 * day },
             subscription("sub_newest_ended", status: .incompleteExpired, created: now - 60)],
            now: now)
        #expect(resolution.why == .incomplete)
        #expect(resolution.subscription?.id == "sub_new")
        let ended = catalog.resolve(
            [subscription("sub_old", status: .canceled, created: now - 10 * day) { $0.endedAt = now - 5 * day },
             subscription("sub_newer", status: .canceled, created: now - 2 * day) { $0.endedAt = now - day }],
            now: now)
        #expect(ended.why == .expired)
        #expect(ended.subscription?.id == "sub_newer")
        #expect(ended.endsAt == now - day)
    }

    @Test("Per-seat limits count the subscription item's quantity", arguments: [(Int64(12), Int64(60)), (1, 5), (0, 0)])
    func seats(quantity: Int64, storage: Int64) {
        let resolution = catalog.resolve([subscription(status: .active, lookupKey: "team_seat", quantity: quantity)], now: now)
        #expect(resolution.plan == "team")
        #expect(resolution.quantity == quantity)
        #expect(limits(resolution) == ["seats": .count(quantity), "storage_gb": .count(storage), "projects": .unlimited])
    }

    @Test("An item without a quantity (metered) counts as one")
    func missingQuantity() {
        let resolution = catalog.resolve([subscription(status: .active, lookupKey: "team_seat", quantity: nil)], now: now)
        #expect(limits(resolution)["seats"] == .count(1))
    }

    @Test("Of several items the highest tier grants, and of its items the largest quantity counts")
    func severalItems() {
        var sub = subscription(status: .active)
        sub.items.append(.init(id: "si_team_a", lookupKey: "team_seat", quantity: 4))
        sub.items.append(.init(id: "si_team_b", lookupKey: "team_seat", quantity: 9))
        let resolution = catalog.resolve([sub], now: now)
        #expect(resolution.plan == "team")
        #expect(resolution.item?.id == "si_team_b")
        #expect(limits(resolution)["seats"] == .count(9))
        // The item's own period end is the one that counts (it falls back to the subscription's).
        #expect(resolution.validUntil == now + 20 * day)
    }

    @Test("A granting price that no tier names: plan null, the default tier's features and limits")
    func unmappedPrice() {
        let resolution = catalog.resolve([subscription(status: .active, lookupKey: "mystery", price: "price_Mystery")], now: now)
        #expect(resolution.entitled)
        #expect(resolution.plan == nil)
        #expect(resolution.tier.id == "free")
        #expect(resolution.why == .active)
        #expect(resolution.unmappedPrice == "price_Mystery")
        #expect(limits(resolution) == ["projects": .count(3), "storage_gb": .count(1)])

        let withPro = catalog.resolve(
            [subscription("sub_m", status: .active, lookupKey: "mystery", price: "price_Mystery", periodEnd: now + 99 * day),
             subscription("sub_p", status: .active)],
            now: now)
        #expect(withPro.plan == "pro")
        #expect(withPro.unmappedPrice == nil)

        let lapsed = catalog.resolve([subscription(status: .unpaid, lookupKey: nil, price: "price_Mystery")], now: now)
        #expect(lapsed.plan == "free")
        #expect(lapsed.unmappedPrice == nil)
    }

    @Test("Stripe's active entitlements are passed through, sorted and unique")
    func stripeEntitlements() {
        let resolution = catalog.resolve([], stripeEntitlements: ["sso", "api", "sso"], now: now)
        #expect(resolution.stripeEntitlements == ["api", "sso"])
    }

    @Test("Both API shapes give the same answer: periods on the items (2025+) or on the subscription (before)", arguments: [
        "subscription", "subscription_2023-08-16",
    ])
    func apiShapes(fixture: String) throws {
        let decoded = try Fixtures.decode(Subscription.self, fixture)
        let subscription = LedgerSubscription(decoded)
        #expect(subscription.items.first?.currentPeriodEnd == 1_772_359_200)
        let at: Int64 = 1_770_000_000
        let resolution = catalog.resolve([subscription], now: at)
        #expect(resolution.plan == "pro")
        #expect(resolution.why == .active)
        #expect(resolution.validUntil == 1_772_359_200)
        #expect(resolution.item?.price == "price_1SmQ2aHd3QfR8sTaYq7Vh3Lc")

        var canceling = subscription
        canceling.cancelAtPeriodEnd = true
        #expect(catalog.resolve([canceling], now: at).endsAt == 1_772_359_200)
        #expect(catalog.resolve([canceling], now: 1_772_359_200).why == .expired)
    }
}
