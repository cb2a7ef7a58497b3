import BillingCore
import Foundation
import Testing

private let day: Int64 = 86_400
private let now: Int64 = 1_800_000_000

private let catalog = try! planCatalog("""
    {"tiers": [
      {"id": "free", "name": "Free", "rank": 0, "features": ["read"], "limits": {"projects": 3}},
      {"id": "pro", "name": "Pro", "rank": 10, "stripe": {"prices": [{"lookup_key": "pro_monthly"}]},
       "features": ["read", "export"], "limits": {"projects": 100}},
      {"id": "enterprise", "name": "Enterprise", "rank": 30, "stripe": {"prices": [{"lookup_key": "ent_monthly"}]},
       "features": ["read", "export", "sso"], "limits": {"projects": "unlimited"}}
    ]}
    """)

private func grant(
    _ id: String = "grant_a", tier: String = "pro", startsAt: Int64 = now - day, expiresAt: Int64 = now + 7 * day, revokedAt: Int64? = nil
) -> PromotionalGrant {
    PromotionalGrant(
        id: id, tier: tier, startsAt: startsAt, expiresAt: expiresAt, reason: "support ticket 4411", createdBy: "console:support",
        revokedAt: revokedAt, revokedBy: revokedAt == nil ? nil : "console:support")
}

private func subscription(_ lookupKey: String, periodEnd: Int64 = now + 20 * day) -> LedgerSubscription {
    LedgerSubscription(
        id: "sub_\(lookupKey)", customer: "cus_1", status: .active, created: now - 100 * day, currency: "usd",
        currentPeriodStart: now - 10 * day, currentPeriodEnd: periodEnd,
        items: [.init(
            id: "si_1", price: "price_\(lookupKey)", product: "prod_1", lookupKey: lookupKey, quantity: 1, unitAmount: 2900,
            currency: "usd", interval: .month, intervalCount: 1, currentPeriodStart: now - 10 * day, currentPeriodEnd: periodEnd)])
}

@Suite("Promotional grants in plan resolution")
struct PromotionalGrantResolutionTests {
    @Test("A grant alone entitles to its tier until its expiry, with source grant and its id")
    func grantAlone() {
        let resolution = catalog.resolve([], grants: [grant()], now: now)
        #expect(resolution.entitled)
        #expect(resolution.plan == "pro")
        #expect(resolution.why == .granted)
        #expect(resolution.source == .grant)
        #expect(resolution.grant?.id == "grant_a")
        #expect(resolution.grantStatus == "active")
        #expect(resolution.validUntil == now + 7 * day)
        #expect(resolution.features == ["read", "export"])
        #expect(resolution.subscription == nil)
    }

    @Test("Access ends at expires_at by date: one second before it is Pro, at it Free (expired, the grant deciding)")
    func endsByDate() {
        let expiry = now + 7 * day
        #expect(catalog.resolve([], grants: [grant()], now: expiry - 1).plan == "pro")
        let after = catalog.resolve([], grants: [grant()], now: expiry)
        #expect(!after.entitled)
        #expect(after.plan == "free")
        #expect(after.why == .expired)
        #expect(after.source == .grant)
        #expect(after.grantStatus == "expired")
        #expect(after.endsAt == expiry)
    }

    @Test("A revoked grant grants nothing")
    func revoked() {
        let resolution = catalog.resolve([], grants: [grant(revokedAt: now - 60)], now: now)
        #expect(!resolution.entitled)
        #expect(resolution.plan == "free")
        #expect(resolution.grantStatus == "revoked")
        #expect(resolution.endsAt == now - 60)
    }

    @Test("A higher tier wins across sources: a Pro grant over nothing, Enterprise Stripe over a Pro grant, an Enterprise grant over Pro Stripe")
    func highestTierWins() {
        let proStripe = subscription("pro_monthly")
        let entStripe = subscription("ent_monthly")
        let overPro = catalog.resolve([proStripe], grants: [grant(tier: "enterprise")], now: now)
        #expect(overPro.plan == "enterprise")
        #expect(overPro.source == .grant)
        #expect(overPro.subscription == nil)
        let underEnterprise = catalog.resolve([entStripe], grants: [grant(tier: "pro")], now: now)
        #expect(underEnterprise.plan == "enterprise")
        #expect(underEnterprise.source == .stripe)
        #expect(underEnterprise.grant == nil)
        #expect(underEnterprise.subscription?.id == "sub_ent_monthly")
    }

    @Test("Of one tier, the later validity wins: a grant longer than the Stripe period decides, a shorter one does not")
    func sameTierLaterValidity() {
        let stripe = subscription("pro_monthly", periodEnd: now + 20 * day)
        #expect(catalog.resolve([stripe], grants: [grant(expiresAt: now + 30 * day)], now: now).source == .grant)
        #expect(catalog.resolve([stripe], grants: [grant(expiresAt: now + 10 * day)], now: now).source == .stripe)
        // Once the grant expires the subscription decides again, with no job run.
        #expect(catalog.resolve([stripe], grants: [grant(expiresAt: now + 10 * day)], now: now + 11 * day).source == .stripe)
    }

    @Test("A grant of a tier the catalog no longer has grants nothing")
    func unknownTier() {
        let resolution = catalog.resolve([], grants: [grant(tier: "gold")], now: now)
        #expect(!resolution.entitled)
        #expect(resolution.plan == "free")
    }

    @Test("The announced state of a grant: its id as the subscription, active until its expiry; revoked ends it without a refund")
    func accessState() {
        let active = UserAccessState(catalog.resolve([], grants: [grant()], now: now))
        #expect(active.source == "grant" && active.subscriptionID == "grant_a" && active.status == "active" && active.entitled)
        #expect(active.periodEnd == now + 7 * day)
        let revoked = UserAccessState(catalog.resolve([], grants: [grant(revokedAt: now)], now: now))
        #expect(!revoked.entitled && !revoked.revoked && revoked.status == "revoked")
        #expect(OutboundEventRules.events(from: nil, to: active) == [.subscriptionStarted, .entitlementUpdated])
        #expect(OutboundEventRules.events(from: active, to: revoked) == [.subscriptionExpired, .entitlementUpdated])
    }
}

@Suite("Grant durations (ISO 8601)")
struct GrantDurationTests {
    @Test("Durations and their ends", arguments: [
        ("P7D", 7 * day), ("P2W", 14 * day), ("PT12H", 12 * 3600), ("P1DT12H", 36 * 3600), ("PT90M", 90 * 60), ("PT30S", 30),
    ] as [(String, Int64)])
    func fixedLengths(_ text: String, _ seconds: Int64) throws {
        let duration = try #require(GrantDuration(iso8601: text))
        #expect(duration.end(from: now) == now + seconds)
    }

    @Test("Months and years are calendar months in UTC, clamped to the month's last day")
    func calendarMonths() throws {
        // 2026-01-31T10:00:00Z + P1M = 2026-02-28T10:00:00Z; + P1Y = 2027-01-31; 2024-02-29 + P1Y = 2025-02-28.
        let january31 = Int64(1_769_853_600)
        #expect(try #require(GrantDuration(iso8601: "P1M")).end(from: january31) == 1_772_272_800)
        #expect(try #require(GrantDuration(iso8601: "P1Y")).end(from: january31) == january31 + 365 * day)
        let leapDay = Int64(1_709_164_800)
        #expect(try #require(GrantDuration(iso8601: "P1Y")).end(from: leapDay) == leapDay + 365 * day)
        #expect(try #require(GrantDuration(iso8601: "P1Y2M")).end(from: january31) == 1_806_487_200)
    }

    @Test("What is not such a duration is refused", arguments: [
        "", "P", "PT", "7D", "P7", "P-7D", "P1.5D", "P7DT", "P0D", "PT0H", "P7D7D", "P1H", "PT1D", "p7d", "P1234567D", "P7D ", "P1MT",
    ])
    func refused(_ text: String) {
        #expect(GrantDuration(iso8601: text) == nil)
    }
}
