import BillingCore
import BillingServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StripeFake
import Testing

@Suite("Service API: POST /v1/portal-sessions")
struct PortalEndpointTests {
    @Test("A user with a customer gets a portal session for it, with the return URL")
    func portalSession() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let (customer, _) = try await harness.subscribe("user_portal", to: harness.prices.teamMonthly, quantity: 3)
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/portal-sessions", #"{"user": "user_portal", "return_url": "https://app.example.com/account"}"#)
            #expect(response.status == .created, "\(response.text)")
            #expect((response.json["id"] as? String)?.hasPrefix("bps_") == true)
            #expect((response.json["url"] as? String)?.hasPrefix("https://billing.stripe.com/p/session/") == true)
            #expect(Set(response.json.keys) == ["id", "url"])
        }
        let sent = await harness.sentForms("POST", "/v1/billing_portal/sessions")
        #expect(sent == [["customer": customer, "return_url": "https://app.example.com/account"]])
    }

    @Test("The customer billingd created at Checkout is the one the portal opens; the Idempotency-Key replays the same session")
    func afterCheckout() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.application().test(.router) { client in
            let checkout = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_fresh"))
            let customer = try #require(checkout.json["customer"] as? String)
            let headers = billingAuthorized.adding("Idempotency-Key", "portal-1")
            let body = #"{"user": "user_fresh", "return_url": "http://localhost:3000/account"}"#
            let first = try await postJSON(client, "/v1/portal-sessions", body, headers: headers)
            let replay = try await postJSON(client, "/v1/portal-sessions", body, headers: headers)
            #expect(first.status == .created, "\(first.text)")
            #expect(replay.json["id"] as? String == first.json["id"] as? String)
            #expect(await harness.sentForms("POST", "/v1/billing_portal/sessions").first?["customer"] == customer)
        }
    }

    @Test("Refusals: unknown user 404, bad or missing fields 400, Stripe down 503", arguments: [
        (#"{"user": "user_nobody", "return_url": "https://a.example/"}"#, 404, "user_not_found"),
        (#"{"user": "user_portal", "return_url": "mailto:ada@example.com"}"#, 400, "invalid_url"),
        (#"{"user": "user_portal", "return_url": "app.example.com/account"}"#, 400, "invalid_url"),
        (#"{"user": "user_portal"}"#, 400, "missing_field"),
        (#"{"return_url": "https://a.example/"}"#, 400, "missing_field"),
        (#"{"user": ["user_portal"], "return_url": "https://a.example/"}"#, 400, "invalid_field"),
        (#"{"user": "user_portal", "return_url": "https://a.example/", "locale": "fr"}"#, 400, "unknown_field"),
        (#"{"user": "user_portal", "return_url": "https://a.example/", "account": "acct_"}"#, 400, "invalid_field"),
        (#"{"user": "user_portal", "return_url": 7}"#, 400, "invalid_field"),
        ("", 400, "invalid_json"),
    ])
    func refused(body: String, status: Int, code: String) async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.subscribe("user_portal", to: harness.prices.proMonthly)
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/portal-sessions", body)
            #expect(response.status.code == status, "\(response.text)")
            #expect(response.errorCode == code)
        }
        #expect(await harness.fake.requestCount(matching: .method("POST", path: "/v1/billing_portal")) == 0)
    }

    @Test("Stripe failing past retries is a 503 with Retry-After")
    func stripeDown() async throws {
        let harness = try await BillingHarness.start(maxRetries: 1)
        defer { Task { await harness.stop() } }
        try await harness.subscribe("user_portal", to: harness.prices.proMonthly)
        await harness.fake.inject(.status(500), times: 2, matching: .method("POST", path: "/v1/billing_portal/sessions"))
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/portal-sessions", #"{"user": "user_portal", "return_url": "https://a.example/"}"#)
            #expect(response.status == .serviceUnavailable)
            #expect(response.errorCode == "stripe_unavailable")
            #expect(response.headers[.retryAfter] != nil)
        }
    }
}
