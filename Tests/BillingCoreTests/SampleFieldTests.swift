import BillingCore
import BillingSamples
import Foundation
import Testing

@Suite("trigger --set: fields of a sample by path")
struct SampleFieldTests {
    /// The sample's data.object with `fields` set.
    func object(_ type: String, _ fields: [String]) throws -> [String: Any] {
        let body = try SampleEvent.body(
            type: type, eventID: "evt_1", created: 1_795_400_000, apiVersion: StripeAPIVersion.pinned, livemode: false, account: nil,
            fields: try fields.map(SampleField.init(parsing:)))
        let event = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        return try #require((event["data"] as? [String: Any])?["object"] as? [String: Any])
    }

    @Test("A dotted path reaches a nested field, and JSON values keep their type (issue 17 item 1)")
    func nestedAndJSON() throws {
        let customer = try object("customer.created", ["id=cus_888", "metadata.app_user_id=user_8", "balance=250", "delinquent=true"])
        #expect(customer["id"] as? String == "cus_888")
        #expect((customer["metadata"] as? [String: Any])?["app_user_id"] as? String == "user_8")
        #expect(customer["metadata.app_user_id"] == nil, "no literal dotted key")
        #expect(customer["balance"] as? Int == 250)
        #expect(customer["delinquent"] as? Bool == true)

        let replaced = try object("customer.created", [#"metadata={"app_user_id":"user_9"}"#, #"name="true""#])
        #expect((replaced["metadata"] as? [String: Any])?["app_user_id"] as? String == "user_9", "an object, not a string")
        #expect(replaced["name"] as? String == "true", "a quoted value stays a string")

        let subscription = try object("customer.subscription.created", ["items.data.0.quantity=3"])
        let item = try #require(((subscription["items"] as? [String: Any])?["data"] as? [[String: Any]])?.first)
        #expect(item["quantity"] as? Int == 3)
    }

    @Test("A path the sample does not have is refused and the real fields are named", arguments: [
        ("custmer=cus_1", "data.object has no field 'custmer'"),
        ("metadata.app_user_id.x=1", "data.object.metadata.app_user_id is a value, not an object"),
        ("email.domain=x", "data.object.email is a value, not an object"),
        ("invoice_settings.nope=1", "data.object.invoice_settings has no field 'nope'"),
    ])
    func refused(_ argument: String, _ words: String) throws {
        let error = #expect(throws: SampleFieldError.self) { _ = try self.object("customer.created", [argument]) }
        #expect(error?.description.contains(words) == true, "\(error?.description ?? "")")
    }

    @Test("An argument without = or with an empty path step is refused")
    func malformed() {
        #expect(throws: SampleFieldError.self) { try SampleField(parsing: "customer") }
        #expect(throws: SampleFieldError.self) { try SampleField(parsing: "metadata..x=1") }
    }

    @Test("With timesAtEvent every timestamp moves with the event: a subscription's period starts then, an invoice is created and paid then (issue 17 item 3)")
    func timesAtEvent() throws {
        let now: Int64 = 1_795_400_000
        func object(_ type: String) throws -> [String: Any] {
            let body = try SampleEvent.body(
                type: type, eventID: "evt_1", created: now, apiVersion: StripeAPIVersion.pinned, livemode: false, account: nil, fields: [],
                timesAtEvent: true)
            return try #require(((try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["data"] as? [String: Any])?["object"] as? [String: Any])
        }
        let subscription = try object("customer.subscription.created")
        let item = try #require(((subscription["items"] as? [String: Any])?["data"] as? [[String: Any]])?.first)
        #expect(subscription["created"] as? Int64 == now || subscription["created"] as? Int == Int(now))
        let start = try #require(item["current_period_start"] as? Int)
        let end = try #require(item["current_period_end"] as? Int)
        #expect(start == Int(now))
        #expect(end > Int(now) && end - start >= 28 * 86_400, "a month ahead, not in the sample's past")

        let invoice = try object("invoice.paid")
        #expect(invoice["created"] as? Int == Int(now))
        let paid = try #require((invoice["status_transitions"] as? [String: Any])?["paid_at"] as? Int)
        #expect(abs(paid - Int(now)) < 60)

        // Without it, the sample keeps its own dates (tests rely on them).
        let fixed = try SampleEvent.body(
            type: "customer.subscription.created", eventID: "evt_2", created: now, apiVersion: StripeAPIVersion.pinned, livemode: false,
            account: nil, fields: [])
        #expect(String(decoding: fixed, as: UTF8.self).contains("1769940000"))
    }
}
