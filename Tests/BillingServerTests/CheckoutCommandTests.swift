import BillingCore
import Foundation
import GRDB
import StripeFake
import Testing

@Suite(
    "billingd checkout and billingd portal: the built binary against StripeFake",
    .needsBillingdBinary
)
struct CheckoutCommandTests {
    /// The settings pointing at the harness's fake, ledger and a catalog file selling its prices.
    private func environment(_ harness: BillingHarness) throws -> [String: String] {
        let catalog = harness.ledger.directory.appendingPathComponent("plans.yaml")
        try """
            version: 1
            tiers:
              - id: free
                name: Free
                rank: 0
              - id: pro
                name: Pro
                rank: 10
                stripe:
                  prices:
                    - lookup_key: pro_monthly
                      interval: month
                    - id: \(harness.prices.proYearly)
                      interval: year
              - id: team
                name: Team
                rank: 20
                stripe:
                  prices:
                    - lookup_key: team_seat_monthly
                      interval: month
            """.write(to: catalog, atomically: true, encoding: .utf8)
        return [
            "STRIPE_API_KEY": BillingHarness.apiKey, "STRIPE_API_BASE": harness.fake.baseURL,
            "BILLINGD_DATABASE": harness.ledger.directory.appendingPathComponent("ledger.sqlite3").path,
            "BILLINGD_PLANS": catalog.path, "BILLINGD_LOG_LEVEL": "error", "STRIPE_MAX_RETRIES": "0",
        ]
    }

    private let urls = ["--success-url", "https://app.example.com/done?s={CHECKOUT_SESSION_ID}", "--cancel-url", "https://app.example.com/pricing"]

    @Test("checkout prints the URL (or JSON), creates one customer, writes the ledger; portal prints the portal URL")
    func checkoutThenPortal() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        let environment = try environment(harness)

        let first = try await billingd(["checkout", "--user", "user_cli", "--plan", "pro", "--interval", "year", "--email", "cli@example.com"] + urls, environment: environment)
        #expect(first.status == 0, "\(first.stderr)")
        let url = first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(url.hasPrefix("https://checkout.stripe.com/c/pay/cs_test_"))
        #expect(!first.stdout.contains("\n\n"))
        let sent = try #require(await harness.sentForms("POST", "/v1/checkout/sessions").first)
        #expect(sent["line_items[0][price]"] == harness.prices.proYearly)
        #expect(sent["client_reference_id"] == "user_cli")
        #expect(await harness.sentForms("POST", "/v1/customers") == [["email": "cli@example.com", "metadata[app_user_id]": "user_cli"]])

        let second = try await billingd(
            ["checkout", "--user", "user_cli", "--lookup-key", "team_seat_monthly", "--quantity", "2", "--trial-days", "7", "--promotion-codes", "--json"] + urls,
            environment: environment)
        #expect(second.status == 0, "\(second.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(second.stdout.utf8)) as? [String: Any])
        #expect((json["id"] as? String)?.hasPrefix("cs_test_") == true)
        #expect(json["price"] as? String == harness.prices.teamMonthly)
        #expect(json["customer_created"] as? Bool == false)
        #expect((json["expires_at"] as? NSNumber) != nil)
        let secondSent = try #require(await harness.sentForms("POST", "/v1/checkout/sessions").last)
        #expect(secondSent["line_items[0][quantity]"] == "2")
        #expect(secondSent["subscription_data[trial_period_days]"] == "7")
        #expect(secondSent["allow_promotion_codes"] == "true")
        #expect(await harness.fake.requestCount(matching: .method("POST", path: "/v1/customers")) == 1)
        #expect(try await harness.count("checkoutSession", "clientReferenceID = 'user_cli'") == 2)

        let portal = try await billingd(["portal", "--user", "user_cli", "--return-url", "https://app.example.com/account"], environment: environment)
        #expect(portal.status == 0, "\(portal.stderr)")
        #expect(portal.stdout.hasPrefix("https://billing.stripe.com/p/session/"))
        #expect(await harness.sentForms("POST", "/v1/billing_portal/sessions").first?["customer"] == json["customer"] as? String)
    }

    @Test("Exit statuses: 64 for bad options, 1 for refusals (with the code), 75 when Stripe is down")
    func exitStatuses() async throws {
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.subscribe("user_pro", to: harness.prices.proMonthly)
        let environment = try environment(harness)

        let badURL = try await billingd(["checkout", "--user", "u", "--plan", "pro", "--success-url", "ftp://x", "--cancel-url", "https://a.example/"], environment: environment)
        #expect(badURL.status == 64)
        #expect(badURL.stderr.contains("--success-url"))
        let nothing = try await billingd(["checkout", "--user", "u"] + urls, environment: environment)
        #expect(nothing.status == 64)
        #expect(nothing.stderr.contains("--plan"))
        let two = try await billingd(["checkout", "--user", "u", "--plan", "pro", "--price", "price_1"] + urls, environment: environment)
        #expect(two.status == 64)
        let quantity = try await billingd(["checkout", "--user", "u", "--plan", "pro", "--quantity", "0"] + urls, environment: environment)
        #expect(quantity.status == 64)
        #expect(quantity.stderr.contains("--quantity"))

        let subscribed = try await billingd(["checkout", "--user", "user_pro", "--plan", "pro"] + urls, environment: environment)
        #expect(subscribed.status == 1)
        #expect(subscribed.stderr.contains("already_subscribed"))
        let unknownPlan = try await billingd(["checkout", "--user", "u", "--plan", "gold"] + urls, environment: environment)
        #expect(unknownPlan.status == 1)
        #expect(unknownPlan.stderr.contains("unknown_plan"))
        let stranger = try await billingd(["portal", "--user", "user_nobody", "--return-url", "https://a.example/"], environment: environment)
        #expect(stranger.status == 1)
        #expect(stranger.stderr.contains("user_not_found"))

        await harness.fake.inject(.status(500), times: 1, matching: .method("GET", path: "/v1/prices"))
        let down = try await billingd(["checkout", "--user", "u", "--plan", "pro"] + urls, environment: environment)
        #expect(down.status == 75, "\(down.stderr)")
        #expect(down.stderr.contains("stripe_unavailable"))

        var keyless = environment
        keyless.removeValue(forKey: "STRIPE_API_KEY")
        let noKey = try await billingd(["portal", "--user", "user_pro", "--return-url", "https://a.example/"], environment: keyless)
        #expect(noKey.status != 0)
        #expect(noKey.stderr.contains("STRIPE_API_KEY"))
        #expect(await harness.fake.requestCount(matching: .method("POST")) == 0)
    }

    @Test("--help explains both commands with examples")
    func help() async throws {
        let checkout = try await billingd(["checkout", "--help"], environment: [:])
        #expect(checkout.status == 0)
        #expect(checkout.stdout.contains("--lookup-key"))
        #expect(checkout.stdout.contains("billingd checkout --user user_42 --plan pro"))
        let portal = try await billingd(["portal", "--help"], environment: [:])
        #expect(portal.status == 0)
        #expect(portal.stdout.contains("--return-url"))
        let root = try await billingd(["--help"], environment: [:])
        #expect(root.stdout.contains("checkout"))
        #expect(root.stdout.contains("portal"))
    }
}
