import StripeFake
import Testing

/// Checkout Sessions are validated like Stripe's; completing one makes Stripe's objects and events.
@Suite struct FakeCheckoutTests {
    private func session(_ catalog: FakeCatalog, _ extra: [(String, String)] = []) -> [(String, String)] {
        [
            ("mode", "subscription"), ("line_items[0][price]", catalog.monthly), ("line_items[0][quantity]", "1"),
            ("success_url", "https://app.example.com/ok?session_id={CHECKOUT_SESSION_ID}"),
            ("cancel_url", "https://app.example.com/billing"),
        ] + extra
    }

    @Test func invalidSessionsAreRefusedWithTheParameter() async throws {
        try await withFake { fake, client in
            let catalog = try await FakeCatalog.make(in: fake)
            func refusal(_ form: [(String, String)]) async throws -> (String?, String?) {
                let answer = try await client.post("/v1/checkout/sessions", form)
                #expect(answer.status == 400)
                return (answer.error?["param"]?.stringValue, answer.error?["code"]?.stringValue)
            }
            let valid = session(catalog)
            #expect(try await refusal(valid.filter { $0.0 != "mode" }) == ("mode", "parameter_missing"))
            #expect(try await refusal(valid.filter { $0.0 != "success_url" }) == ("success_url", "parameter_missing"))
            #expect(
                try await refusal(
                    session(catalog).map { $0.0 == "line_items[0][price]" ? ($0.0, "price_missing") : $0 })
                    == ("line_items[0][price]", "resource_missing"))
            #expect(try await refusal(valid + [("customer", "cus_missing")]) == ("customer", "resource_missing"))
            #expect(
                try await refusal(valid.filter { $0.0 != "line_items[0][quantity]" }).0 == "line_items[0][quantity]")
            #expect(
                try await refusal(session(catalog, [("mode", "payment")]).dropFirst().map { $0 }).0
                    == "line_items[0][price]")
            #expect(try await refusal(valid + [("expires_at", String(fake.now + 60))]).0 == "expires_at")
            #expect(
                try await refusal(valid + [("subscription_data[trial_period_days]", "x")]).0
                    == "subscription_data[trial_period_days]")
            #expect(try await refusal(valid + [("unknown_thing", "1")]) == ("unknown_thing", "parameter_unknown"))

            try await fake.update(.price, catalog.monthly) { $0["active"] = false }
            #expect(try await refusal(valid).0 == "line_items[0][price]")

            let embedded = try await client.post(
                "/v1/checkout/sessions",
                [
                    ("mode", "subscription"), ("ui_mode", "embedded"), ("line_items[0][price]", catalog.yearly),
                    ("line_items[0][quantity]", "1"), ("return_url", "https://app.example.com/return"),
                ])
            #expect(embedded.status == 200)
            #expect(embedded.json["url"] == .null)
            #expect(embedded.json["client_secret"]?.stringValue?.isEmpty == false)
        }
    }

    @Test func completingACheckoutCreatesTheSubscriptionAndStripesEvents() async throws {
        try await withFake { fake, client in
            let catalog = try await FakeCatalog.make(in: fake)
            let created = try await client.post(
                "/v1/checkout/sessions",
                session(
                    catalog,
                    [
                        ("client_reference_id", "user_42"), ("customer_email", "buyer@example.com"),
                        ("subscription_data[metadata][app_user_id]", "user_42"), ("metadata[app_user_id]", "user_42"),
                        ("allow_promotion_codes", "true"),
                    ]))
            #expect(created.status == 200)
            let id = try #require(created.json["id"]?.stringValue)
            #expect(id.hasPrefix("cs_test_"))
            #expect(created.json["status"] == "open")
            #expect(created.json["url"]?.stringValue?.hasPrefix("https://checkout.stripe.com/c/pay/cs_test_") == true)
            let expiresIn = (created.json["expires_at"]?.intValue ?? 0) - fake.now
            #expect((86_000...86_400).contains(expiresIn))
            #expect(created.json["amount_total"] == 2000)
            #expect(await fake.events().count == 3)  // the catalog's; creating a session emits none

            let lineItems = try await client.get("/v1/checkout/sessions/\(id)/line_items")
            #expect(lineItems.json["data"]?[0]?[path: "price.id"] == .string(catalog.monthly))

            let completed = try await fake.completeCheckout(id)
            #expect(completed["status"] == "complete")
            #expect(completed["payment_status"] == "paid")
            #expect(completed[path: "customer_details.email"] == "buyer@example.com")
            let subscriptionID = try #require(completed["subscription"]?.stringValue)

            let fetched = try await client.get("/v1/checkout/sessions/\(id)")
            #expect(fetched.json == completed)
            let subscription = try await client.get("/v1/subscriptions/\(subscriptionID)")
            #expect(subscription.json["status"] == "active")
            #expect(subscription.json[path: "metadata.app_user_id"] == "user_42")
            #expect(subscription.json["customer"] == completed["customer"])

            #expect(
                Array(await fake.eventTypes().dropFirst(3)) == [
                    "customer.created", "payment_method.attached", "customer.subscription.created", "invoice.created",
                    "invoice.finalized", "invoice.paid", "invoice.payment_succeeded", "checkout.session.completed",
                ])
            await #expect(throws: StripeAPIError.self) { try await fake.completeCheckout(id) }
        }
    }

    @Test func portalSessionsAndEntitlements() async throws {
        try await withFake { fake, client in
            let customer = await fake.createCustomer(email: "p@example.com")
            let portal = try await client.post(
                "/v1/billing_portal/sessions",
                [("customer", customer), ("return_url", "https://app.example.com/account")])
            #expect(portal.json["object"] == "billing_portal.session")
            #expect(portal.json["id"]?.stringValue?.hasPrefix("bps_") == true)
            #expect(portal.json["url"]?.stringValue?.hasPrefix("https://billing.stripe.com/p/session/") == true)
            #expect(portal.json["return_url"] == "https://app.example.com/account")
            let missing = try await client.post("/v1/billing_portal/sessions", [("customer", "cus_nobody")])
            #expect(missing.error?["param"] == "customer")
            let noCustomer = try await client.post("/v1/billing_portal/sessions", [("return_url", "https://x")])
            #expect(noCustomer.error?["code"] == "parameter_missing")

            try await fake.setActiveEntitlements(
                customer: customer, lookupKeys: ["projects_unlimited", "storage_100gb"])
            let entitlements = try await client.get("/v1/entitlements/active_entitlements", [("customer", customer)])
            #expect(entitlements.json["object"] == "list")
            let keys = (entitlements.json["data"]?.arrayValue ?? []).compactMap { $0["lookup_key"]?.stringValue }
            #expect(keys == ["projects_unlimited", "storage_100gb"])
            let event = try #require(await fake.events().last)
            #expect(event["type"] == "entitlements.active_entitlement_summary.updated")
            #expect(event[path: "data.object.customer"] == .string(customer))
        }
    }
}
