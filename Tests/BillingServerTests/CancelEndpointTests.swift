import BillingCore
import BillingServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StripeFake
import Testing

@Suite("Service API: POST /v1/users/{user}/subscription/cancel")
struct CancelEndpointTests {
    private func subscription(_ client: some TestClientProtocol, _ user: String) async throws -> TestResponse {
        try await client.execute(uri: "/v1/users/\(user)/subscription", method: .get, headers: billingAuthorized)
    }

    @Test("Cancel at period end by default: Stripe's answer is in the ledger at once, so a read right after shows it")
    func atPeriodEnd() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let (_, subscriptionID) = try await harness.subscribe("user_cancel", to: harness.prices.proMonthly)
        try await harness.application().test(.router) { client in
            let before = try await subscription(client, "user_cancel")
            #expect(before.json["why"] as? String == "active")
            #expect(before.json["cancel_at_period_end"] as? Bool == false)

            let response = try await postJSON(client, "/v1/users/user_cancel/subscription/cancel", "")
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["subscription_id"] as? String == subscriptionID)
            #expect(response.json["cancel_at_period_end"] as? Bool == true)
            #expect(response.json["subscribed"] as? Bool == true)
            #expect(response.json["why"] as? String == "canceling")
            #expect(response.json["plan"] as? String == "pro")
            let periodEnd = try #require((response.json["current_period_end"] as? NSNumber)?.int64Value)
            #expect((response.json["ends_at"] as? NSNumber)?.int64Value == periodEnd)

            // No webhook has arrived: the read right after answers from what cancel wrote.
            let after = try await subscription(client, "user_cancel")
            #expect(after.status == .ok)
            #expect(after.text == response.text, "cancel answers the same view as GET …/subscription")
            #expect(after.json["cancel_at_period_end"] as? Bool == true)

            // Again: Stripe changes nothing and the answer stays the same.
            let again = try await postJSON(client, "/v1/users/user_cancel/subscription/cancel", #"{"at_period_end": true}"#)
            #expect(again.status == .ok)
            #expect(again.json["why"] as? String == "canceling")
        }
        let sent = await harness.sentForms("POST", "/v1/subscriptions/\(subscriptionID)")
        #expect(sent.first == ["cancel_at_period_end": "true"])
        #expect(await harness.fake.object(.subscription, subscriptionID)?["cancel_at_period_end"]?.boolValue == true)
        #expect(await harness.fake.requestCount(matching: .method("DELETE")) == 0)
        #expect(try await harness.count("subscription", "id = '\(subscriptionID)' AND cancelAtPeriodEnd = 1") == 1)
    }

    @Test("at_period_end false cancels now with DELETE; the view says canceled at once")
    func now() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let (_, subscriptionID) = try await harness.subscribe("user_now", to: harness.prices.teamMonthly, quantity: 4)
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/users/user_now/subscription/cancel", #"{"at_period_end": false}"#)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["status"] as? String == "canceled")
            #expect(response.json["subscribed"] as? Bool == false)
            #expect(response.json["why"] as? String == "expired")
            #expect(response.json["plan"] as? String == "free")
            let after = try await subscription(client, "user_now")
            #expect(after.text == response.text)

            // Nothing left to cancel.
            let second = try await postJSON(client, "/v1/users/user_now/subscription/cancel", "{}")
            #expect(second.status == .notFound)
            #expect(second.errorCode == "no_subscription")
        }
        #expect(await harness.fake.requests(matching: .method("DELETE")).map(\.path) == ["/v1/subscriptions/\(subscriptionID)"])
        #expect(await harness.fake.object(.subscription, subscriptionID)?["status"]?.stringValue == "canceled")
    }

    @Test("Refusals: no subscription 404, bad body 400, bad path 400, Stripe down 503", arguments: [
        ("user_cancel", "", 200, nil),
        ("user_unknown", "", 404, "no_subscription"),
        ("user_canceled", "", 404, "no_subscription"),
        ("user_cancel", #"{"at_period_end": "no"}"#, 400, "invalid_field"),
        ("user_cancel", #"{"at_period_end": 0}"#, 400, "invalid_field"),
        ("user_cancel", #"{"now": true}"#, 400, "unknown_field"),
        ("user_cancel", #"["at_period_end"]"#, 400, "invalid_json"),
        ("user_cancel?account=cus_1", "", 400, "invalid_parameter"),
        ("user_cancel?immediately=1", "", 400, "unknown_parameter"),
        ("%FF", "", 400, "invalid_user"),
    ] as [(String, String, Int, String?)])
    func refused(path: String, body: String, status: Int, code: String?) async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.subscribe("user_cancel", to: harness.prices.proMonthly)
        let (_, ended) = try await harness.subscribe("user_canceled", to: harness.prices.proMonthly)
        try await harness.fake.cancelSubscription(ended)
        try await harness.syncEvents()
        try await harness.application().test(.router) { client in
            let uri = path.contains("?") ? path.replacingOccurrences(of: "?", with: "/subscription/cancel?") : "\(path)/subscription/cancel"
            let response = try await postJSON(client, "/v1/users/\(uri)", body)
            #expect(response.status.code == status, "\(response.text)")
            #expect(response.errorCode == code)
        }
        let changes = await harness.fake.requestCount(matching: .method("POST", path: "/v1/subscriptions/"))
        #expect(changes == (status == 200 ? 1 : 0))
    }

    @Test("Stripe down past retries is a 503 with Retry-After and the ledger is unchanged")
    func stripeDown() async throws {
        let harness = try await BillingHarness.start(maxRetries: 1)
        defer { Task { await harness.stop() } }
        let (_, subscriptionID) = try await harness.subscribe("user_cancel", to: harness.prices.proMonthly)
        await harness.fake.inject(.status(502), times: 2, matching: .method("POST", path: "/v1/subscriptions/"))
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/users/user_cancel/subscription/cancel", "")
            #expect(response.status == .serviceUnavailable)
            #expect(response.errorCode == "stripe_unavailable")
            #expect(response.headers[.retryAfter] == "5")
            let read = try await subscription(client, "user_cancel")
            #expect(read.json["cancel_at_period_end"] as? Bool == false)
        }
        #expect(try await harness.count("subscription", "id = '\(subscriptionID)' AND cancelAtPeriodEnd = 0") == 1)
    }

    @Test("A subscription Stripe no longer has is a 404 no_subscription, not a 500")
    func goneInStripe() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let (_, subscriptionID) = try await harness.subscribe("user_gone", to: harness.prices.proMonthly)
        await harness.fake.remove(.subscription, subscriptionID)
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/users/user_gone/subscription/cancel", "")
            #expect(response.status == .notFound, "\(response.text)")
            #expect(response.errorCode == "no_subscription")
        }
    }
}
