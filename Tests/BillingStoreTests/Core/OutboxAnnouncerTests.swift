import BillingCore
import Foundation
import Testing

@testable import BillingStore

/// The outbox's texts, written without an encoder: the payload the app's backend parses and the
/// state billingd keeps per user to diff the next view against.
@Suite("Outbox payloads and kept states")
struct OutboxAnnouncerTests {
    static let pro = UserAccessState(
        plan: "pro", entitled: true, why: "active", source: "stripe", subscriptionID: "sub_1", status: "active", price: "price_pro",
        periodEnd: 1_772_359_200, cancelScheduled: true, features: ["export", "read"],
        limits: ["seats": "5", "items_per_month": "unlimited", "a\"quoted\\key": "1"])

    static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test("A payload is one JSON object: the README's fields, changes.previous in snake case with every field, then data")
    func payloadFields() throws {
        let header = OutboxAnnouncer.PayloadHeader(
            id: "msg_1", type: "subscription.plan_changed", created: 1_770_000_000, user: "user \"42\"\n\u{1}ü", livemode: false,
            account: nil, source: "stripe", changes: .init(fields: ["plan", "limits"], previous: Self.pro))
        let bytes = OutboxAnnouncer.payload(header, data: Array(#"{"subscription":{"plan":"team"}}"#.utf8))
        let payload = try Self.object(bytes)
        #expect(payload["id"] as? String == "msg_1")
        #expect(payload["type"] as? String == "subscription.plan_changed")
        #expect(payload["created"] as? Int == 1_770_000_000)
        #expect(payload["user"] as? String == "user \"42\"\n\u{1}ü", "a user id with quotes and control characters survives")
        #expect(payload["livemode"] as? Bool == false)
        #expect(payload["account"] is NSNull)
        #expect(payload["source"] as? String == "stripe")
        #expect(payload["refund"] == nil, "only a Stripe refund has a refund object")
        #expect(((payload["data"] as? [String: Any])?["subscription"] as? [String: Any])?["plan"] as? String == "team")
        let changes = try #require(payload["changes"] as? [String: Any])
        #expect(changes["fields"] as? [String] == ["plan", "limits"])
        let previous = try #require(changes["previous"] as? [String: Any])
        #expect(Set(previous.keys) == [
            "plan", "entitled", "why", "source", "subscription_id", "status", "price", "period_end", "cancel_scheduled",
            "billing_issue", "revoked", "features", "limits",
        ])
        #expect(previous["subscription_id"] as? String == "sub_1")
        #expect(previous["period_end"] as? Int == 1_772_359_200)
        #expect(previous["cancel_scheduled"] as? Bool == true)
        #expect(previous["limits"] as? [String: String] == Self.pro.limits, "limit keys are written as they are, not converted")

        let first = OutboxAnnouncer.payload(
            .init(id: "msg_2", type: "subscription.started", created: 1, user: "u", livemode: true, account: "acct_1", source: nil,
                changes: .init(fields: ["plan"], previous: nil)), data: [])
        let started = try Self.object(first)
        #expect((started["changes"] as? [String: Any])?["previous"] is NSNull, "a user's first event has no previous state")
        #expect(started["data"] is NSNull)
        #expect(started["account"] as? String == "acct_1")
    }

    @Test("The kept state reads back as itself, and one state is always one text whatever its dictionary's order")
    func keptText() throws {
        let text = OutboxAnnouncer.encode(Self.pro)
        #expect(OutboxAnnouncer.decode(text) == Self.pro)
        var reordered = UserAccessState(plan: "pro", entitled: true, why: "active", source: "stripe", subscriptionID: "sub_1",
            status: "active", price: "price_pro", periodEnd: 1_772_359_200, cancelScheduled: true, features: ["export", "read"])
        for key in Self.pro.limits.keys.sorted().reversed() { reordered.limits[key] = Self.pro.limits[key] }
        #expect(OutboxAnnouncer.encode(reordered) == text)
        #expect(text.contains(#""limits":{"a\"quoted\\key":"1","items_per_month":"unlimited","seats":"5"}"#), "limits by key: \(text)")
        let free = UserAccessState(plan: "free", features: ["read"])
        #expect(OutboxAnnouncer.decode(OutboxAnnouncer.encode(free)) == free, "nil fields come back nil")
        #expect(OutboxAnnouncer.decode("not json") == nil)
    }

    @Test("A view kept in the encoder's earlier text is not announced again; a changed one is, with its previous state")
    func earlierKeptText() throws {
        let billing = UserBilling(user: "user_1", scope: .test, customers: [], subscriptions: [], stripeEntitlements: [])
        let policy = OutboxPolicy(
            catalog: .freeOnly, endpoints: ["https://app.example.com/hooks"], render: { _, _ in Array("{}".utf8) }, now: { 1_770_000_000 })
        let state = UserAccessState(billing.resolve(policy.catalog, now: 1_770_000_000))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let earlier = String(decoding: try encoder.encode(state), as: UTF8.self)
        #expect(earlier != OutboxAnnouncer.encode(state), "the earlier text leaves nil fields out")

        let same = OutboxAnnouncer.announce(billing: billing, kept: earlier, policy: policy, nowMilliseconds: 1_770_000_000_000)
        #expect(same.events.isEmpty, "the same view is not announced again")
        #expect(same.changed && same.text == OutboxAnnouncer.encode(state), "the earlier text is replaced by the current form")
        let again = OutboxAnnouncer.announce(billing: billing, kept: same.text, policy: policy, nowMilliseconds: 1_770_000_000_000)
        #expect(!again.changed)
        #expect(again.events.isEmpty)

        let lost = OutboxAnnouncer.announce(
            billing: billing, kept: OutboxAnnouncer.encode(Self.pro), policy: policy, nowMilliseconds: 1_770_000_000_000)
        #expect(lost.changed)
        #expect(lost.text == OutboxAnnouncer.encode(state))
        #expect(lost.events.map(\.type).contains("subscription.expired"))
        let payload = try Self.object(try #require(lost.events.first).payload)
        let previous = (payload["changes"] as? [String: Any])?["previous"] as? [String: Any]
        #expect(previous?["subscription_id"] as? String == "sub_1")
    }

    @Test("Event ids are msg_ and 26 characters of the base-32 alphabet, and do not repeat")
    func eventIDs() {
        let alphabet = Set("0123456789abcdefghjkmnpqrstvwxyz")
        let ids = (0..<2000).map { _ in OutboxAnnouncer.newEventID() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            #expect(id.hasPrefix("msg_") && id.count == 30)
            #expect(id.dropFirst(4).allSatisfy(alphabet.contains))
        }
        // Every position takes many values: no character is stuck (a shift gone wrong would leave zeros).
        for position in 4..<30 {
            let values = Set(ids.map { Array($0)[position] })
            #expect(values.count > 20, "position \(position) took only \(values.count) values")
        }
    }
}
