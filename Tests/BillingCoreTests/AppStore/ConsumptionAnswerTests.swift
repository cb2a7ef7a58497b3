import BillingCore
import Foundation
import Testing

@Suite("Answers to Apple's refund requests (Send Consumption Information v2)")
struct ConsumptionAnswerTests {
    static let requestedAt: Int64 = 1_767_225_600_000
    static let hour: Int64 = 3_600_000

    static func facts(
        consented: Bool = true, type: String? = AppStoreTransaction.autoRenewable, purchase: Int64? = requestedAt - 10 * hour,
        expires: Int64? = nil, revoked: Int64? = nil, period: AppStorePeriod? = nil, delivery: ConsumptionDeliveryStatus = .delivered,
        sample: Bool = false, usage: ConsumptionFacts.Usage? = nil
    ) -> ConsumptionFacts {
        ConsumptionFacts(
            requestedAt: requestedAt, consented: consented,
            transaction: type.map { ConsumptionFacts.Transaction(type: $0, purchaseDate: purchase, expiresDate: expires, revocationDate: revoked, period: period) },
            delivery: delivery, sampleContentProvided: sample, usage: usage)
    }

    static func body(_ decision: ConsumptionDecision) -> ConsumptionInformation? {
        if case .send(let body) = decision { body } else { nil }
    }

    @Test("The body is Apple's JSON: required members always, optional ones only when given, and it reads back")
    func json() throws {
        let minimal = ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false)
        #expect(String(decoding: minimal.json(), as: UTF8.self) == #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#)
        let full = ConsumptionInformation(
            customerConsented: true, deliveryStatus: .undeliveredOther, sampleContentProvided: true, refundPreference: .grantProrated,
            consumptionPercentage: 0)
        #expect(String(decoding: full.json(), as: UTF8.self)
            == #"{"consumptionPercentage":0,"customerConsented":true,"deliveryStatus":"UNDELIVERED_OTHER","refundPreference":"GRANT_PRORATED","sampleContentProvided":true}"#)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(full.json())) as? [String: Any])
        #expect(parsed["customerConsented"] as? Bool == true)
        #expect(ConsumptionInformation(json: full.json()) == full)
        #expect(ConsumptionInformation(json: minimal.json()) == minimal)
        #expect(ConsumptionInformation(json: Array(#"{"customerConsented":true,"deliveryStatus":"LOST","sampleContentProvided":false}"#.utf8)) == nil)
        #expect(ConsumptionInformation(json: Array("not json".utf8)) == nil)
    }

    @Test("A person reads what was told: delivery, preference, share consumed and sample")
    func summary() {
        let body = ConsumptionInformation(
            customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: true, refundPreference: .decline,
            consumptionPercentage: 67_932)
        #expect(body.summary == "DELIVERED, refund preference DECLINE, 67.932% consumed, sample content provided")
        #expect(ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false).summary
            == "DELIVERED, no refund preference, no sample content")
        #expect(ConsumptionInformation.percent(40_000) == "40%")
        #expect(ConsumptionInformation.percent(15) == "0.015%")
        #expect(ConsumptionInformation.percent(100_000) == "100%")
        #expect(ConsumptionInformation.percent(50_500) == "50.5%")
    }

    @Test("Nothing is sent after Apple's 12 hours, nor without consent; up to the last millisecond it is")
    func window() {
        let policy = ConsumptionAnswerPolicy()
        let deadline = ConsumptionAnswerPolicy.deadline(requestedAt: Self.requestedAt)
        #expect(deadline == Self.requestedAt + 12 * Self.hour)
        #expect(policy.decide(Self.facts(), now: deadline) == .expired)
        #expect(policy.decide(Self.facts(), now: deadline + 1) == .expired)
        #expect(policy.decide(Self.facts(consented: false), now: deadline) == .expired)
        #expect(Self.body(policy.decide(Self.facts(), now: deadline - 1)) != nil)
        #expect(policy.decide(Self.facts(consented: false), now: Self.requestedAt) == .noConsent)
    }

    @Test("APPSTORE_REFUND_PREFERENCE sets refundPreference; an auto-renewable subscription never gets a consumption percentage", arguments: [
        (AppStoreRefundPolicy.none, ConsumptionRefundPreference?.none), (.decline, .decline), (.grantFull, .grantFull), (.grantProrated, .grantProrated),
    ])
    func refundPreference(_ setting: AppStoreRefundPolicy, expected: ConsumptionRefundPreference?) throws {
        let policy = ConsumptionAnswerPolicy(refund: setting)
        for delivery in ConsumptionDeliveryStatus.allCases {
            let body = try #require(Self.body(policy.decide(Self.facts(delivery: delivery, sample: true), now: Self.requestedAt + Self.hour)))
            #expect(body.customerConsented)
            #expect(body.refundPreference == expected)
            #expect(body.deliveryStatus == delivery)
            #expect(body.sampleContentProvided)
            #expect(body.consumptionPercentage == nil)
        }
        #expect(AppStoreRefundPolicy(setting: setting.description) == setting)
    }

    @Test("A non-renewing subscription's share is the time used of its period: to now, or to its revocation; by the catalog's period without an expiry")
    func nonRenewingShare() throws {
        let start = Self.requestedAt - 10 * Self.hour
        let end = start + 40 * Self.hour
        let now = Self.requestedAt  // 10 of 40 hours used
        let policy = ConsumptionAnswerPolicy()
        func share(_ facts: ConsumptionFacts, policy: ConsumptionAnswerPolicy = policy, at instant: Int64 = now) throws -> Int64? {
            try #require(Self.body(policy.decide(facts, now: instant))).consumptionPercentage
        }
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: start, expires: end)) == 25_000)
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: start, expires: end, revoked: start + 4 * Self.hour)) == 10_000)
        // Past its end: all of it.
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: start - 100 * Self.hour, expires: end - 100 * Self.hour)) == 100_000)
        // No expiry from Apple: the catalog's period (a week, 168 hours in Production).
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: start, period: .oneWeek)) == 10 * 100_000 / 168)
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: start)) == nil)
        // GRANT_PRORATED takes a share strictly between 0 and 100 %.
        let prorated = ConsumptionAnswerPolicy(refund: .grantProrated)
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: now, expires: end), policy: prorated) == 1)
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: start - 100 * Self.hour, expires: end - 100 * Self.hour), policy: prorated) == 99_999)
        #expect(try share(Self.facts(type: AppStoreTransaction.nonRenewing, purchase: start, expires: end), policy: prorated) == 25_000)
    }

    @Test("Consumables and non-consumables: unknown when delivered, 0 when not (left out with GRANT_PRORATED)", arguments: ["Consumable", AppStoreTransaction.nonConsumable])
    func oneTimePurchases(_ type: String) throws {
        let now = Self.requestedAt
        let delivered = try #require(Self.body(ConsumptionAnswerPolicy().decide(Self.facts(type: type), now: now)))
        #expect(delivered.consumptionPercentage == nil)
        let undelivered = try #require(Self.body(ConsumptionAnswerPolicy().decide(Self.facts(type: type, delivery: .undeliveredOther), now: now)))
        #expect(undelivered.consumptionPercentage == 0)
        let prorated = try #require(Self.body(ConsumptionAnswerPolicy(refund: .grantProrated).decide(Self.facts(type: type, delivery: .undeliveredOther), now: now)))
        #expect(prorated.consumptionPercentage == nil)
        // A transaction the ledger does not hold: nothing is known of it.
        #expect(try #require(Self.body(ConsumptionAnswerPolicy().decide(Self.facts(type: nil), now: now))).consumptionPercentage == nil)
    }

    @Test("Delivery: UNDELIVERED_OTHER only where billingd gates the product and its history shows this purchase never entitled the user", arguments: [
        (true, 3, false, ConsumptionDeliveryStatus.undeliveredOther),
        (true, 3, true, .delivered),
        (true, 0, false, .delivered),  // no history kept of the user: no evidence
        (false, 3, false, .delivered),  // a product the catalog does not map: the app delivers it
        (false, 0, false, .delivered),
    ])
    func delivery(_ productHasTier: Bool, records: Int, entitled: Bool, expected: ConsumptionDeliveryStatus) {
        #expect(ConsumptionDelivery.status(productHasTier: productHasTier, historyRecords: records, entitledThroughPurchase: entitled) == expected)
    }

    @Test("Every body the policy makes passes Apple's rules, over random purchases, times and settings")
    func everyBodyIsValid() throws {
        var generator = SystemRandomNumberGenerator()
        let types: [String?] = [AppStoreTransaction.autoRenewable, AppStoreTransaction.nonRenewing, AppStoreTransaction.nonConsumable, "Consumable", nil]
        for _ in 0..<2000 {
            let start = Self.requestedAt - Int64.random(in: 0...(400 * Self.hour), using: &generator)
            let length = Int64.random(in: 1...(300 * Self.hour), using: &generator)
            var facts = Self.facts(
                type: types.randomElement(using: &generator)!, purchase: Bool.random(using: &generator) ? start : nil,
                expires: Bool.random(using: &generator) ? start + length : nil,
                revoked: Bool.random(using: &generator) ? start + Int64.random(in: -Self.hour...(500 * Self.hour), using: &generator) : nil,
                period: Bool.random(using: &generator) ? AppStorePeriod.allCases.randomElement(using: &generator) : nil,
                delivery: ConsumptionDeliveryStatus.allCases.randomElement(using: &generator)!, sample: Bool.random(using: &generator))
            let full = Int64.random(in: 0...100_000, using: &generator)
            let thresholds = try #require(RefundUsageThresholds(grantFullBelow: full, declineFrom: Int64.random(in: full...100_000, using: &generator)))
            let policy = ConsumptionAnswerPolicy(refund: (AppStoreRefundPolicy.fixed + [.byUsage(thresholds)]).randomElement(using: &generator)!)
            let limit = Int64.random(in: 1...1_000, using: &generator)
            facts.usage = Bool.random(using: &generator)
                ? ConsumptionFacts.Usage(meter: "exports", used: Int64.random(in: 0...(2 * limit), using: &generator), limit: limit) : nil
            let now = Self.requestedAt + Int64.random(in: 0..<(12 * Self.hour), using: &generator)
            let body = try #require(Self.body(policy.decide(facts, now: now)))
            #expect(body.customerConsented)
            guard let percentage = body.consumptionPercentage else { continue }
            #expect(facts.transaction?.type != AppStoreTransaction.autoRenewable, "ConsumptionPercentageAutoRenewableSubscriptionError")
            #expect((0...100_000).contains(percentage), "ConsumptionPercentageOutOfRangeError")
            if body.deliveryStatus != .delivered { #expect(percentage == 0, "UndeliveredConsumptionPercentageNonZeroError") }
            if body.refundPreference == .grantProrated { #expect((1..<100_000).contains(percentage), "GRANT_PRORATED needs 0 < percentage < 100000") }
        }
    }

    @Test("by_usage: a full refund below the first threshold of the share used, prorated below the second, declined from it; none when the share is unknown", arguments: [
        (Int64(0), ConsumptionRefundPreference?.some(.grantFull)), (9_999, .grantFull), (10_000, .grantProrated), (49_999, .grantProrated),
        (50_000, .decline), (100_000, .decline), (nil, nil),
    ])
    func byUsage(_ share: Int64?, expected: ConsumptionRefundPreference?) throws {
        #expect(AppStoreRefundPolicy.byUsage(.standard).preference(shareUsed: share) == expected)
        // The same through a consumable whose meter the catalog names: used of 100,000.
        let facts = Self.facts(type: "Consumable", usage: share.map { ConsumptionFacts.Usage(meter: "exports", used: $0, limit: 100_000) })
        let body = try #require(Self.body(ConsumptionAnswerPolicy(refund: .byUsage(.standard)).decide(facts, now: Self.requestedAt)))
        #expect(body.refundPreference == expected)
        #expect(body.consumptionPercentage == share, "a consumable's share consumed is sent")
    }

    @Test("The share used: a named meter's use against the tier's limit (capped at all of it), else the time used of a subscription's period, unknown for a one-time purchase without a meter, 0 when not delivered")
    func shareUsed() throws {
        let start = Self.requestedAt - 10 * Self.hour
        let end = start + 40 * Self.hour
        let now = Self.requestedAt
        let renewing = Self.facts(type: AppStoreTransaction.autoRenewable, purchase: start, expires: end)
        #expect(ConsumptionAnswerPolicy.shareUsed(renewing, now: now) == 25_000, "10 of 40 hours")
        var metered = renewing
        metered.usage = ConsumptionFacts.Usage(meter: "exports", used: 300, limit: 400)
        #expect(ConsumptionAnswerPolicy.shareUsed(metered, now: now) == 75_000, "300 of 400 exports, not the time")
        metered.usage = ConsumptionFacts.Usage(meter: "exports", used: 900, limit: 400)
        #expect(ConsumptionAnswerPolicy.shareUsed(metered, now: now) == 100_000, "more than the limit is all of it")
        metered.delivery = .undeliveredOther
        #expect(ConsumptionAnswerPolicy.shareUsed(metered, now: now) == 0)
        #expect(ConsumptionAnswerPolicy.shareUsed(Self.facts(type: "Consumable"), now: now) == nil)
        #expect(ConsumptionAnswerPolicy.shareUsed(Self.facts(type: nil), now: now) == nil)

        // An auto-renewable subscription's share decides the preference, and is never sent.
        let policy = ConsumptionAnswerPolicy(refund: .byUsage(try #require(RefundUsageThresholds(grantFullBelow: 20_000, declineFrom: 70_000))))
        let early = try #require(Self.body(policy.decide(renewing, now: now)))
        #expect(early.refundPreference == .grantProrated && early.consumptionPercentage == nil)
        let nearEnd = Self.facts(type: AppStoreTransaction.autoRenewable, purchase: now - 35 * Self.hour, expires: now + 5 * Self.hour)
        let late = try #require(Self.body(policy.decide(nearEnd, now: now)))
        #expect(late.refundPreference == .decline && late.consumptionPercentage == nil)
        #expect(try #require(Self.body(policy.decide(Self.facts(type: "Consumable"), now: now))).refundPreference == nil, "unknown share: Apple decides")
        let undelivered = try #require(Self.body(policy.decide(Self.facts(type: "Consumable", delivery: .undeliveredOther), now: now)))
        #expect(undelivered.refundPreference == .grantFull && undelivered.consumptionPercentage == 0)

        // Exact in whole milliunits, rounded down, whatever the counts.
        #expect(ConsumptionAnswerPolicy.share(1, of: 3) == 33_333)
        #expect(ConsumptionAnswerPolicy.share(Int64.max - 1, of: Int64.max) == 99_999)
        #expect(ConsumptionAnswerPolicy.share(0, of: 0) == 0)
    }

    @Test("APPSTORE_REFUND_PREFERENCE's spellings: each fixed preference, by_usage with its standard or given thresholds, in any case; anything else is nil")
    func settingSpellings() throws {
        for policy in AppStoreRefundPolicy.fixed { #expect(AppStoreRefundPolicy(setting: policy.description.uppercased()) == policy) }
        #expect(AppStoreRefundPolicy(setting: "by_usage") == .byUsage(.standard))
        #expect(AppStoreRefundPolicy.byUsage(.standard).description == "by_usage:10,50")
        let given = try #require(RefundUsageThresholds(grantFullBelow: 2_500, declineFrom: 40_000))
        #expect(AppStoreRefundPolicy(setting: "BY_USAGE:2.5,40") == .byUsage(given))
        #expect(AppStoreRefundPolicy.byUsage(given).description == "by_usage:2.5,40")
        #expect(AppStoreRefundPolicy(setting: "by_usage:0,100") == .byUsage(try #require(RefundUsageThresholds(grantFullBelow: 0, declineFrom: 100_000))))
        #expect(AppStoreRefundPolicy(setting: "by_usage:30,30") != nil, "no prorated band")
        for bad in ["by_usage:50,10", "by_usage:10,101", "by_usage:10", "by_usage:10,50,90", "by_usage:-1,50", "by_usage:1.2345,50", "by_usage:,50",
                    "by_usage:10.,50", "by_usage: 10,50", "prorated", "by_usage:ten,fifty", ""] {
            #expect(AppStoreRefundPolicy(setting: bad) == nil, "\(bad)")
        }
    }
}
