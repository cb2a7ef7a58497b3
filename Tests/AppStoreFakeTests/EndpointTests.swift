import AppStoreFake
import BillingCore
import Foundation
import Testing

@Suite("App Store Server API endpoints")
struct EndpointTests {
    @Test("Get All Subscription Statuses: Apple's shape, signed data that billingd's verifier accepts")
    func subscriptionStatuses() async throws {
        try await withFake { fake, client in
            let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
            let purchase = try await fake.subscribe(productID: "pro.monthly", appAccountToken: token)
            await fake.advance(by: minutes(5))
            let renewal = try #require(await fake.transactionIDs(originalTransactionID: purchase.originalTransactionID).last)

            // Any transaction of the subscription finds it.
            for id in [purchase.transactionID, renewal] {
                let answer = try await client.get("/inApps/v1/subscriptions/\(id)")
                #expect(answer.status == 200)
                #expect(answer.json["environment"] as? String == "Sandbox")
                #expect(answer.json["bundleId"] as? String == "com.example.billingd")
                #expect(answer.json["appAppleId"] as? Int == 1_234_567_890)
                let groups = try #require(answer.json["data"] as? [[String: Any]])
                #expect(groups.count == 1)
                #expect(groups[0]["subscriptionGroupIdentifier"] as? String == "21000000")
                let last = try #require((groups[0]["lastTransactions"] as? [[String: Any]])?.first)
                #expect(last["originalTransactionId"] as? String == purchase.originalTransactionID)
                #expect(last["status"] as? Int == 1)

                let verifier = try verifier(for: fake)
                let transaction = try await verifier.verifyTransaction(try #require(last["signedTransactionInfo"] as? String))
                #expect(transaction.environment == .sandbox)
                let fields = payload(of: try #require(last["signedTransactionInfo"] as? String))
                #expect(fields["transactionId"] as? String == renewal)
                #expect(fields["transactionReason"] as? String == "RENEWAL")
                #expect(fields["type"] as? String == "Auto-Renewable Subscription")
                #expect(fields["appAccountToken"] as? String == token)
                #expect(fields["expiresDate"] as? Int == Int(purchase.purchaseDate + 600_000))
                _ = try await verifier.verifyRenewalInfo(try #require(last["signedRenewalInfo"] as? String))
                let renewalInfo = payload(of: try #require(last["signedRenewalInfo"] as? String))
                #expect(renewalInfo["autoRenewStatus"] as? Int == 1)
                #expect(renewalInfo["renewalDate"] as? Int == Int(purchase.purchaseDate + 600_000))
            }
            let filtered = try await client.get("/inApps/v1/subscriptions/\(purchase.transactionID)", [("status", "2")])
            #expect((filtered.json["data"] as? [Any])?.isEmpty == true)
            #expect(try await client.get("/inApps/v1/subscriptions/\(purchase.transactionID)", [("status", "9")]).errorCode == 4_000_031)
        }
    }

    @Test("Get Transaction Info, and Apple's errors for ids that are not ids or not known")
    func transactionInfo() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.purchase(productID: "lifetime")
            let answer = try await client.get("/inApps/v1/transactions/\(purchase.transactionID)")
            #expect(answer.status == 200)
            let signed = try #require(answer.json["signedTransactionInfo"] as? String)
            _ = try await verifier(for: fake).verifyTransaction(signed)
            #expect(payload(of: signed)["type"] as? String == "Non-Consumable")
            #expect(payload(of: signed)["expiresDate"] == nil)

            let unknown = try await client.get("/inApps/v1/transactions/1000000000000001")
            #expect(unknown.status == 404)
            #expect(unknown.errorCode == 4_040_010)
            #expect(unknown.json["errorMessage"] as? String == "Transaction id not found.")
            let invalid = try await client.get("/inApps/v1/transactions/abc")
            #expect(invalid.status == 400)
            #expect(invalid.errorCode == 4_000_006)
        }
    }

    @Test("Get Transaction History pages 20 at a time by revision, and a saved revision returns only changes")
    func transactionHistoryPaging() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            await fake.advance(by: minutes(5 * 24))  // 24 renewals: 25 transactions
            let path = "/inApps/v2/history/\(purchase.transactionID)"

            let first = try await client.get(path)
            #expect(first.status == 200)
            #expect(first.json["hasMore"] as? Bool == true)
            #expect(first.json["bundleId"] as? String == "com.example.billingd")
            #expect(first.json["environment"] as? String == "Sandbox")
            let firstPage = try #require(first.json["signedTransactions"] as? [String])
            #expect(firstPage.count == 20)
            let revision = try #require(first.json["revision"] as? String)
            let second = try await client.get(path, [("revision", revision)])
            let secondPage = try #require(second.json["signedTransactions"] as? [String])
            #expect(secondPage.count == 5)
            #expect(second.json["hasMore"] as? Bool == false)
            let ids = (firstPage + secondPage).compactMap { payload(of: $0)["transactionId"] as? String }
            #expect(ids == (await fake.transactionIDs(originalTransactionID: purchase.originalTransactionID)))

            // Saved after the last page, the revision yields only what changed since.
            let saved = try #require(second.json["revision"] as? String)
            #expect((try await client.get(path, [("revision", saved)]).json["signedTransactions"] as? [String])?.isEmpty == true)
            await fake.advance(by: minutes(5))
            let changes = try #require(try await client.get(path, [("revision", saved)]).json["signedTransactions"] as? [String])
            #expect(changes.count == 1)

            let descending = try #require(
                try await client.get(path, [("sort", "DESCENDING")]).json["signedTransactions"] as? [String])
            #expect(descending.first.flatMap { payload(of: $0)["transactionReason"] as? String } == "RENEWAL")
            #expect(
                descending.first.flatMap { payload(of: $0)["transactionId"] as? String }
                    == (await fake.transactionIDs(originalTransactionID: purchase.originalTransactionID)).last)
            #expect(try await client.get(path, [("sort", "SIDEWAYS")]).errorCode == 4_000_021)
            #expect(try await client.get(path, [("revision", "garbage!")]).errorCode == 4_000_005)
        }
    }

    @Test("Look Up Order ID finds a purchase by its receipt's order id; an unknown one is status 1")
    func orderLookup() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            #expect(purchase.orderID.count == 10)
            let found = try await client.get("/inApps/v1/lookup/\(purchase.orderID)")
            #expect(found.json["status"] as? Int == 0)
            let signed = try #require(found.json["signedTransactions"] as? [String])
            #expect(signed.map { payload(of: $0)["transactionId"] as? String } == [purchase.transactionID])
            _ = try await verifier(for: fake).verifyTransaction(signed[0])

            let unknown = try await client.get("/inApps/v1/lookup/ZZZZZZZZZZ")
            #expect(unknown.status == 200)
            #expect(unknown.json["status"] as? Int == 1)
            #expect((unknown.json["signedTransactions"] as? [String])?.isEmpty == true)
        }
    }

    @Test("a refund revokes the current period and shows up in Get Refund History")
    func refundHistory() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            let empty = try await client.get("/inApps/v2/refund/lookup/\(purchase.transactionID)")
            #expect((empty.json["signedTransactions"] as? [String])?.isEmpty == true)
            #expect(empty.json["hasMore"] as? Bool == false)

            await fake.advance(by: minutes(1))
            try await fake.refund(transactionID: purchase.transactionID, reason: 1)
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .revoked)
            let answer = try await client.get("/inApps/v2/refund/lookup/\(purchase.transactionID)")
            let refunded = try #require(answer.json["signedTransactions"] as? [String])
            #expect(refunded.count == 1)
            let fields = payload(of: refunded[0])
            #expect(fields["revocationDate"] as? Int == Int(startOfTest + 60_000))
            #expect(fields["revocationReason"] as? Int == 1)
            let revision = try #require(answer.json["revision"] as? String)
            let later = try await client.get("/inApps/v2/refund/lookup/\(purchase.transactionID)", [("revision", revision)])
            #expect((later.json["signedTransactions"] as? [String])?.isEmpty == true)

            let status = try await client.get("/inApps/v1/subscriptions/\(purchase.transactionID)")
            let last = ((status.json["data"] as? [[String: Any]])?.first?["lastTransactions"] as? [[String: Any]])?.first
            #expect(last?["status"] as? Int == 5)
            #expect(await fake.notificationTypes.last == "REFUND")
        }
    }

    @Test("everything signed verifies in Production too, with the app's Apple ID")
    func productionVerifies() async throws {
        try await withFake(environment: .production) { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            #expect(purchase.expiresDate == purchase.purchaseDate + 30 * 86_400_000)
            #expect(purchase.transactionID.hasPrefix("1000000"))
            let answer = try await client.get("/inApps/v1/transactions/\(purchase.transactionID)")
            let verified = try await verifier(for: fake).verifyTransaction(
                try #require(answer.json["signedTransactionInfo"] as? String))
            #expect(verified.environment == .production)
            let notification = try #require(await fake.notificationHistory.first)
            let verifiedNotification = try await verifier(for: fake).verifyNotification(notification.signedPayload)
            #expect(verifiedNotification.notificationType == .subscribed)
            #expect(verifiedNotification.subtype == .initialBuy)
        }
    }
}
