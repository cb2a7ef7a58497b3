import AppStoreFake
import BillingCore
import Foundation
import HTTPTypes
import Testing

@Suite("Server Notifications V2: lifecycle, history and delivery")
struct NotificationTests {
    @Test("advancing the clock renews a subscription and records DID_RENEW, signed and verifiable")
    func clockRenews() async throws {
        try await withFake { fake, _ in
            let purchase = try await fake.subscribe(productID: "pro.monthly", appAccountToken: "0f9c7e1a-5a4b-4d3c-9b2a-1e0f9d8c7b6a")
            await fake.advance(by: minutes(4))
            #expect(await fake.notificationTypes == ["SUBSCRIBED/INITIAL_BUY"])
            await fake.advance(by: minutes(1))
            #expect(await fake.notificationTypes == ["SUBSCRIBED/INITIAL_BUY", "DID_RENEW"])
            let ids = await fake.transactionIDs(originalTransactionID: purchase.originalTransactionID)
            #expect(ids.count == 2)

            let renewal = try #require(await fake.notificationHistory.last)
            #expect(renewal.signedDate == purchase.purchaseDate + 300_000)
            #expect(renewal.transactionID == ids[1])
            #expect(renewal.status == .active)
            let verified = try await verifier(for: fake).verifyNotification(renewal.signedPayload)
            #expect(verified.notificationType == .didRenew)
            #expect(verified.signedDate == renewal.signedDate)
            #expect(verified.transaction != nil)
            #expect(verified.renewalInfo != nil)
            let data = payload(of: renewal.signedPayload)["data"] as? [String: Any]
            #expect(data?["status"] as? Int == 1)
            #expect(data?["appAppleId"] as? Int == 1_234_567_890)
            #expect(payload(of: renewal.signedPayload)["version"] as? String == "2.0")
        }
    }

    @Test("turning auto-renew off expires the subscription at the end of its period")
    func voluntaryExpiry() async throws {
        try await withFake { fake, _ in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            try await fake.cancelAutoRenew(originalTransactionID: purchase.originalTransactionID)
            await fake.advance(by: minutes(10))
            #expect(
                await fake.notificationTypes == [
                    "SUBSCRIBED/INITIAL_BUY", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED", "EXPIRED/VOLUNTARY",
                ])
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .expired)
            let renewalInfo = payload(of: try #require(await fake.signedRenewalInfo(originalTransactionID: purchase.originalTransactionID)))
            #expect(renewalInfo["expirationIntent"] as? Int == 1)
            #expect(renewalInfo["autoRenewStatus"] as? Int == 0)

            let again = try await fake.resubscribe(originalTransactionID: purchase.originalTransactionID)
            #expect(again.originalTransactionID == purchase.originalTransactionID)
            #expect(await fake.notificationTypes.last == "SUBSCRIBED/RESUBSCRIBE")
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .active)
        }
    }

    @Test("a failed renewal goes through grace period and billing retry to expiry")
    func failedRenewalWithGrace() async throws {
        try await withFake { fake, _ in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            try await fake.failRenewal(originalTransactionID: purchase.originalTransactionID, grace: true)
            await fake.advance(by: minutes(5))
            #expect(await fake.notificationTypes.last == "DID_FAIL_TO_RENEW/GRACE_PERIOD")
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .billingGracePeriod)
            let renewalInfo = payload(of: try #require(await fake.signedRenewalInfo(originalTransactionID: purchase.originalTransactionID)))
            #expect(renewalInfo["isInBillingRetryPeriod"] as? Bool == true)
            #expect(renewalInfo["gracePeriodExpiresDate"] as? Int == Int(purchase.purchaseDate + 300_000 + 180_000))

            await fake.advance(by: minutes(3))
            #expect(await fake.notificationTypes.last == "GRACE_PERIOD_EXPIRED")
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .billingRetry)
            await fake.advance(by: minutes(12))
            #expect(await fake.notificationTypes.last == "EXPIRED/BILLING_RETRY")
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .expired)
            #expect(await fake.notificationHistory.last?.status == .expired)
        }
    }

    @Test("a subscription in billing retry recovers with DID_RENEW/BILLING_RECOVERY")
    func billingRecovery() async throws {
        try await withFake { fake, _ in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            try await fake.failRenewal(originalTransactionID: purchase.originalTransactionID)
            await fake.advance(by: minutes(6))
            #expect(await fake.notificationTypes.last == "DID_FAIL_TO_RENEW")
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .billingRetry)
            try await fake.recoverRenewal(originalTransactionID: purchase.originalTransactionID)
            #expect(await fake.notificationTypes.last == "DID_RENEW/BILLING_RECOVERY")
            #expect(await fake.status(originalTransactionID: purchase.originalTransactionID) == .active)
            await fake.advance(by: minutes(5))
            #expect(await fake.notificationTypes.last == "DID_RENEW")
        }
    }

    @Test("Get Notification History pages 20 at a time with paginationToken, within the date range")
    func notificationHistoryPaging() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            await fake.advance(by: minutes(5 * 24))  // 1 SUBSCRIBED + 24 DID_RENEW
            let body: [String: Any] = ["startDate": startOfTest, "endDate": startOfTest + 86_400_000]

            let first = try await client.post("/inApps/v1/notifications/history", json: body)
            #expect(first.status == 200)
            let firstPage = try #require(first.json["notificationHistory"] as? [[String: Any]])
            #expect(firstPage.count == 20)
            #expect(first.json["hasMore"] as? Bool == true)
            let token = try #require(first.json["paginationToken"] as? String)
            let second = try await client.post("/inApps/v1/notifications/history", json: body, [("paginationToken", token)])
            let secondPage = try #require(second.json["notificationHistory"] as? [[String: Any]])
            #expect(secondPage.count == 5)
            #expect(second.json["hasMore"] as? Bool == false)
            let dates = (firstPage + secondPage).compactMap { ($0["signedPayload"] as? String).map(payload(of:)) }
                .compactMap { $0["signedDate"] as? Int }
            #expect(dates == dates.sorted())
            #expect(dates.count == 25)
            // No notification URL: recorded, never attempted.
            #expect((firstPage[0]["sendAttempts"] as? [Any])?.isEmpty == true)

            // The range: only the first ten minutes (SUBSCRIBED and the first DID_RENEW; the end is exclusive).
            let range = try await client.post(
                "/inApps/v1/notifications/history", json: ["startDate": startOfTest, "endDate": startOfTest + 600_000])
            #expect((range.json["notificationHistory"] as? [Any])?.count == 2)
            let renewals = try await client.post(
                "/inApps/v1/notifications/history", json: body.merging(["notificationType": "SUBSCRIBED"]) { $1 })
            #expect((renewals.json["notificationHistory"] as? [Any])?.count == 1)
            let byTransaction = try await client.post(
                "/inApps/v1/notifications/history", json: body.merging(["transactionId": purchase.transactionID]) { $1 })
            #expect((byTransaction.json["notificationHistory"] as? [Any])?.count == 20)

            let now = fake.now
            let errors: [([String: Any], Int)] = [
                (["endDate": now], 4_000_015),
                (["startDate": now - 1000], 4_000_016),
                (["startDate": now, "endDate": now - 1000], 4_000_013),
                (["startDate": now - 31 * 86_400_000, "endDate": now], 4_000_012),
                (body.merging(["notificationType": "NOT_A_TYPE"]) { $1 }, 4_000_018),
                (body.merging(["notificationType": "DID_RENEW", "transactionId": purchase.transactionID]) { $1 }, 4_000_019),
            ]
            for (request, code) in errors {
                let answer = try await client.post("/inApps/v1/notifications/history", json: request)
                #expect(answer.status == 400)
                #expect(answer.errorCode == code, "\(request)")
            }
            let badToken = try await client.post("/inApps/v1/notifications/history", json: body, [("paginationToken", "nope")])
            #expect(badToken.errorCode == 4_000_014)
            // A token is good only for the request that made it.
            let otherRange = ["startDate": startOfTest + 1, "endDate": startOfTest + 86_400_000]
            #expect(
                try await client.post("/inApps/v1/notifications/history", json: otherRange, [("paginationToken", token)])
                    .errorCode == 4_000_014)
        }
    }

    @Test("notifications are POSTed to the notification URL, each attempt recorded with its result")
    func delivery() async throws {
        let receiver = try await NotificationReceiver.start()
        defer { receiver.stop() }
        try await withFake(notificationURL: receiver.url) { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            await fake.advance(by: minutes(5))
            #expect(await fake.waitForDeliveries())
            #expect(receiver.types == ["SUBSCRIBED", "DID_RENEW"])
            for signed in receiver.signedPayloads { _ = try await verifier(for: fake).verifyNotification(signed) }
            let history = await fake.notificationHistory
            #expect(history.map(\.signedPayload) == receiver.signedPayloads)
            #expect(history.allSatisfy { $0.sendAttempts.map(\.result) == [.success] })

            // The endpoint fails: the attempt says why.
            receiver.answer(with: .internalServerError)
            try await fake.cancelAutoRenew(originalTransactionID: purchase.originalTransactionID)
            #expect(await fake.waitForDeliveries())
            #expect(await fake.notificationHistory.last?.sendAttempts.map(\.result) == [.unsuccessfulHTTPResponseCode])
            #expect(await fake.notificationHistory.last?.sendAttempts.first?.httpStatus == 500)

            // Sent again once the endpoint works: a second attempt, a success.
            receiver.answer(with: .ok)
            let failed = try #require(await fake.notificationHistory.last)
            #expect(await fake.redeliver(notificationUUID: failed.notificationUUID))
            #expect(await fake.waitForDeliveries())
            #expect(
                await fake.notificationHistory.last?.sendAttempts.map(\.result) == [.unsuccessfulHTTPResponseCode, .success])
            let answer = try await client.get("/inApps/v1/subscriptions/\(purchase.transactionID)")
            #expect(answer.status == 200)
        }
    }

    @Test("a dropped notification never arrives; its history shows the failed attempt, and onlyFailures finds it")
    func droppedDelivery() async throws {
        let receiver = try await NotificationReceiver.start()
        defer { receiver.stop() }
        try await withFake(notificationURL: receiver.url) { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            await fake.updateDeliveryPolicy { $0.dropNext = 1 }
            await fake.advance(by: minutes(5))
            await fake.advance(by: minutes(5))
            #expect(await fake.waitForDeliveries())
            #expect(receiver.types == ["SUBSCRIBED", "DID_RENEW"])
            let history = await fake.notificationHistory
            #expect(history.count == 3)
            #expect(history[1].notificationType == "DID_RENEW")
            #expect(history[1].sendAttempts.map(\.result) == [.noResponse])
            #expect(history[1].sendAttempts.first?.attemptDate == purchase.purchaseDate + 300_000)

            let failures = try await client.post(
                "/inApps/v1/notifications/history",
                json: ["startDate": startOfTest, "endDate": startOfTest + 86_400_000, "onlyFailures": true])
            let items = try #require(failures.json["notificationHistory"] as? [[String: Any]])
            #expect(items.count == 1)
            #expect(items.first?["signedPayload"] as? String == history[1].signedPayload)
            let attempt = (items.first?["sendAttempts"] as? [[String: Any]])?.first
            #expect(attempt?["sendAttemptResult"] as? String == "NO_RESPONSE")
            #expect(attempt?["attemptDate"] as? Int == Int(purchase.purchaseDate + 300_000))
        }
    }

    @Test("paused, duplicated, reversed and slow deliveries arrive as the policy says")
    func reorderedAndDuplicatedDelivery() async throws {
        let receiver = try await NotificationReceiver.start()
        defer { receiver.stop() }
        try await withFake(notificationURL: receiver.url) { fake, _ in
            await fake.pauseDelivery()
            await fake.updateDeliveryPolicy { $0.deliverTwice = true }
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            await fake.advance(by: minutes(5))
            #expect(await fake.waitForDeliveries(timeout: .milliseconds(100)) == false)
            #expect(receiver.types.isEmpty)
            await fake.resumeDelivery(order: .reversed)
            #expect(await fake.waitForDeliveries())
            #expect(receiver.types == ["DID_RENEW", "DID_RENEW", "SUBSCRIBED", "SUBSCRIBED"])
            #expect(await fake.notificationHistory.allSatisfy { $0.sendAttempts.count == 2 })

            // A slow delivery: the send waits, then arrives.
            await fake.updateDeliveryPolicy {
                $0.deliverTwice = false
                $0.delay = .milliseconds(200)
            }
            let started = ContinuousClock.now
            try await fake.cancelAutoRenew(originalTransactionID: purchase.originalTransactionID)
            #expect(await fake.waitForDeliveries())
            #expect(ContinuousClock.now - started >= .milliseconds(200))
            #expect(receiver.types.last == "DID_CHANGE_RENEWAL_STATUS")
        }
    }

    @Test("Request a Test Notification sends TEST; Get Test Notification Status shows the attempt")
    func testNotification() async throws {
        let receiver = try await NotificationReceiver.start()
        defer { receiver.stop() }
        try await withFake(notificationURL: receiver.url) { fake, client in
            let sent = try await client.post("/inApps/v1/notifications/test")
            #expect(sent.status == 200)
            let token = try #require(sent.json["testNotificationToken"] as? String)
            #expect(await fake.waitForDeliveries())
            #expect(receiver.types == ["TEST"])
            let status = try await client.get("/inApps/v1/notifications/test/\(token)")
            #expect(status.status == 200)
            let signed = try #require(status.json["signedPayload"] as? String)
            #expect(signed == receiver.signedPayloads.first)
            let verified = try await verifier(for: fake).verifyNotification(signed)
            #expect(verified.notificationType == .test)
            let attempts = try #require(status.json["sendAttempts"] as? [[String: Any]])
            #expect(attempts.map { $0["sendAttemptResult"] as? String } == ["SUCCESS"])

            #expect(try await client.get("/inApps/v1/notifications/test/not-a-token").errorCode == 4_000_020)
            #expect(
                try await client.get("/inApps/v1/notifications/test/00000000-0000-4000-8000-000000000000_1").errorCode
                    == 4_040_008)
        }
        try await withFake { _, client in
            let answer = try await client.post("/inApps/v1/notifications/test")
            #expect(answer.errorCode == 4_040_007)
        }
    }
}
