import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import StripeFake
import Testing

private let successURL = "https://app.example.com/done?s={CHECKOUT_SESSION_ID}"
private let cancelURL = "https://app.example.com/pricing"

/// A request the checkout endpoint must refuse, and how.
struct RefusedCheckout: Sendable, CustomTestStringConvertible {
    let name: String
    let body: String
    var headers: HTTPFields = billingAuthorized
    let status: Int
    let code: String

    var testDescription: String { name }

    static func members(_ name: String, _ members: String, _ status: Int = 400, _ code: String) -> RefusedCheckout {
        RefusedCheckout(name: name, body: checkoutJSON("user_bad", members), status: status, code: code)
    }

    static let all: [RefusedCheckout] = [
        RefusedCheckout(name: "missing user", body: #"{"plan": "pro", "success_url": "https://a.example/s", "cancel_url": "https://a.example/c"}"#, status: 400, code: "missing_field"),
        RefusedCheckout(name: "user is a number", body: #"{"user": 42, "plan": "pro", "success_url": "https://a.example/s", "cancel_url": "https://a.example/c"}"#, status: 400, code: "invalid_field"),
        RefusedCheckout(name: "user is empty", body: checkoutJSON(""), status: 400, code: "missing_field"),
        RefusedCheckout(name: "user has a control character", body: checkoutJSON(#"a\u0007b"#), status: 400, code: "invalid_field"),
        members("nothing to sell", #""quantity": 1"#, 400, "missing_field"),
        members("plan and price", #""plan": "pro", "price": "price_1""#, 400, "conflicting_fields"),
        members("interval without plan", #""lookup_key": "pro_monthly", "interval": "year""#, 400, "invalid_field"),
        members("interval week", #""plan": "pro", "interval": "week""#, 400, "invalid_field"),
        members("interval is a number", #""plan": "pro", "interval": 12"#, 400, "invalid_field"),
        members("unknown plan", #""plan": "platinum""#, 400, "unknown_plan"),
        members("plan without yearly price", #""plan": "team", "interval": "year""#, 400, "unknown_plan"),
        members("free plan", #""plan": "free""#, 400, "plan_not_for_sale"),
        members("unknown lookup key", #""lookup_key": "gold_monthly""#, 400, "unknown_price"),
        members("unknown price", #""price": "price_1NoSuchPrice""#, 400, "unknown_price"),
        members("price id with a slash", #""price": "price_1/../customers""#, 400, "invalid_field"),
        members("one-time price", #""lookup_key": "setup_fee""#, 400, "price_not_recurring"),
        members("archived price", #""lookup_key": "pro_2019""#, 400, "price_inactive"),
        members("quantity as a string", #""plan": "pro", "quantity": "5""#, 400, "invalid_field"),
        members("quantity 0", #""plan": "pro", "quantity": 0"#, 400, "invalid_field"),
        members("quantity 10001", #""plan": "pro", "quantity": 10001"#, 400, "invalid_field"),
        members("quantity 1.5", #""plan": "pro", "quantity": 1.5"#, 400, "invalid_field"),
        members("trial 0 days", #""plan": "pro", "trial_days": 0"#, 400, "invalid_field"),
        members("trial 731 days", #""plan": "pro", "trial_days": 731"#, 400, "invalid_field"),
        members("promotion codes as a string", #""plan": "pro", "allow_promotion_codes": "yes""#, 400, "invalid_field"),
        members("bad e-mail", #""plan": "pro", "email": "ada at example""#, 400, "invalid_field"),
        members("unknown field", #""plan": "pro", "coupon": "FREE""#, 400, "unknown_field"),
        members("bad account", #""plan": "pro", "account": "cus_123""#, 400, "invalid_field"),
        RefusedCheckout(name: "ftp success_url", body: #"{"user": "u", "plan": "pro", "success_url": "ftp://a.example/s", "cancel_url": "https://a.example/c"}"#, status: 400, code: "invalid_url"),
        RefusedCheckout(name: "relative success_url", body: #"{"user": "u", "plan": "pro", "success_url": "/done", "cancel_url": "https://a.example/c"}"#, status: 400, code: "invalid_url"),
        RefusedCheckout(name: "success_url without host", body: #"{"user": "u", "plan": "pro", "success_url": "https:///done", "cancel_url": "https://a.example/c"}"#, status: 400, code: "invalid_url"),
        RefusedCheckout(name: "javascript cancel_url", body: #"{"user": "u", "plan": "pro", "success_url": "https://a.example/s", "cancel_url": "javascript:alert(1)"}"#, status: 400, code: "invalid_url"),
        RefusedCheckout(name: "cancel_url with a space", body: #"{"user": "u", "plan": "pro", "success_url": "https://a.example/s", "cancel_url": "https://a.example/c d"}"#, status: 400, code: "invalid_url"),
        RefusedCheckout(name: "missing cancel_url", body: #"{"user": "u", "plan": "pro", "success_url": "https://a.example/s"}"#, status: 400, code: "missing_field"),
        RefusedCheckout(name: "success_url is an object", body: #"{"user": "u", "plan": "pro", "success_url": {"url": "x"}, "cancel_url": "https://a.example/c"}"#, status: 400, code: "invalid_field"),
        RefusedCheckout(name: "not JSON", body: "user=u&plan=pro", status: 400, code: "invalid_json"),
        RefusedCheckout(name: "truncated JSON", body: #"{"user": "u", "plan": "#, status: 400, code: "invalid_json"),
        RefusedCheckout(name: "an array", body: #"[{"user": "u"}]"#, status: 400, code: "invalid_json"),
        RefusedCheckout(name: "empty body", body: "", status: 400, code: "invalid_json"),
        RefusedCheckout(
            name: "form content type", body: checkoutJSON("u"),
            headers: [.authorization: "Bearer \(BillingHarness.token)", .contentType: "application/x-www-form-urlencoded"], status: 415,
            code: "unsupported_media_type"),
        RefusedCheckout(
            name: "idempotency key with a space", body: checkoutJSON("u"),
            headers: billingAuthorized.adding("Idempotency-Key", "two words"), status: 400,
            code: "invalid_idempotency_key"),
        RefusedCheckout(
            name: "body over 64 KiB", body: checkoutJSON("u", #""plan": "pro", "email": "\#(String(repeating: "a", count: 70_000))@example.com""#),
            status: 413, code: "body_too_large"),
    ]
}

@Suite("Service API: POST /v1/checkout-sessions")
struct CheckoutEndpointTests {
    @Test("A new user gets a customer with metadata.app_user_id, then a session with every parameter billingd sets; both are in the ledger at once")
    func newUser() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.application().test(.router) { client in
            let before = try await client.execute(uri: "/v1/users/user_new/invoices", method: .get, headers: billingAuthorized)
            #expect(before.status == .notFound)

            let response = try await postJSON(
                client, "/v1/checkout-sessions",
                checkoutJSON("user_new", #""plan": "pro", "interval": "year", "trial_days": 14, "allow_promotion_codes": true, "email": "ada@example.com""#))
            #expect(response.status == .created, "\(response.text)")
            #expect(response.headers[.contentType] == "application/json")
            let json = response.json
            let id = try #require(json["id"] as? String)
            let customer = try #require(json["customer"] as? String)
            #expect(id.hasPrefix("cs_test_"))
            #expect((json["url"] as? String)?.hasPrefix("https://checkout.stripe.com/c/pay/\(id)") == true)
            let expiresAt = try #require((json["expires_at"] as? NSNumber)?.int64Value)
            #expect(expiresAt == harness.fake.now + 86_400)
            #expect(json["price"] as? String == harness.prices.proYearly)

            let customers = await harness.sentForms("POST", "/v1/customers")
            #expect(customers == [["email": "ada@example.com", "metadata[app_user_id]": "user_new"]])
            let customerKey = await harness.fake.requests(matching: .method("POST", path: "/v1/customers")).first?.idempotencyKey
            #expect(customerKey?.hasPrefix("billingd-customer-test-platform-") == true)
            #expect(customerKey?.contains("user_new") == false, "the user id is hashed, not sent in the key")

            let sessions = await harness.sentForms("POST", "/v1/checkout/sessions")
            #expect(sessions == [[
                "mode": "subscription", "customer": customer, "client_reference_id": "user_new",
                "line_items[0][price]": harness.prices.proYearly, "line_items[0][quantity]": "1",
                "success_url": successURL, "cancel_url": cancelURL, "allow_promotion_codes": "true",
                "subscription_data[trial_period_days]": "14", "subscription_data[metadata][app_user_id]": "user_new",
                "metadata[app_user_id]": "user_new",
            ]])
            let fakeSession = try #require(await harness.fake.object(.checkoutSession, id))
            #expect(fakeSession["customer"]?.stringValue == customer)
            #expect(fakeSession["client_reference_id"]?.stringValue == "user_new")

            // Written to the ledger before the answer: the user is known right away.
            #expect(try await harness.count("customer", "id = '\(customer)' AND appUserID = 'user_new' AND email = 'ada@example.com'") == 1)
            #expect(try await harness.count("checkoutSession", "id = '\(id)' AND status = 'open' AND clientReferenceID = 'user_new' AND customer = '\(customer)'") == 1)
            let after = try await client.execute(uri: "/v1/users/user_new/invoices", method: .get, headers: billingAuthorized)
            #expect(after.status == .ok)
        }
    }

    @Test("Plan (monthly by default), lookup key and price id each resolve to the right price; the user's customer is reused")
    func planChoices() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.application().test(.router) { client in
            let choices: [(String, String, String)] = [
                (#""plan": "pro""#, harness.prices.proMonthly, "1"),
                (#""plan": "pro", "interval": "month""#, harness.prices.proMonthly, "1"),
                (#""lookup_key": "team_seat_monthly", "quantity": 5"#, harness.prices.teamMonthly, "5"),
                (#""price": "\#(harness.prices.proYearly)""#, harness.prices.proYearly, "1"),
            ]
            var customers = Set<String>()
            for (members, price, quantity) in choices {
                let response = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_choices", members))
                #expect(response.status == .created, "\(members): \(response.text)")
                #expect(response.json["price"] as? String == price)
                customers.insert(try #require(response.json["customer"] as? String))
                let sent = await harness.sentForms("POST", "/v1/checkout/sessions").last
                #expect(sent?["line_items[0][price]"] == price)
                #expect(sent?["line_items[0][quantity]"] == quantity)
                #expect(sent?["subscription_data[trial_period_days]"] == nil)
                #expect(sent?["allow_promotion_codes"] == nil)
            }
            #expect(customers.count == 1)
            #expect(await harness.fake.requestCount(matching: .method("POST", path: "/v1/customers")) == 1)
            // Lookup keys are asked of Stripe, so a key moved to a new price is followed at once.
            let lookups = await harness.sentForms("GET", "/v1/prices")
            #expect(lookups.contains { $0["lookup_keys[0]"] == "pro_monthly" })
            #expect(lookups.contains { $0["lookup_keys[0]"] == "team_seat_monthly" })
        }
    }

    @Test("A customer created elsewhere with metadata.app_user_id is used, not duplicated")
    func customerCreatedElsewhere() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let existing = await harness.fake.createCustomer(email: "grace@example.com", metadata: ["app_user_id": "user_grace"])
        try await harness.syncEvents()
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_grace", #""plan": "team", "email": "other@example.com""#))
            #expect(response.status == .created, "\(response.text)")
            #expect(response.json["customer"] as? String == existing)
        }
        #expect(await harness.fake.requestCount(matching: .method("POST", path: "/v1/customers")) == 0)
        #expect(await harness.fake.count(of: .customer) == 1)
    }

    @Test("409 already_subscribed when a subscription already grants the tier; another tier, or after it ended, is sold")
    func alreadySubscribed() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let (customer, subscription) = try await harness.subscribe("user_pro", to: harness.prices.proMonthly)
        try await harness.application().test(.router) { client in
            for members in [#""plan": "pro""#, #""plan": "pro", "interval": "year""#, #""lookup_key": "pro_monthly""#, #""price": "\#(harness.prices.proYearly)""#] {
                let response = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_pro", members))
                #expect(response.status == .conflict, "\(members)")
                #expect(response.errorCode == "already_subscribed")
                #expect(response.errorMessage?.contains(subscription) == true)
                #expect(response.errorMessage?.contains("portal-sessions") == true)
            }
            #expect(await harness.fake.requestCount(matching: .method("POST", path: "/v1/checkout/sessions")) == 0)

            let upgrade = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_pro", #""plan": "team", "quantity": 3"#))
            #expect(upgrade.status == .created, "\(upgrade.text)")
            #expect(upgrade.json["customer"] as? String == customer)

            try await harness.fake.cancelSubscription(subscription)
            try await harness.syncEvents()
            let again = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_pro", #""plan": "pro""#))
            #expect(again.status == .created, "\(again.text)")
        }
    }

    @Test("Bad input gets a 4xx with a JSON error naming the problem, and nothing is created in Stripe", arguments: RefusedCheckout.all)
    func refused(_ refusal: RefusedCheckout) async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/checkout-sessions", refusal.body, headers: refusal.headers)
            #expect(response.status.code == refusal.status, "\(response.text)")
            #expect(response.errorCode == refusal.code, "\(response.text)")
            #expect(response.errorMessage?.isEmpty == false)
            #expect(response.headers[.contentType] == "application/json")
        }
        #expect(await harness.fake.requestCount(matching: .method("POST")) == 0)
    }

    @Test("20 concurrent checkouts for one new user create exactly one customer; two users get one each")
    func concurrentCheckouts() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.application().test(.router) { client in
            let answers = try await withThrowingTaskGroup(of: (Int, String?, String).self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let response = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_rush", #""plan": "pro""#))
                        return (Int(response.status.code), response.json["customer"] as? String, "user_rush")
                    }
                }
                for index in 0..<6 {
                    group.addTask {
                        let response = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_pair_\(index % 2)", #""plan": "team""#))
                        return (Int(response.status.code), response.json["customer"] as? String, "user_pair_\(index % 2)")
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.0 == 201 }, "\(answers)")
            #expect(Set(answers.filter { $0.2 == "user_rush" }.map(\.1)).count == 1)
            #expect(Set(answers.filter { $0.2.hasPrefix("user_pair_") }.map(\.1)).count == 2)
        }
        let creations = await harness.sentForms("POST", "/v1/customers")
        #expect(creations.filter { $0["metadata[app_user_id]"] == "user_rush" }.count == 1)
        #expect(creations.count == 3)
        #expect(await harness.fake.count(of: .customer) == 3)
        #expect(await harness.fake.count(of: .checkoutSession) == 26)
        #expect(try await harness.count("customer", "appUserID = 'user_rush'") == 1)
    }

    @Test("The same Idempotency-Key gives the same session; another key, or another user, a new one")
    func idempotencyKey() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let key = HTTPField.Name("Idempotency-Key")!
        try await harness.application().test(.router) { client in
            func checkout(_ user: String, _ idempotencyKey: String) async throws -> TestResponse {
                var headers = billingAuthorized
                headers[key] = idempotencyKey
                return try await postJSON(client, "/v1/checkout-sessions", checkoutJSON(user, #""plan": "pro""#), headers: headers)
            }
            let first = try await checkout("user_idem", "order-7f3a")
            let replay = try await checkout("user_idem", "order-7f3a")
            #expect(first.status == .created)
            #expect(replay.status == .created)
            #expect(first.json["id"] as? String != nil)
            #expect(replay.json["id"] as? String == first.json["id"] as? String)
            #expect(replay.json["url"] as? String == first.json["url"] as? String)
            let other = try await checkout("user_idem", "order-8b21")
            #expect(other.json["id"] as? String != first.json["id"] as? String)
            let otherUser = try await checkout("user_idem_2", "order-7f3a")
            #expect(otherUser.status == .created, "\(otherUser.text)")
            #expect(otherUser.json["id"] as? String != first.json["id"] as? String)
            let longKey = String(repeating: "k", count: 255)
            let long = try await checkout("user_idem", longKey)
            #expect(long.status == .created)
            #expect(try await checkout("user_idem", longKey).json["id"] as? String == long.json["id"] as? String)
        }
        #expect(await harness.fake.count(of: .checkoutSession) == 4)
        let keys = await harness.fake.requests(matching: .method("POST", path: "/v1/checkout/sessions")).compactMap(\.idempotencyKey)
        #expect(keys.allSatisfy { $0.hasPrefix("billingd-checkout-test-platform-") && $0.utf8.count <= 255 })
        #expect(try await harness.count("checkoutSession") == 4)
    }

    @Test("Stripe's failures: 5xx, 429 and dropped connections after retries → 503 with Retry-After; a refused key → 502; a refusal → 400 with Stripe's request id")
    func stripeFailures() async throws {
        let harness = try await BillingHarness.start(maxRetries: 1)
        defer { Task { await harness.stop() } }
        try await harness.application().test(.router) { client in
            for fault in [Fault.status(500), .status(503), .status(429), .dropConnection] {
                // libcurl itself retries a request whose reused connection dies, so a drop may be met twice per attempt.
                await harness.fake.inject(fault, times: 6, matching: .method("POST", path: "/v1/checkout/sessions"))
                let response = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_fail", #""plan": "pro""#))
                #expect(response.status == .serviceUnavailable, "\(fault): \(response.text)")
                #expect(response.errorCode == "stripe_unavailable")
                #expect(response.headers[.retryAfter] == "5")
                await harness.fake.clearFaults()
            }

            await harness.fake.inject(.expiredKey, times: 1, matching: .method("GET", path: "/v1/prices"))
            let auth = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_fail", #""plan": "pro""#))
            #expect(auth.status == .badGateway)
            #expect(auth.errorCode == "stripe_auth_failed")
            #expect(auth.errorMessage?.contains("STRIPE_API_KEY") == true)
            #expect(!auth.text.contains(BillingHarness.apiKey))

            await harness.fake.inject(.status(400), times: 1, matching: .method("POST", path: "/v1/checkout/sessions"))
            let rejected = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_fail", #""plan": "pro""#))
            #expect(rejected.status == .badRequest)
            #expect(rejected.errorCode == "stripe_rejected")
            #expect(rejected.errorMessage?.contains("Injected fault") == true)
            let requestID = try #require((rejected.json["error"] as? [String: Any])?["stripe_request_id"] as? String)
            #expect(requestID.hasPrefix("req_"))

            // Once Stripe is back, the same request succeeds with the customer made on the way.
            let recovered = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_fail", #""plan": "pro""#))
            #expect(recovered.status == .created, "\(recovered.text)")
        }
        #expect(await harness.fake.count(of: .customer) == 1)
    }

    @Test("A connected account in the body scopes every Stripe call and the ledger rows")
    func connectedAccount() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let account = "acct_1Connected"
        let product = await harness.fake.createProduct(name: "Pro", account: account)
        let price = try await harness.fake.createPrice(product: product, unitAmount: 999, lookupKey: "pro_monthly", account: account)
        try await harness.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_acct", #""plan": "pro", "account": "\#(account)""#))
            #expect(response.status == .created, "\(response.text)")
            #expect(response.json["price"] as? String == price)
            let platform = try await postJSON(client, "/v1/checkout-sessions", checkoutJSON("user_acct", #""plan": "pro""#))
            #expect(platform.status == .created)
            #expect(platform.json["customer"] as? String != response.json["customer"] as? String)
        }
        let connected = await harness.fake.requests.filter { $0.account == account }
        #expect(connected.map { "\($0.method) \($0.path)" }.sorted() == ["GET /v1/prices", "POST /v1/checkout/sessions", "POST /v1/customers"])
        #expect(try await harness.count("customer", "account = '\(account)' AND appUserID = 'user_acct'") == 1)
        #expect(try await harness.count("customer", "account = '' AND appUserID = 'user_acct'") == 1)
        #expect(try await harness.count("checkoutSession", "account = '\(account)'") == 1)
    }

    @Test("Without STRIPE_API_KEY every write answers 503 stripe_not_configured, saying what to set")
    func stripeNotConfigured() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.application(stripe: false).test(.router) { client in
            for (uri, body) in [
                ("/v1/checkout-sessions", checkoutJSON("user_42")), ("/v1/portal-sessions", #"{"user": "user_42", "return_url": "https://a.example/"}"#),
                ("/v1/users/user_42/subscription/cancel", "{}"),
            ] {
                let response = try await postJSON(client, uri, body)
                #expect(response.status == .serviceUnavailable, "\(uri)")
                #expect(response.errorCode == "stripe_not_configured")
                #expect(response.errorMessage?.contains("STRIPE_API_KEY") == true)
            }
            // The reads do not need Stripe.
            let read = try await client.execute(uri: "/v1/users/user_42/subscription", method: .get, headers: billingAuthorized)
            #expect(read.status == .ok)
        }
        #expect(await harness.fake.requestCount() == 0)
    }

    @Test("Every write refuses a missing or wrong bearer token with 401", arguments: [
        "/v1/checkout-sessions", "/v1/portal-sessions", "/v1/users/user_42/subscription/cancel",
    ])
    func unauthorized(uri: String) async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.application().test(.router) { client in
            for headers: HTTPFields in [
                [.contentType: "application/json"], [.authorization: "Bearer wrong-token-0123456789", .contentType: "application/json"],
                [.authorization: BillingHarness.token], [.authorization: "Basic \(BillingHarness.token)"],
            ] {
                let response = try await postJSON(client, uri, checkoutJSON("user_42"), headers: headers)
                #expect(response.status == .unauthorized)
                #expect(response.errorCode == "unauthorized")
            }
        }
        #expect(await harness.fake.requestCount() == 0)
    }
}
