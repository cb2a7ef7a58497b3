import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// `now` of the usage tests: inside the fixtures' Stripe period [1_769_940_000, 1_772_359_200).
private let usageNow: Int64 = 1_770_000_000

private func postUsage(_ client: some TestClientProtocol, _ path: String, _ body: String) async throws -> TestResponse {
    try await client.execute(uri: path, method: .post, headers: jsonHeaders, body: ByteBuffer(string: body))
}

/// A ledger where user_pro has Pro and user_team has Team for 2 seats through Stripe, in the
/// fixtures' period; everyone else is on Free.
private func usageLedger(teamQuantity: Int = 2, proPeriod: (Int64, Int64) = (1_769_940_000, 1_772_359_200)) async throws -> TemporaryLedger {
    var builder = UserLedgerBuilder()
    builder.add("customer.created", UserFixtures.customer("cus_pro", user: "user_pro"))
    builder.add(
        "customer.subscription.created",
        UserFixtures.subscription("sub_pro", customer: "cus_pro", status: "active", periodStart: proPeriod.0, periodEnd: proPeriod.1))
    builder.add("customer.created", UserFixtures.customer("cus_team", user: "user_team"))
    builder.add(
        "customer.subscription.created",
        UserFixtures.subscription("sub_team", customer: "cus_team", status: "active", lookupKey: "team_monthly", price: "price_Team", quantity: teamQuantity))
    return try await builder.ledger()
}

@Suite("Usage meters in the plan catalog")
struct UsageCatalogTests {
    @Test("The fixture's meters load with their kinds, limits and Stripe meter")
    func fixture() throws {
        let catalog = try fixtureCatalog("usage")
        #expect(catalog.meters.map(\.id) == ["radars", "api_calls", "storage_bytes"])
        #expect(catalog.meter(id: "radars") == UsageMeter(id: "radars", kind: .counter, limit: "radars", enforcement: .hard, stripeMeter: "radars_created"))
        #expect(catalog.meter(id: "storage_bytes")?.kind == .gauge)
        #expect(catalog.meter(id: "api_calls")?.enforcement == .soft)
    }

    @Test("A bad meter names the file and the key", arguments: [
        ("  - {id: radars, kind: counter, limit: radar}", "meters[0].limit", "no tier has a limit \"radar\""),
        ("  - {id: storage, kind: gauge, limit: storage_bytes, stripe_meter: bytes}", "meters[0].stripe_meter", "gauge"),
        ("  - {id: radars, kind: tally, limit: radars}", "meters[0].kind", "counter"),
        ("  - {id: radars, kind: counter, limit: radars, enforce: hard}", "meters[0].enforce", "unknown key"),
        ("  - {id: radars, kind: counter, limit: only_free}", "tiers[1].limits", "tier pro has no limit only_free"),
        ("  - {id: radars, kind: counter, limit: radars}\n  - {id: radars, kind: counter, limit: radars}", "meters[1].id", "unique"),
    ])
    func refused(_ meters: String, path: String, words: String) {
        let yaml = """
            tiers:
              - {id: free, name: Free, rank: 0, limits: {radars: 10, storage_bytes: 5, only_free: 1}}
              - {id: pro, name: Pro, rank: 10, stripe: {prices: [{lookup_key: pro_monthly}]}, limits: {radars: unlimited, storage_bytes: 50}}
            meters:
            \(meters)
            """
        do {
            _ = try PlanCatalogLoader.parse(yaml, path: "plans.yaml")
            Issue.record("the catalog loaded")
        } catch {
            #expect(error.description.contains("plans.yaml"), "\(error)")
            #expect(error.description.contains(path), "\(error)")
            #expect(error.description.contains(words), "\(error)")
        }
    }

    @Test("Periods: the Stripe item's, the App Store purchase's, the calendar month on Free; a passed period moves on")
    func periods() throws {
        let catalog = try fixtureCatalog("usage")
        let free = catalog.resolve([], now: usageNow)
        #expect(free.usagePeriod(now: usageNow) == UsagePeriod(start: 1_769_904_000, end: 1_772_323_200), "February 2026 in UTC")
        #expect(UsagePeriod.calendarMonth(containing: 1_772_323_200).start == 1_772_323_200, "the first second of March is March's")

        var subscription = LedgerSubscription(
            id: "sub_1", customer: "cus_1", status: .active,
            items: [.init(id: "si_1", lookupKey: "pro_monthly", quantity: 1, currentPeriodStart: 1_769_940_000, currentPeriodEnd: 1_772_359_200)])
        let pro = catalog.resolve([subscription], now: usageNow)
        #expect(pro.plan == "pro")
        #expect(pro.usagePeriod(now: usageNow) == UsagePeriod(start: 1_769_940_000, end: 1_772_359_200))
        // A renewal not heard of yet: the next period of the same length.
        subscription.items[0].currentPeriodEnd = 1_770_000_000
        subscription.items[0].currentPeriodStart = 1_769_000_000
        let late = catalog.resolve([subscription], now: 1_770_500_000)
        #expect(late.usagePeriod(now: 1_770_500_000) == UsagePeriod(start: 1_770_000_000, end: 1_771_000_000))

        let purchase = AppStoreSubscriptionRecord(
            originalTransactionID: "2000000000000001", environment: "Production", transactionID: "2000000000000002",
            productID: "com.example.pro.monthly", type: "Auto-Renewable Subscription", purchaseDate: 1_769_990_000_000,
            expiresDate: 1_772_409_200_000)
        let appStore = catalog.resolve([], appStore: [purchase], now: usageNow)
        #expect(appStore.source == .appStore)
        #expect(appStore.usagePeriod(now: usageNow) == UsagePeriod(start: 1_769_990_000, end: 1_772_409_200))
    }
}

@Suite("Usage endpoints")
struct UsageEndpointTests {
    @Test("Consume up to a hard limit, then 402 with what is used, when it resets and the tier that allows more")
    func hardLimit() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: try fixtureCatalog("usage"), now: usageNow).test(.router) { client in
            for index in 1...10 {
                let ok = try await postUsage(client, "/v1/users/user_1/usage/radars/consume", #"{"quantity": 1, "idempotency_key": "radar-\#(index)"}"#)
                #expect(ok.status == .ok, "\(ok.text)")
                #expect(ok.json["used"] as? Int == index)
                #expect(ok.json["remaining"] as? Int == 10 - index)
            }
            let refused = try await postUsage(client, "/v1/users/user_1/usage/radars/consume", #"{"quantity": 1, "idempotency_key": "radar-11"}"#)
            #expect(refused.status.code == 402, "\(refused.text)")
            let error = try #require(refused.json["error"] as? [String: Any])
            #expect(error["code"] as? String == "limit_exceeded")
            #expect(error["used"] as? Int == 10)
            #expect(error["limit"] as? Int == 10)
            #expect(error["resets_at"] as? Int == 1_772_323_200, "the end of the calendar month on Free")
            #expect((error["upgrade_to"] as? [String: Any])?["plan"] as? String == "pro")
            // Too much for Pro too: Team (200 a seat) is the cheapest that allows it.
            let big = try await postUsage(client, "/v1/users/user_1/usage/radars/consume", #"{"quantity": 150, "idempotency_key": "bulk"}"#)
            #expect(((big.json["error"] as? [String: Any])?["upgrade_to"] as? [String: Any])?["plan"] as? String == "team")
            // Usage that happened is recorded even past the limit.
            let event = try await postUsage(client, "/v1/users/user_1/usage/radars/events", #"{"quantity": 2, "idempotency_key": "import-1"}"#)
            #expect(event.status == .ok)
            #expect(event.json["used"] as? Int == 12)
            #expect(event.json["overage"] as? Int == 2)
            #expect(event.json["remaining"] as? Int == 0)
        }
    }

    @Test("Soft meters: a consume past the limit is allowed and counted as overage; a gauge is set and reports overage")
    func softAndGauge() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: try fixtureCatalog("usage"), now: usageNow).test(.router) { client in
            let soft = try await postUsage(client, "/v1/users/user_1/usage/api_calls/consume", #"{"quantity": 1500, "idempotency_key": "batch-1"}"#)
            #expect(soft.status == .ok, "\(soft.text)")
            #expect(soft.json["overage"] as? Int == 500)
            #expect(soft.json["enforcement"] as? String == "soft")
            let gauge = try await client.execute(
                uri: "/v1/users/user_1/usage/storage_bytes", method: .put, headers: jsonHeaders, body: ByteBuffer(string: #"{"value": 600000000}"#))
            #expect(gauge.status == .ok, "\(gauge.text)")
            #expect(gauge.json["used"] as? Int == 600_000_000)
            #expect(gauge.json["overage"] as? Int == 100_000_000)
            #expect(gauge.json["period_start"] is NSNull)
            let lower = try await client.execute(
                uri: "/v1/users/user_1/usage/storage_bytes", method: .put, headers: jsonHeaders, body: ByteBuffer(string: #"{"value": 1000}"#))
            #expect(lower.json["used"] as? Int == 1000)

            let usage = try await client.execute(uri: "/v1/users/user_1/usage", method: .get, headers: authorized)
            let meters = try #require(usage.json["meters"] as? [[String: Any]])
            #expect(meters.map { $0["meter"] as? String } == ["radars", "api_calls", "storage_bytes"])
            #expect(meters[1]["used"] as? Int == 1500)
            #expect(meters[2]["used"] as? Int == 1000)
            #expect(meters[0]["period_end"] as? Int == 1_772_323_200)
            let entitlements = try await client.execute(uri: "/v1/users/user_1/entitlements", method: .get, headers: authorized)
            let embedded = try #require((entitlements.json["usage"] as? [String: Any])?["meters"] as? [[String: Any]])
            #expect(embedded.count == 3)
            #expect(embedded[1]["used"] as? Int == 1500)
        }
    }

    @Test("100 concurrent consumes around a hard limit allow exactly the remainder")
    func concurrentConsumes() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: try fixtureCatalog("usage"), now: usageNow).test(.router) { client in
            _ = try await postUsage(client, "/v1/users/user_1/usage/radars/events", #"{"quantity": 7, "idempotency_key": "before"}"#)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<100 {
                    group.addTask {
                        Int(try await postUsage(client, "/v1/users/user_1/usage/radars/consume", #"{"quantity": 1, "idempotency_key": "c-\#(index)"}"#).status.code)
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count { $0 == 200 } == 3)
            #expect(statuses.count { $0 == 402 } == 97)
        }
        let states = try await SQLiteUsage(database: ledger.database).states(
            scope: .test, user: "user_1",
            meters: [(UsageMeter(id: "radars", kind: .counter, limit: "radars"), UsagePeriod.calendarMonth(containing: usageNow), .count(10))])
        #expect(states.first?.used == 10)
    }

    @Test("An idempotency key counts once, across a restart of billingd")
    func idempotency() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        let catalog = try fixtureCatalog("usage")
        try await userApplication(ledger, catalog: catalog, now: usageNow).test(.router) { client in
            let first = try await postUsage(client, "/v1/users/user_1/usage/radars/events", #"{"quantity": 3, "idempotency_key": "radar-abc"}"#)
            #expect(first.json["duplicate"] as? Bool == false)
            let again = try await postUsage(client, "/v1/users/user_1/usage/radars/events", #"{"quantity": 3, "idempotency_key": "radar-abc"}"#)
            #expect(again.json["duplicate"] as? Bool == true)
            #expect(again.json["used"] as? Int == 3)
            // The same key for another user or meter is another record.
            let other = try await postUsage(client, "/v1/users/user_2/usage/radars/events", #"{"quantity": 1, "idempotency_key": "radar-abc"}"#)
            #expect(other.json["duplicate"] as? Bool == false)
        }
        // A new process on the same database.
        try ledger.database.close()
        let reopened = try TemporaryLedger(reopening: ledger)
        try await userApplication(reopened, catalog: catalog, now: usageNow).test(.router) { client in
            let retry = try await postUsage(client, "/v1/users/user_1/usage/radars/consume", #"{"quantity": 3, "idempotency_key": "radar-abc"}"#)
            #expect(retry.json["duplicate"] as? Bool == true)
            #expect(retry.json["used"] as? Int == 3)
        }
        try reopened.database.close()
    }

    @Test("Late records count in their own period; a record at exactly the period's end is the next period's")
    func periodsAndLateRecords() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        let catalog = try fixtureCatalog("usage")
        let start: Int64 = 1_769_940_000
        let end: Int64 = 1_772_359_200
        try await userApplication(ledger, catalog: catalog, now: usageNow).test(.router) { client in
            // Ten days ago, before this period began: the previous period's.
            let late = try await postUsage(client, "/v1/users/user_pro/usage/radars/events", #"{"quantity": 5, "idempotency_key": "late", "timestamp": \#(usageNow - 10 * 86_400)}"#)
            #expect(late.status == .ok, "\(late.text)")
            #expect(late.json["used"] as? Int == 0)
            #expect(late.json["period_start"] as? Int == Int(start))
            let now = try await postUsage(client, "/v1/users/user_pro/usage/radars/events", #"{"quantity": 2, "idempotency_key": "now", "timestamp": \#(start)}"#)
            #expect(now.json["used"] as? Int == 2, "the first second of the period is in it")
        }
        #expect(try await SQLiteUsage(database: ledger.database).total(scope: .test, user: "user_pro", meter: "radars", period: UsagePeriod(start: start - 30 * 86_400, end: start)) == 5)
        // At the renewal: a new period at 0, and a record at exactly the old end is in it.
        try await userApplication(ledger, catalog: catalog, now: end + 10).test(.router) { client in
            let renewed = try await client.execute(uri: "/v1/users/user_pro/usage", method: .get, headers: authorized)
            let radars = try #require((renewed.json["meters"] as? [[String: Any]])?.first)
            #expect(radars["used"] as? Int == 0)
            #expect(radars["period_start"] as? Int == Int(end))
            let boundary = try await postUsage(client, "/v1/users/user_pro/usage/radars/events", #"{"quantity": 4, "idempotency_key": "edge", "timestamp": \#(end)}"#)
            #expect(boundary.json["used"] as? Int == 4)
        }
    }

    @Test("A plan change mid-period keeps the usage and switches the limit; per-seat limits multiply")
    func planChange() async throws {
        let catalog = try fixtureCatalog("usage")
        let twoSeats = try await usageLedger(teamQuantity: 2)
        defer { twoSeats.remove() }
        try await userApplication(twoSeats, catalog: catalog, now: usageNow).test(.router) { client in
            let used = try await postUsage(client, "/v1/users/user_team/usage/radars/consume", #"{"quantity": 400, "idempotency_key": "all"}"#)
            #expect(used.status == .ok, "\(used.text)")
            #expect(used.json["limit"] as? Int == 400, "200 a seat × 2")
            let refused = try await postUsage(client, "/v1/users/user_team/usage/radars/consume", #"{"quantity": 1, "idempotency_key": "one-more"}"#)
            #expect(refused.status.code == 402)
        }
        // A third seat in the same period: the 400 used stay, the limit is 600.
        var builder = UserLedgerBuilder(eventPrefix: "evt_seats_")
        builder.add(
            "customer.subscription.updated",
            UserFixtures.subscription("sub_team", customer: "cus_team", status: "active", lookupKey: "team_monthly", price: "price_Team", quantity: 3),
            created: 1_769_990_000)
        try await builder.apply(to: twoSeats)
        try await userApplication(twoSeats, catalog: catalog, now: usageNow).test(.router) { client in
            let more = try await postUsage(client, "/v1/users/user_team/usage/radars/consume", #"{"quantity": 1, "idempotency_key": "one-more"}"#)
            #expect(more.status == .ok, "\(more.text)")
            #expect(more.json["used"] as? Int == 401)
            #expect(more.json["limit"] as? Int == 600)
        }
    }

    @Test("A batch of records for many users is recorded together; one bad record refuses the batch and names it")
    func batch() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: try fixtureCatalog("usage"), now: usageNow).test(.router) { client in
            let bad = try await postUsage(client, "/v1/usage/events", #"{"events": [{"user": "u1", "meter": "radars", "quantity": 1, "idempotency_key": "a"}, {"user": "u2", "meter": "radars", "quantity": 0, "idempotency_key": "b"}]}"#)
            #expect(bad.status == .badRequest)
            #expect((bad.json["error"] as? [String: Any])?["field"] as? String == "events[1].quantity")
            let good = try await postUsage(client, "/v1/usage/events", #"{"events": [{"user": "u1", "meter": "radars", "quantity": 1, "idempotency_key": "a"}, {"user": "u2", "meter": "api_calls", "quantity": 5, "idempotency_key": "b"}, {"user": "u1", "meter": "radars", "quantity": 2, "idempotency_key": "c"}]}"#)
            #expect(good.status == .ok, "\(good.text)")
            #expect(good.json["recorded"] as? Int == 3)
            let results = try #require(good.json["results"] as? [[String: Any]])
            #expect(results.map { $0["used"] as? Int } == [1, 5, 3])
            let usage = try await client.execute(uri: "/v1/users/u1/usage", method: .get, headers: authorized)
            #expect((usage.json["meters"] as? [[String: Any]])?.first?["used"] as? Int == 3)
        }
    }

    @Test("Totals are held below a ceiling: records of 10^12 until past it answer 400 and never stop billingd; a refused batch records nothing")
    func totalCeiling() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: try fixtureCatalog("usage"), now: usageNow).test(.router) { client in
            // 1,000 records of 10^12 reach the ceiling (10^15) exactly.
            func batch(_ name: String, count: Int, user: String = "u1") -> String {
                let events = (0..<count).map { #"{"user": "\#(user)", "meter": "api_calls", "quantity": 1000000000000, "idempotency_key": "\#(name)-\#($0)"}"# }
                return #"{"events": [\#(events.joined(separator: ","))]}"#
            }
            let full = try await postUsage(client, "/v1/usage/events", batch("a", count: 1000))
            #expect(full.status == .ok, "\(full.text)")
            #expect((full.json["results"] as? [[String: Any]])?.last?["used"] as? Int == Int(UsageMeter.maximumTotal))
            // One more, alone or in a batch beside records that fit: 400, and nothing of the batch is kept.
            let one = try await postUsage(client, "/v1/users/u1/usage/api_calls/events", #"{"quantity": 1, "idempotency_key": "one-more"}"#)
            #expect(one.status == .badRequest, "\(one.text)")
            #expect(one.errorCode == "usage_total_too_large")
            let mixed = try await postUsage(
                client, "/v1/usage/events",
                #"{"events": [{"user": "u2", "meter": "api_calls", "quantity": 7, "idempotency_key": "m-0"}, {"user": "u1", "meter": "api_calls", "quantity": 5, "idempotency_key": "m-1"}]}"#)
            #expect(mixed.status == .badRequest, "\(mixed.text)")
            #expect((mixed.json["error"] as? [String: Any])?["field"] as? String == "events[1].quantity")
            let u2 = try await client.execute(uri: "/v1/users/u2/usage", method: .get, headers: authorized)
            #expect((u2.json["meters"] as? [[String: Any]])?.first { $0["meter"] as? String == "api_calls" }?["used"] as? Int == 0)
            // The daemon is still up, and the total where it was.
            let u1 = try await client.execute(uri: "/v1/users/u1/usage", method: .get, headers: authorized)
            #expect((u1.json["meters"] as? [[String: Any]])?.first { $0["meter"] as? String == "api_calls" }?["used"] as? Int == Int(UsageMeter.maximumTotal))
        }
    }

    @Test("An idempotency key reused with another quantity is a 400, as Stripe answers, and the first record stands")
    func idempotencyKeyReused() async throws {
        let ledger = try await usageLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: try fixtureCatalog("usage"), now: usageNow).test(.router) { client in
            let first = try await postUsage(client, "/v1/users/user_1/usage/api_calls/events", #"{"quantity": 3, "idempotency_key": "k-1"}"#)
            #expect(first.status == .ok)
            let other = try await postUsage(client, "/v1/users/user_1/usage/api_calls/events", #"{"quantity": 4, "idempotency_key": "k-1"}"#)
            #expect(other.status == .badRequest, "\(other.text)")
            #expect(other.errorCode == "idempotency_key_reused")
            let consume = try await postUsage(client, "/v1/users/user_1/usage/api_calls/consume", #"{"quantity": 4, "idempotency_key": "k-1"}"#)
            #expect(consume.errorCode == "idempotency_key_reused")
            let same = try await postUsage(client, "/v1/users/user_1/usage/api_calls/events", #"{"quantity": 3, "idempotency_key": "k-1"}"#)
            #expect(same.json["duplicate"] as? Bool == true)
            #expect(same.json["used"] as? Int == 3)
        }
    }

    @Test("Bad input gets a 400 JSON error naming the field; no token, 401", arguments: [
        ("/v1/users/u/usage/nope/events", #"{"quantity": 1, "idempotency_key": "k"}"#, 400, "unknown_meter"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 0, "idempotency_key": "k"}"#, 400, "invalid_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": -3, "idempotency_key": "k"}"#, 400, "invalid_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1.5, "idempotency_key": "k"}"#, 400, "invalid_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": "3", "idempotency_key": "k"}"#, 400, "invalid_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1}"#, 400, "missing_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1, "idempotency_key": 7}"#, 400, "invalid_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1, "idempotency_key": "k", "timestamp": 1766000000}"#, 400, "timestamp_out_of_range"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1, "idempotency_key": "k", "timestamp": 1770000600}"#, 400, "timestamp_out_of_range"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1, "idempotency_key": "k", "extra": 1}"#, 400, "unknown_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1, "#, 400, "invalid_body"),
        ("/v1/users/u/usage/radars/consume", #"{"quantity": 1, "idempotency_key": "k", "timestamp": 1770000000}"#, 400, "unknown_field"),
        ("/v1/users/u/usage/storage_bytes/consume", #"{"quantity": 1, "idempotency_key": "k"}"#, 400, "meter_is_gauge"),
        ("/v1/usage/events", #"{"events": []}"#, 400, "invalid_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1, "quantity": 2, "idempotency_key": "k"}"#, 400, "duplicate_field"),
        ("/v1/users/u/usage/radars/events", #"{"quantity": 1, "idempotency_key": "k", "idempotency\u005fkey": "j"}"#, 400, "duplicate_field"),
        ("/v1/usage/events", #"{"events": [{"user": "u", "user": "v", "meter": "radars", "quantity": 1, "idempotency_key": "k"}]}"#, 400, "duplicate_field"),
    ])
    func badInput(_ path: String, _ body: String, status: Int, code: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: try fixtureCatalog("usage"), now: usageNow).test(.router) { client in
            let response = try await postUsage(client, path, body)
            #expect(Int(response.status.code) == status, "\(response.text)")
            #expect(response.errorCode == code, "\(response.text)")
            let anonymous = try await client.execute(uri: path, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body))
            #expect(anonymous.status == .unauthorized)
        }
        #expect(try await SQLiteUsage(database: ledger.database).total(scope: .test, user: "u", meter: "radars", period: UsagePeriod(start: 0, end: .max)) == 0)
    }
}
