import AppStoreFake
import AsyncHTTPClient
import BillingCore
import Foundation
import Testing

@Suite("Faults, recorded requests and seeding")
struct FaultAndSeedTests {
    @Test("an injected 429 answers Apple's rate limit error with Retry-After, then the real answer")
    func rateLimit() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            await fake.inject(.status(429, retryAfter: 7), times: 1, matching: .path("/inApps/v1/subscriptions"))
            let path = "/inApps/v1/subscriptions/\(purchase.transactionID)"
            let limited = try await client.get(path)
            #expect(limited.status == 429)
            #expect(limited.header("Retry-After") == "7")
            #expect(limited.errorCode == 4_290_000)
            #expect(limited.json["errorMessage"] as? String == "Rate limit exceeded.")
            #expect(try await client.get(path).status == 200)
            // Other paths were never affected.
            #expect(try await client.get("/inApps/v1/transactions/\(purchase.transactionID)").status == 200)
            let recorded = await fake.requests(matching: .path("/inApps/v1/subscriptions"))
            #expect(recorded.map { $0.fault != nil } == [true, false])
        }
    }

    @Test("500, a specific Apple error, a slow answer and a dropped connection")
    func otherFaults() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.purchase(productID: "lifetime")
            let path = "/inApps/v1/transactions/\(purchase.transactionID)"

            await fake.inject(.status(500))
            let failed = try await client.get(path)
            #expect(failed.status == 500)
            #expect(failed.errorCode == 5_000_000)

            await fake.inject(.error(.accountNotFoundRetryable))
            let retryable = try await client.get(path)
            #expect(retryable.status == 404)
            #expect(retryable.errorCode == 4_040_002)

            await fake.inject(.delay(.milliseconds(300)))
            let started = ContinuousClock.now
            #expect(try await client.get(path).status == 200)
            #expect(ContinuousClock.now - started >= .milliseconds(300))

            await fake.inject(.dropConnection)
            await #expect(throws: (any Error).self) { try await client.get(path) }
            #expect(try await client.get(path).status == 200)
        }
    }

    @Test("recorded requests keep method, path, query and headers; recording can be off")
    func recordedRequests() async throws {
        try await withFake { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            _ = try await client.get("/inApps/v2/history/\(purchase.transactionID)", [("sort", "DESCENDING")])
            let request = try #require(await fake.requests.last)
            #expect(request.method == "GET")
            #expect(request.query == "sort=DESCENDING")
            #expect(request.header("Authorization")?.hasPrefix("Bearer ey") == true)
            await fake.resetRequests()
            #expect(await fake.requests.isEmpty)
        }
        try await withFake(configure: { $0.recordsRequests = false }) { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            _ = try await client.get("/inApps/v1/transactions/\(purchase.transactionID)")
            #expect(await fake.requests.isEmpty)
            #expect(await fake.acceptedTokenCount == 1)
        }
    }

    @Test("seeding makes the same subscriptions, renewals and history for the same seed")
    func seeding() async throws {
        var first: (AppStoreFake.SeedSummary, [String])?
        for _ in 0..<2 {
            try await withFake { fake, client in
                let summary = await fake.seed(subscriptions: 200, renewals: 3)
                #expect(summary.subscriptions == 200)
                #expect(summary.transactions >= 200 * 3)
                let types = await fake.notificationTypes
                #expect(types.count == summary.notifications)
                #expect(types.filter { $0 == "DID_RENEW" }.count >= 200 * 2)
                #expect(types.contains("EXPIRED/VOLUNTARY"))
                if let first {
                    #expect(first.0 == summary)
                    #expect(first.1 == types)
                } else {
                    first = (summary, types)
                }

                // The API serves what was seeded, and the history is in date order.
                let original = try #require(summary.originalTransactionIDs.first)
                let answer = try await client.get("/inApps/v1/subscriptions/\(original)")
                #expect(answer.status == 200)
                let history = try await client.post(
                    "/inApps/v1/notifications/history",
                    json: ["startDate": startOfTest - 86_400_000, "endDate": startOfTest + 1])
                #expect(history.json["hasMore"] as? Bool == true)
                let attempts = (history.json["notificationHistory"] as? [[String: Any]])?.first?["sendAttempts"] as? [[String: Any]]
                #expect(attempts?.first?["sendAttemptResult"] as? String == "SUCCESS")
                let dates = await fake.notificationHistory.map(\.signedDate)
                #expect(dates == dates.sorted())
            }
        }
    }

    @Test("seeding as of a past date, then catching up, gives the store a fake seeded then would have now")
    func seedingAsOfAPastDate() async throws {
        let days: Int64 = 3
        var lived: (summary: AppStoreFake.SeedSummary, history: [AppStoreFake.Notification], ids: [[String]])?
        // Seeded now and left to live three days; then seeded three days late as of the same time.
        for late in [false, true] {
            try await withFake(environment: .production, configure: {
                $0.clock = .init(fixedAt: startOfTest + (late ? days * 86_400_000 : 0))
            }) { fake, _ in
                let summary = await fake.seed(subscriptions: 300, renewals: 3, at: startOfTest)
                if !late { await fake.advance(by: days * 86_400_000) }
                let history = await fake.notificationHistory
                var ids: [[String]] = []
                for original in summary.originalTransactionIDs { ids.append(await fake.transactionIDs(originalTransactionID: original)) }
                guard let lived else {
                    lived = (summary, history, ids)
                    return
                }
                #expect(summary == lived.summary)
                #expect(ids == lived.ids)
                #expect(history.map(\.notificationUUID) == lived.history.map(\.notificationUUID))
                #expect(history.map(\.signedDate) == lived.history.map(\.signedDate))
                // The days since the seed date brought renewals, none of them sent (no notification URL).
                let since = history.filter { $0.signedDate > startOfTest }
                #expect(since.contains { $0.notificationType == "DID_RENEW" })
                #expect(since.allSatisfy { $0.sendAttempts.isEmpty })
                #expect(history.filter { $0.signedDate <= startOfTest }.allSatisfy { $0.sendAttempts.first?.result == .success })
            }
        }
    }
}
