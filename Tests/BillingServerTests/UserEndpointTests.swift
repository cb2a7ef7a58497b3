import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// Unix seconds the application answers at: inside the fixtures' period 1769940000…1772359200.
private let now: Int64 = 1_770_000_000
private let day: Int64 = 86_400

/// A ledger of several users, from real events:
/// - `user_42`: customer by metadata, Pro monthly active, a default card and a detached one,
///   invoices paid, open and draft, active Stripe entitlements; also data in live mode and in a
///   connected account, which the default scope never shows.
/// - `user_checkout`: a customer without metadata, tied by a completed Checkout session; Team,
///   trialing, 5 seats, the card the default of the subscription only.
/// - `user_past_due`: Pro past_due, its renewal invoice open since 3 days.
/// - `user/with slash`: a user id that needs percent-encoding, Pro canceling at period end.
/// - `user_mystery`: active on a price no tier names.
private func usersLedger() async throws -> TemporaryLedger {
    var events = UserLedgerBuilder()
    events.add("customer.created", UserFixtures.customer("cus_42", user: "user_42", defaultPaymentMethod: "pm_42"))
    events.add("customer.subscription.updated", UserFixtures.subscription("sub_42", customer: "cus_42", status: "active", latestInvoice: "in_42_b"))
    events.add("payment_method.attached", UserFixtures.paymentMethod("pm_42", customer: "cus_42"))
    events.add("payment_method.attached", UserFixtures.paymentMethod("pm_42_old", customer: "cus_42", brand: "mastercard", last4: "4444", created: 1_769_000_000))
    events.add("payment_method.detached", UserFixtures.paymentMethod("pm_42_old", customer: nil), created: 1_769_950_000)
    events.add("invoice.paid", UserFixtures.invoice("in_42_a", customer: "cus_42", status: "paid", created: 1_767_000_000, subscription: "sub_42", total: 999))
    events.add("invoice.paid", UserFixtures.invoice("in_42_b", customer: "cus_42", status: "paid", created: 1_769_940_000, subscription: "sub_42", total: 999))
    events.add("invoice.finalized", UserFixtures.invoice("in_42_c", customer: "cus_42", status: "open", created: 1_769_990_000, total: 5000, currency: "jpy", dueDate: 1_770_500_000))
    events.add("invoice.created", UserFixtures.invoice("in_42_draft", customer: "cus_42", status: "draft", created: 1_769_999_000))
    events.add("entitlements.active_entitlement_summary.updated", UserFixtures.entitlements(customer: "cus_42", lookupKeys: ["ssh_tunnels", "export_csv"]))
    // The same user in live mode and in a connected account: never part of the test-mode answer.
    events.add("customer.created", UserFixtures.customer("cus_42_live", user: "user_42"), livemode: true)
    events.add("customer.subscription.updated", UserFixtures.subscription("sub_42_live", customer: "cus_42_live", status: "active", lookupKey: "team_seat_monthly", quantity: 9), livemode: true)
    events.add("customer.created", UserFixtures.customer("cus_42_acct", user: "user_42"), account: "acct_1Connected")
    events.add("customer.subscription.updated", UserFixtures.subscription("sub_42_acct", customer: "cus_42_acct", status: "trialing", lookupKey: "team_seat_monthly", quantity: 2), account: "acct_1Connected")

    events.add("customer.created", UserFixtures.customer("cus_co", user: nil))
    events.add("checkout.session.completed", UserFixtures.checkoutSession("cs_test_co", customer: "cus_co", user: "user_checkout", subscription: "sub_co"))
    events.add("payment_method.attached", UserFixtures.paymentMethod("pm_co", customer: "cus_co", brand: "amex", last4: "0005"))
    events.add("customer.subscription.updated", UserFixtures.subscription(
        "sub_co", customer: "cus_co", status: "trialing", lookupKey: "team_seat_monthly", price: "price_TeamSeat", quantity: 5, unitAmount: 1200,
        defaultPaymentMethod: "pm_co", members: ["trial_start": 1_769_940_000, "trial_end": 1_771_149_600]))

    events.add("customer.created", UserFixtures.customer("cus_pd", user: "user_past_due"))
    events.add("customer.subscription.updated", UserFixtures.subscription("sub_pd", customer: "cus_pd", status: "past_due", latestInvoice: "in_pd"))
    events.add("invoice.payment_failed", UserFixtures.invoice("in_pd", customer: "cus_pd", status: "open", created: now - 3 * day, subscription: "sub_pd"))

    events.add("customer.created", UserFixtures.customer("cus_sl", user: "user/with slash"))
    events.add("customer.subscription.updated", UserFixtures.subscription(
        "sub_sl", customer: "cus_sl", status: "active", members: ["cancel_at_period_end": true, "cancel_at": 1_772_359_200, "canceled_at": 1_769_990_000]))

    events.add("customer.created", UserFixtures.customer("cus_my", user: "user_mystery"))
    events.add("customer.subscription.updated", UserFixtures.subscription("sub_my", customer: "cus_my", status: "active", lookupKey: "legacy_gold", price: "price_Gold"))
    return try await events.ledger()
}

private func get(_ client: some TestClientProtocol, _ uri: String, headers: HTTPFields = authorized) async throws -> TestResponse {
    try await client.execute(uri: uri, method: .get, headers: headers)
}

@Suite("Service API: GET /v1/users/{user}/…")
struct UserEndpointTests {
    static let paths = ["subscription", "entitlements", "invoices", "payment-methods"]

    @Test("Every user endpoint refuses a missing or wrong bearer token with 401", arguments: paths)
    func unauthorized(path: String) async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            for headers: HTTPFields in [[:], [.authorization: "Bearer wrong-token-0123456789"], [.authorization: userAPIToken]] {
                let response = try await get(client, "/v1/users/user_42/\(path)", headers: headers)
                #expect(response.status == .unauthorized)
                #expect(response.errorCode == "unauthorized")
                #expect(response.headers[.wwwAuthenticate] == #"Bearer realm="billingd""#)
            }
        }
    }

    @Test("GET subscription: plan, status, price, period and the rest of the view")
    func subscription() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let response = try await get(client, "/v1/users/user_42/subscription")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json")
            #expect(response.headers[.cacheControl] == "no-store")
            let json = response.json
            #expect(json["user"] as? String == "user_42")
            #expect(json["livemode"] as? Bool == false)
            #expect(json["account"] is NSNull)
            #expect(json["subscribed"] as? Bool == true)
            #expect(json["plan"] as? String == "pro")
            #expect(json["plan_name"] as? String == "Pro")
            #expect(json["status"] as? String == "active")
            #expect(json["why"] as? String == "active")
            #expect(json["source"] as? String == "stripe")
            #expect(json["subscription_id"] as? String == "sub_42")
            #expect(json["customer_id"] as? String == "cus_42")
            #expect(json["product_id"] as? String == "prod_Pro")
            #expect(json["price_id"] as? String == "price_ProMonthly")
            #expect(json["lookup_key"] as? String == "pro_monthly")
            #expect(json["interval"] as? String == "month")
            #expect(json["interval_count"] as? Int == 1)
            #expect(json["quantity"] as? Int == 1)
            #expect(jsonText(json["unit_amount"]) == moneyText(999, "usd", "9.99"))
            #expect(json["current_period_start"] as? Int == 1_769_940_000)
            #expect(json["current_period_end"] as? Int == 1_772_359_200)
            #expect(json["cancel_at_period_end"] as? Bool == false)
            #expect(json["cancel_at"] is NSNull)
            #expect(json["trial_end"] is NSNull)
            #expect(json["ends_at"] is NSNull)
            #expect(json["valid_until"] as? Int == 1_772_359_200)
            #expect(json["grace_until"] is NSNull)
            #expect(json["unmapped_price"] is NSNull)
            #expect(Set(json.keys) == [
                "user", "livemode", "account", "subscribed", "plan", "plan_name", "status", "why", "source", "subscription_id",
                "customer_id", "product_id", "price_id", "lookup_key", "interval", "interval_count", "quantity", "unit_amount",
                "current_period_start", "current_period_end", "cancel_at_period_end", "cancel_at", "canceled_at", "trial_start",
                "trial_end", "ends_at", "valid_until", "grace_until", "unmapped_price", "will_renew", "billing_issue", "environment",
            ])
        }
    }

    @Test("A user billingd knows nothing of is a free user: 200, not subscribed")
    func unknownUserIsFree() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let subscription = try await get(client, "/v1/users/nobody/subscription")
            #expect(subscription.status == .ok)
            #expect(subscription.json["subscribed"] as? Bool == false)
            #expect(subscription.json["plan"] as? String == "free")
            #expect(subscription.json["why"] as? String == "free")
            #expect(subscription.json["status"] is NSNull)
            #expect(subscription.json["source"] is NSNull)
            #expect(subscription.json["subscription_id"] is NSNull)
            #expect(subscription.json["quantity"] is NSNull)
            #expect(subscription.json["unit_amount"] is NSNull)

            let entitlements = try await get(client, "/v1/users/nobody/entitlements")
            #expect(entitlements.status == .ok)
            #expect(entitlements.json["plan"] as? String == "free")
            #expect(entitlements.json["entitled"] as? Bool == false)
            #expect(entitlements.json["limits"] as? [String: Int] == ["connections": 2, "saved_queries": 20])
            #expect(entitlements.json["features"] as? [String] == [])
            #expect(entitlements.json["stripe_entitlements"] as? [String] == [])
        }
    }

    @Test("GET entitlements: features, limits, Stripe's active entitlements, valid_until and why")
    func entitlements() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let json = try await get(client, "/v1/users/user_42/entitlements").json
            #expect(json["plan"] as? String == "pro")
            #expect(json["plan_name"] as? String == "Pro")
            #expect(json["rank"] as? Int == 10)
            #expect(json["entitled"] as? Bool == true)
            #expect(json["why"] as? String == "active")
            #expect(json["status"] as? String == "active")
            #expect(json["subscription_id"] as? String == "sub_42")
            #expect(json["valid_until"] as? Int == 1_772_359_200)
            #expect(json["features"] as? [String] == ["ssh_tunnels", "query_history", "export_csv"])
            #expect(json["limits"] as? [String: String] == ["connections": "unlimited", "saved_queries": "unlimited"])
            #expect(json["stripe_entitlements"] as? [String] == ["export_csv", "ssh_tunnels"])
            #expect(json["quantity"] as? Int == 1)
        }
    }

    @Test("A user tied only by Checkout's client_reference_id; per-seat limits from the quantity")
    func checkoutUserWithSeats() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let subscription = try await get(client, "/v1/users/user_checkout/subscription").json
            #expect(subscription["plan"] as? String == "team")
            #expect(subscription["status"] as? String == "trialing")
            #expect(subscription["why"] as? String == "trialing")
            #expect(subscription["trial_end"] as? Int == 1_771_149_600)
            #expect(subscription["valid_until"] as? Int == 1_771_149_600)
            #expect(subscription["quantity"] as? Int == 5)
            #expect(jsonText(subscription["unit_amount"]) == moneyText(1200, "usd", "12.00"))
            let entitlements = try await get(client, "/v1/users/user_checkout/entitlements").json
            #expect(jsonText(entitlements["limits"]) == #"{"connections":50,"saved_queries":"unlimited","seats":5}"#)
            #expect(entitlements["quantity"] as? Int == 5)
        }
    }

    @Test("past_due inside the grace period: the tier stays, with grace_until from the open invoice")
    func pastDueGrace() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        // free-pro-team: Pro keeps 3 days of grace; the renewal invoice was created 3 days ago minus a minute.
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team"), now: now - 60).test(.router) { client in
            let json = try await get(client, "/v1/users/user_past_due/entitlements").json
            #expect(json["plan"] as? String == "pro")
            #expect(json["why"] as? String == "grace")
            #expect(json["status"] as? String == "past_due")
            #expect(json["grace_until"] as? Int == Int(now))
            #expect(json["valid_until"] as? Int == Int(now))
        }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team"), now: now).test(.router) { client in
            let json = try await get(client, "/v1/users/user_past_due/subscription").json
            #expect(json["plan"] as? String == "free")
            #expect(json["subscribed"] as? Bool == false)
            #expect(json["why"] as? String == "expired")
            #expect(json["status"] as? String == "past_due")
            #expect(json["subscription_id"] as? String == "sub_pd")
        }
    }

    @Test("A percent-encoded user id; canceling at period end reports ends_at")
    func encodedUserCanceling() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let json = try await get(client, "/v1/users/user%2Fwith%20slash/subscription").json
            #expect(json["user"] as? String == "user/with slash")
            #expect(json["plan"] as? String == "pro")
            #expect(json["why"] as? String == "canceling")
            #expect(json["cancel_at_period_end"] as? Bool == true)
            #expect(json["canceled_at"] as? Int == 1_769_990_000)
            #expect(json["ends_at"] as? Int == 1_772_359_200)
        }
    }

    @Test("A price that no tier names: subscribed, plan null, the default tier's limits")
    func unmappedPrice() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let subscription = try await get(client, "/v1/users/user_mystery/subscription").json
            #expect(subscription["subscribed"] as? Bool == true)
            #expect(subscription["plan"] is NSNull)
            #expect(subscription["plan_name"] is NSNull)
            #expect(subscription["status"] as? String == "active")
            #expect(subscription["unmapped_price"] as? String == "price_Gold")
            let entitlements = try await get(client, "/v1/users/user_mystery/entitlements").json
            #expect(entitlements["plan"] is NSNull)
            #expect(entitlements["rank"] is NSNull)
            #expect(entitlements["limits"] as? [String: Int] == ["connections": 2, "saved_queries": 20])
        }
    }

    @Test("Without a catalog every paid user has plan null and the free tier answers everyone else")
    func withoutCatalog() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: .freeOnly).test(.router) { client in
            let paid = try await get(client, "/v1/users/user_42/subscription").json
            #expect(paid["plan"] is NSNull)
            #expect(paid["subscribed"] as? Bool == true)
            let free = try await get(client, "/v1/users/nobody/subscription").json
            #expect(free["plan"] as? String == "free")
        }
    }

    @Test("Mode and account: ?account= reads a connected account; a live-mode billingd reads live data only")
    func scopes() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        let catalog = try fixtureCatalog("free-pro-team")
        try await userApplication(ledger, catalog: catalog).test(.router) { client in
            let connected = try await get(client, "/v1/users/user_42/subscription?account=acct_1Connected").json
            #expect(connected["account"] as? String == "acct_1Connected")
            #expect(connected["subscription_id"] as? String == "sub_42_acct")
            #expect(connected["plan"] as? String == "team")
            let otherAccount = try await get(client, "/v1/users/user_42/invoices?account=acct_1Other")
            #expect(otherAccount.status == .notFound)
        }
        try await userApplication(ledger, catalog: catalog, scope: .forAPIKey(isLive: true)).test(.router) { client in
            let live = try await get(client, "/v1/users/user_42/entitlements").json
            #expect(live["livemode"] as? Bool == true)
            #expect(live["subscription_id"] as? String == "sub_42_live")
            #expect(jsonText(live["limits"]) == #"{"connections":90,"saved_queries":"unlimited","seats":9}"#)
            #expect(live["stripe_entitlements"] as? [String] == [])
            let invoices = try await get(client, "/v1/users/user_42/invoices").json
            #expect((invoices["data"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("GET invoices: newest first, drafts left out, exact amounts, URLs")
    func invoices() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let response = try await get(client, "/v1/users/user_42/invoices")
            #expect(response.status == .ok)
            let json = response.json
            #expect(json["object"] as? String == "list")
            #expect(json["has_more"] as? Bool == false)
            #expect(json["next_starting_after"] is NSNull)
            let data = try #require(json["data"] as? [[String: Any]])
            #expect(data.map { $0["id"] as? String } == ["in_42_c", "in_42_b", "in_42_a"])
            let open = data[0]
            #expect(open["status"] as? String == "open")
            #expect(open["currency"] as? String == "jpy")
            #expect(jsonText(open["total"]) == moneyText(1944, "jpy", "1944"))
            #expect(jsonText(open["amount_due"]) == moneyText(5000, "jpy", "5000"))
            #expect(jsonText(open["amount_paid"]) == moneyText(0, "jpy", "0"))
            #expect(open["due_date"] as? Int == 1_770_500_000)
            #expect(open["paid_at"] is NSNull)
            let paid = data[1]
            #expect(paid["number"] as? String == "N-in_42_b")
            #expect(paid["subscription_id"] as? String == "sub_42")
            #expect(paid["customer_id"] as? String == "cus_42")
            #expect(jsonText(paid["subtotal"]) == moneyText(2000, "usd", "20.00"))
            #expect(jsonText(paid["discount"]) == moneyText(200, "usd", "2.00"))
            #expect(jsonText(paid["tax"]) == moneyText(144, "usd", "1.44"))
            #expect(jsonText(paid["amount_paid"]) == moneyText(999, "usd", "9.99"))
            #expect(paid["created"] as? Int == 1_769_940_000)
            #expect(paid["paid_at"] as? Int == 1_769_940_003)
            #expect(paid["period_start"] as? Int == 1_769_940_000)
            #expect(paid["period_end"] as? Int == 1_772_359_200)
            #expect(paid["hosted_invoice_url"] as? String == "https://invoice.stripe.com/i/in_42_b")
            #expect(paid["invoice_pdf"] as? String == "https://pay.stripe.com/invoice/in_42_b/pdf")
            #expect(paid["billing_reason"] as? String == "subscription_create")
        }
    }

    @Test("GET invoices pages with limit and starting_after")
    func invoicePages() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            var ids: [String] = []
            var after: String?
            var pages = 0
            repeat {
                let uri = "/v1/users/user_42/invoices?limit=2" + (after.map { "&starting_after=\($0)" } ?? "")
                let json = try await get(client, uri).json
                let data = try #require(json["data"] as? [[String: Any]])
                ids += data.compactMap { $0["id"] as? String }
                after = json["next_starting_after"] as? String
                #expect((json["has_more"] as? Bool) == (after != nil))
                pages += 1
            } while after != nil && pages < 5
            #expect(ids == ["in_42_c", "in_42_b", "in_42_a"])
            #expect(pages == 2)
        }
    }

    @Test("GET payment-methods: brand, last 4, expiry, the default; detached cards left out")
    func paymentMethods() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let json = try await get(client, "/v1/users/user_42/payment-methods").json
            let data = try #require(json["data"] as? [[String: Any]])
            #expect(data.count == 1)
            #expect(data[0]["id"] as? String == "pm_42")
            #expect(data[0]["type"] as? String == "card")
            #expect(data[0]["brand"] as? String == "visa")
            #expect(data[0]["last4"] as? String == "4242")
            #expect(data[0]["exp_month"] as? Int != nil)
            #expect(data[0]["exp_year"] as? Int != nil)
            #expect(data[0]["default"] as? Bool == true)
            #expect(data[0]["fingerprint"] == nil)
            #expect(json["default_payment_method"] as? String == "pm_42")

            // Checkout sets the subscription's default payment method, not the customer's.
            let checkout = try await get(client, "/v1/users/user_checkout/payment-methods").json
            let methods = try #require(checkout["data"] as? [[String: Any]])
            #expect(methods.map { $0["id"] as? String } == ["pm_co"])
            #expect(methods[0]["default"] as? Bool == true)
            #expect(methods[0]["brand"] as? String == "amex")

            let none = try await get(client, "/v1/users/user_past_due/payment-methods").json
            #expect((none["data"] as? [Any])?.isEmpty == true)
            #expect(none["default_payment_method"] is NSNull)
        }
    }

    @Test("Invoices and payment methods of an unknown user are 404 user_not_found", arguments: ["invoices", "payment-methods"])
    func unknownUserHistory(path: String) async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let response = try await get(client, "/v1/users/nobody/\(path)")
            #expect(response.status == .notFound)
            #expect(response.errorCode == "user_not_found")
        }
    }

    @Test("Bad input is a 400 with a JSON error that names it", arguments: [
        ("/v1/users/\(String(repeating: "u", count: 256))/subscription", "invalid_user"),
        ("/v1/users/\(String(repeating: "%C3%A9", count: 128))/entitlements", "invalid_user"),
        ("/v1/users/user%0A42/subscription", "invalid_user"),
        ("/v1/users/user%7F/subscription", "invalid_user"),
        ("/v1/users/user%zz/subscription", "invalid_user"),
        ("/v1/users/%20%00/subscription", "invalid_user"),
        ("/v1/users/user_42/subscription?acount=acct_1", "unknown_parameter"),
        ("/v1/users/user_42/subscription?limit=5", "unknown_parameter"),
        ("/v1/users/user_42/entitlements?account=platform", "invalid_parameter"),
        ("/v1/users/user_42/entitlements?account=acct_1&account=acct_2", "invalid_parameter"),
        ("/v1/users/user_42/payment-methods?account=acct_%20x", "invalid_parameter"),
        ("/v1/users/user_42/invoices?limit=0", "invalid_parameter"),
        ("/v1/users/user_42/invoices?limit=101", "invalid_parameter"),
        ("/v1/users/user_42/invoices?limit=ten", "invalid_parameter"),
        ("/v1/users/user_42/invoices?starting_after=in_nope", "invalid_parameter"),
        ("/v1/users/user_42/invoices?starting_after=in_pd", "invalid_parameter"),
        ("/v1/users/user_42/invoices?starting_after=in%3Bdrop", "invalid_parameter"),
    ])
    func badInput(uri: String, code: String) async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let response = try await get(client, uri)
            #expect(response.status == .badRequest, "\(uri): \(response.text)")
            #expect(response.errorCode == code, "\(uri): \(response.text)")
            let message = (response.json["error"] as? [String: Any])?["message"] as? String
            #expect(message?.isEmpty == false)
        }
    }

    @Test("A user id of exactly 255 bytes is accepted")
    func longestUser() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let user = String(repeating: "u", count: 255)
            let response = try await get(client, "/v1/users/\(user)/subscription")
            #expect(response.status == .ok)
            #expect(response.json["user"] as? String == user)
        }
    }

    @Test("Unknown routes under /v1/users are a JSON 404")
    func unknownRoute() async throws {
        let ledger = try await usersLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: fixtureCatalog("free-pro-team")).test(.router) { client in
            let response = try await get(client, "/v1/users/user_42/subscriptions")
            #expect(response.status == .notFound)
            #expect(response.errorCode == "not_found")
        }
    }
}
