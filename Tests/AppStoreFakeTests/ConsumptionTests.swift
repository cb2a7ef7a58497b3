import AppStoreFake
import BillingCore
import Foundation
import NIOHTTP1
import Testing

@Suite("Refund requests: CONSUMPTION_REQUEST and Send Consumption Information (v2)")
struct ConsumptionTests {
    static let path = "/inApps/v2/transactions/consumption/"

    /// A subscription, a consumable and a non-renewing subscription of one buyer.
    static func purchases(_ fake: AppStoreFake) async throws -> (subscription: String, consumable: String, nonRenewing: String) {
        await fake.define(AppStoreFake.Product(id: "coins.100", kind: .consumable, price: 990))
        await fake.define(AppStoreFake.Product(id: "pass.month", kind: .nonRenewing, price: 4990))
        let subscription = try await fake.subscribe(productID: "pro.monthly").transactionID
        let consumable = try await fake.purchase(productID: "coins.100").transactionID
        let nonRenewing = try await fake.purchase(productID: "pass.month").transactionID
        return (subscription, consumable, nonRenewing)
    }

    static func body(_ members: [String: Any]) -> [UInt8] { APIKey.json(members) }

    static var valid: [String: Any] { ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false] }

    static func with(_ changes: [String: Any]) -> [String: Any] {
        valid.merging(changes) { $1 }
    }

    @Test("An answer Apple takes is 202 with no body, and kept as sent")
    func accepted() async throws {
        try await withFake { fake, client in
            let ids = try await Self.purchases(fake)
            let cases: [(String, [String: Any])] = [
                (ids.subscription, Self.with(["refundPreference": "DECLINE", "sampleContentProvided": true])),
                (ids.consumable, Self.with(["refundPreference": "GRANT_PRORATED", "consumptionPercentage": 50_000])),
                (ids.nonRenewing, Self.with(["deliveryStatus": "UNDELIVERED_QUALITY_ISSUE", "consumptionPercentage": 0])),
                (ids.consumable, Self.with(["consumptionPercentage": 100_000, "refundPreference": "GRANT_FULL"])),
            ]
            for (id, members) in cases {
                let answer = try await client.send(.PUT, Self.path + id, body: Self.body(members))
                #expect(answer.status == 202, "\(members): \(answer.json)")
                #expect(answer.body.isEmpty)
            }
            let kept = await fake.consumptionAnswers
            #expect(kept.map(\.transactionID) == [ids.subscription, ids.consumable, ids.nonRenewing, ids.consumable])
            #expect(kept[0].refundPreference == "DECLINE" && kept[0].sampleContentProvided && kept[0].consumptionPercentage == nil)
            #expect(kept[1].consumptionPercentage == 50_000 && kept[1].deliveryStatus == "DELIVERED")
            #expect(kept[2].deliveryStatus == "UNDELIVERED_QUALITY_ISSUE" && kept[2].consumptionPercentage == 0)
            #expect(kept.allSatisfy { $0.customerConsented && $0.receivedAt == startOfTest })
            #expect(kept[0].body == Self.body(cases[0].1))
        }
    }

    @Test("The fake refuses what Apple refuses, with Apple's error", arguments: [
        ("customerConsented false", "subscription", #"{"customerConsented":false,"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#, 4_000_035, "customer consented"),
        ("customerConsented missing", "subscription", #"{"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#, 4_000_035, "customer consented"),
        ("customerConsented as text", "subscription", #"{"customerConsented":"true","deliveryStatus":"DELIVERED","sampleContentProvided":false}"#, 4_000_035, "customer consented"),
        ("deliveryStatus unknown", "subscription", #"{"customerConsented":true,"deliveryStatus":"LOST","sampleContentProvided":false}"#, 4_000_036, "delivery status"),
        ("deliveryStatus missing", "subscription", #"{"customerConsented":true,"sampleContentProvided":false}"#, 4_000_036, "delivery status"),
        ("deliveryStatus of v1", "subscription", #"{"customerConsented":true,"deliveryStatus":0,"sampleContentProvided":false}"#, 4_000_036, "delivery status"),
        ("sampleContentProvided missing", "subscription", #"{"customerConsented":true,"deliveryStatus":"DELIVERED"}"#, 4_000_041, "sample content"),
        ("sampleContentProvided as a number", "subscription", #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":1}"#, 4_000_041, "sample content"),
        ("refundPreference unknown", "subscription",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"refundPreference":"MAYBE"}"#, 4_000_044, "refund preference"),
        ("refundPreference of v1", "subscription",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"refundPreference":1}"#, 4_000_044, "refund preference"),
        ("a percentage for an auto-renewable subscription", "subscription",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"consumptionPercentage":10000}"#, 4_000_209, "auto-renewable"),
        ("a percentage above 100 %", "consumable",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"consumptionPercentage":100001}"#, 4_000_000,
         "ConsumptionPercentageOutOfRangeError"),
        ("a negative percentage", "consumable",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"consumptionPercentage":-1}"#, 4_000_000,
         "ConsumptionPercentageOutOfRangeError"),
        ("a fractional percentage", "consumable",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"consumptionPercentage":12.5}"#, 4_000_000,
         "ConsumptionPercentageOutOfRangeError"),
        ("a share of what was not delivered", "consumable",
         #"{"customerConsented":true,"deliveryStatus":"UNDELIVERED_OTHER","sampleContentProvided":false,"consumptionPercentage":5}"#, 4_000_000,
         "UndeliveredConsumptionPercentageNonZeroError"),
        ("GRANT_PRORATED of nothing", "nonRenewing",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"refundPreference":"GRANT_PRORATED","consumptionPercentage":0}"#,
         4_000_000, "ConsumptionPercentageOutOfRangeError"),
        ("GRANT_PRORATED of everything", "nonRenewing",
         #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"refundPreference":"GRANT_PRORATED","consumptionPercentage":100000}"#,
         4_000_000, "ConsumptionPercentageOutOfRangeError"),
    ])
    func refused(_ name: String, _ purchase: String, _ body: String, code: Int, message: String) async throws {
        try await withFake { fake, client in
            let ids = try await Self.purchases(fake)
            let id = ["subscription": ids.subscription, "consumable": ids.consumable, "nonRenewing": ids.nonRenewing][purchase]!
            let answer = try await client.send(.PUT, Self.path + id, body: Array(body.utf8))
            #expect(answer.status == 400, "\(name)")
            #expect(answer.errorCode == code, "\(name): \(answer.json)")
            #expect((answer.json["errorMessage"] as? String)?.contains(message) == true, "\(name): \(answer.json)")
            #expect(await fake.consumptionAnswers.isEmpty, "nothing is kept of a refused answer")
        }
    }

    @Test("A body that is not JSON, and transactions that are not ids or not known, get Apple's errors")
    func badRequests() async throws {
        try await withFake { fake, client in
            let ids = try await Self.purchases(fake)
            #expect(try await client.send(.PUT, Self.path + ids.subscription, body: Array("customerConsented=true".utf8)).errorCode == 4_000_000)
            #expect(try await client.send(.PUT, Self.path + "abc", body: Self.body(Self.valid)).errorCode == 4_000_006)
            let unknown = try await client.send(.PUT, Self.path + "2000000999999999", body: Self.body(Self.valid))
            #expect(unknown.status == 404 && unknown.errorCode == 4_040_010)
            var anonymous = client
            anonymous.authorization = "Bearer nope"
            #expect(try await anonymous.send(.PUT, Self.path + ids.subscription, body: Self.body(Self.valid)).status == 401)
        }
    }

    @Test("CONSUMPTION_REQUEST carries the transaction, a subscription's renewal info, and Apple's reason")
    func notification() async throws {
        try await withFake { fake, _ in
            let ids = try await Self.purchases(fake)
            let uuid = try await fake.requestConsumption(transactionID: ids.subscription, reason: "FULFILLMENT_ISSUE")
            try await fake.requestConsumption(transactionID: ids.consumable)
            let sent = await fake.notificationHistory.filter { $0.notificationType == "CONSUMPTION_REQUEST" }
            #expect(sent.map(\.transactionID) == [ids.subscription, ids.consumable])
            #expect(sent[0].notificationUUID == uuid)
            let data = try #require(payload(of: sent[0].signedPayload)["data"] as? [String: Any])
            #expect(data["consumptionRequestReason"] as? String == "FULFILLMENT_ISSUE")
            #expect(data["signedRenewalInfo"] != nil && data["status"] as? Int == 1)
            let consumable = try #require(payload(of: sent[1].signedPayload)["data"] as? [String: Any])
            #expect(consumable["consumptionRequestReason"] as? String == "UNINTENDED_PURCHASE")
            #expect(consumable["signedRenewalInfo"] == nil)
            let transaction = payload(of: try #require(consumable["signedTransactionInfo"] as? String))
            #expect(transaction["type"] as? String == "Consumable")
            // billingd reads it as Apple's.
            let verified = try await verifier(for: fake).verifyNotification(sent[0].signedPayload)
            let read = try AppStoreNotification(json: verified.payload, transaction: verified.transaction?.payload, renewalInfo: verified.renewalInfo?.payload)
            #expect(read.notificationType == .consumptionRequest && read.consumptionRequestReason == "FULFILLMENT_ISSUE")
            #expect(read.transaction?.transactionID == ids.subscription)
            await #expect(throws: AppStoreFake.StateError.self) { try await fake.requestConsumption(transactionID: "2000000999999999") }
        }
    }

    @Test("billingd's trigger asks a refund of the buyer's latest purchase of the product, or says to buy first")
    func trigger() async throws {
        try await withFake { fake, client in
            let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
            let purchase = try await fake.subscribe(productID: "pro.monthly", appAccountToken: token)
            await fake.advance(by: minutes(5))
            let renewal = try #require(await fake.transactionIDs(originalTransactionID: purchase.originalTransactionID).last)
            let answer = try await client.post(
                "/inApps/v1/test_helpers/billingd/trigger",
                json: ["notificationType": "CONSUMPTION_REQUEST", "productId": "pro.monthly", "appAccountToken": token])
            #expect(answer.status == 200, "\(answer.json)")
            #expect(answer.json["transactionId"] as? String == renewal, "the latest period")
            #expect(answer.json["originalTransactionId"] as? String == purchase.originalTransactionID)
            let sent = try #require(answer.json["notifications"] as? [[String: Any]])
            #expect(sent.map { $0["notificationType"] as? String } == ["CONSUMPTION_REQUEST"])

            let none = try await client.post(
                "/inApps/v1/test_helpers/billingd/trigger", json: ["notificationType": "CONSUMPTION_REQUEST", "productId": "max.monthly", "appAccountToken": token])
            #expect(none.status == 409)
            #expect((none.json["errorMessage"] as? String)?.contains("trigger SUBSCRIBED or ONE_TIME_CHARGE first") == true, "\(none.json)")
        }
    }
}
