import Foundation
import NIOHTTP1
import StripeFake
import Testing

/// The fake speaks Stripe's wire rules: auth, headers, form parsing, and the errors for mistakes.
@Suite struct FakeWireTests {
    @Test func wrongOrMissingKeyIsRefusedWithAMaskedKey() async throws {
        try await withFake { _, client in
            var wrong = client
            wrong.apiKey = "sk_test_someoneelse4321"
            let refused = try await wrong.get("/v1/customers")
            #expect(refused.status == 401)
            #expect(refused.error?["type"] == "invalid_request_error")
            #expect(refused.error?["message"] == "Invalid API Key provided: sk_test_****4321")
            #expect(refused.header("Request-Id")?.hasPrefix("req_") == true)

            var anonymous = client
            anonymous.apiKey = nil
            let missing = try await anonymous.get("/v1/customers")
            #expect(missing.status == 401)
            #expect(missing.error?["message"]?.stringValue?.hasPrefix("You did not provide an API key.") == true)
        }
    }

    @Test func everyAnswerHasARequestIDAndADate() async throws {
        try await withFake { _, client in
            let answer = try await client.get("/v1/customers", headers: [("Stripe-Version", "2026-10-28.clover")])
            #expect(answer.status == 200)
            #expect(answer.header("Request-Id")?.count == "req_".count + 14)
            #expect(answer.header("Date") != nil)
            #expect(answer.header("Content-Type") == "application/json")
            #expect(answer.header("Stripe-Version") == "2026-10-28.clover")
            #expect(answer.json == ["object": "list", "data": [], "has_more": false, "url": "/v1/customers"])

            let unknown = try await client.get("/v1/coupons")
            #expect(unknown.status == 404)
            #expect(
                unknown.error?["message"]?.stringValue?.hasPrefix("Unrecognized request URL (GET: /v1/coupons)") == true
            )
            #expect(unknown.header("Request-Id") != nil)
        }
    }

    @Test func bracketedFormParametersAreReadAsNestedValues() async throws {
        try await withFake { fake, client in
            let created = try await client.post(
                "/v1/customers",
                [
                    ("email", "ada@example.com"), ("name", "Ada Lovelace"), ("metadata[app_user_id]", "u1"),
                    ("metadata[plan]", "pro plan"), ("expand[]", "invoice_settings.default_payment_method"),
                ],
                headers: [("Stripe-Version", "2026-10-28.clover")])
            #expect(created.status == 200)
            #expect(created.json["metadata"] == ["app_user_id": "u1", "plan": "pro plan"])
            #expect(created.json["id"]?.stringValue?.hasPrefix("cus_") == true)
            #expect(created.json["id"]?.stringValue?.count == "cus_".count + 14)
            #expect(created.json["object"] == "customer")
            #expect(created.json["livemode"] == false)

            let recorded = try #require(await fake.requests(matching: .path("/v1/customers", method: "POST")).last)
            #expect(recorded.stripeVersion == "2026-10-28.clover")
            #expect(recorded.parameters?["metadata"]?["app_user_id"] == .string("u1"))
            #expect(recorded.parameters?["expand"] == .array([.string("invoice_settings.default_payment_method")]))
            #expect(recorded.header("content-type") == "application/x-www-form-urlencoded")

            // Indexed arrays, as Stripe's libraries send line items.
            _ = try await client.post(
                "/v1/checkout/sessions",
                [
                    ("line_items[0][price]", "price_a"), ("line_items[0][quantity]", "1"),
                    ("line_items[1][price]", "price_b"),
                ])
            let checkout = try #require(await fake.requests(matching: .path("/v1/checkout/sessions")).last)
            #expect(checkout.parameters?["line_items"]?[1]?["price"] == .string("price_b"))
        }
    }

    @Test func unknownParameterIsRefusedWithItsName() async throws {
        try await withFake { _, client in
            let answer = try await client.post("/v1/customers", [("email", "a@example.com"), ("foo", "bar")])
            #expect(answer.status == 400)
            #expect(answer.error?["type"] == "invalid_request_error")
            #expect(answer.error?["code"] == "parameter_unknown")
            #expect(answer.error?["param"] == "foo")
            #expect(answer.error?["message"] == "Received unknown parameter: foo")

            let listing = try await client.get("/v1/customers", [("colour", "red")])
            #expect(listing.status == 400)
            #expect(listing.error?["param"] == "colour")
        }
    }

    @Test func wrongTypesAndUnreadableFormsAreRefused() async throws {
        try await withFake { _, client in
            let limit = try await client.get("/v1/customers", [("limit", "ten")])
            #expect(limit.status == 400)
            #expect(limit.error?["param"] == "limit")
            #expect(limit.error?["message"] == "Invalid integer: ten")

            let tooMany = try await client.get("/v1/customers", [("limit", "101")])
            #expect(tooMany.status == 400)
            #expect(tooMany.error?["param"] == "limit")

            let hash = try await client.post("/v1/customers", [("metadata", "x"), ("metadata[a]", "b")])
            #expect(hash.status == 400)
            #expect(hash.error?["param"] == "metadata[a]")

            let notAHash = try await client.post("/v1/customers", [("email[x]", "a@example.com")])
            #expect(notAHash.status == 400)
            #expect(notAHash.error?["param"] == "email")

            let json = try await client.send(
                .POST, "/v1/customers", body: #"{"email":"a@example.com"}"#, contentType: "application/json")
            #expect(json.status == 400)
            #expect(json.error?["type"] == "invalid_request_error")

            let brackets = try await client.send(
                .POST, "/v1/customers", body: "metadata[a=1", contentType: "application/x-www-form-urlencoded")
            #expect(brackets.status == 400)
            #expect(brackets.error?["param"] == "metadata[a")

            let version = try await client.get("/v1/customers", headers: [("Stripe-Version", "latest")])
            #expect(version.status == 400)
        }
    }

    @Test func deletedCustomerAnswersItsStub() async throws {
        try await withFake { _, client in
            let created = try await client.post("/v1/customers", [("email", "gone@example.com")])
            let id = try #require(created.json["id"]?.stringValue)
            let deleted = try await client.delete("/v1/customers/\(id)")
            #expect(deleted.json == ["id": .string(id), "object": "customer", "deleted": true])
            let again = try await client.get("/v1/customers/\(id)")
            #expect(again.status == 200)
            #expect(again.json["deleted"] == true)
            let listed = try await client.get("/v1/customers")
            #expect(listed.dataIDs.isEmpty)
            let missing = try await client.get("/v1/customers/cus_doesnotexist00")
            #expect(missing.status == 404)
            #expect(missing.error?["code"] == "resource_missing")
            #expect(missing.error?["message"] == "No such customer: 'cus_doesnotexist00'")
        }
    }

    @Test func updateAndSearchCustomers() async throws {
        try await withFake { fake, client in
            let created = try await client.post(
                "/v1/customers", [("email", "u1@example.com"), ("metadata[app_user_id]", "u1")])
            let id = try #require(created.json["id"]?.stringValue)
            _ = try await client.post("/v1/customers", [("email", "u2@example.com"), ("metadata[app_user_id]", "u2")])

            let updated = try await client.post(
                "/v1/customers/\(id)", [("name", "Ada"), ("metadata[app_user_id]", "")])
            #expect(updated.json["name"] == "Ada")
            #expect(updated.json["metadata"] == [:])
            let event = try #require(await fake.events().last)
            #expect(event["type"] == "customer.updated")
            #expect(event[path: "data.previous_attributes"] == ["name": nil, "metadata": ["app_user_id": "u1"]])

            let found = try await client.get("/v1/customers/search", [("query", "metadata['app_user_id']:'u2'")])
            #expect(found.json["object"] == "search_result")
            #expect(found.json["data"]?.arrayValue?.count == 1)
            #expect(found.json["data"]?[0]?["email"] == "u2@example.com")

            let byEmail = try await client.get("/v1/customers", [("email", "u1@example.com")])
            #expect(byEmail.dataIDs == [id])
        }
    }

    @Test func expandReplacesIDsWithObjects() async throws {
        try await withFake { fake, client in
            let catalog = try await FakeCatalog.make(in: fake)
            let customer = await fake.createCustomer(email: "e@example.com")
            let created = try await fake.createSubscription(customer: customer, price: catalog.monthly)
            let answer = try await client.get(
                "/v1/subscriptions/\(created.subscription)",
                [("expand[]", "customer"), ("expand[]", "latest_invoice"), ("expand[]", "items.data.price.product")])
            #expect(answer.json[path: "customer.email"] == "e@example.com")
            #expect(answer.json[path: "latest_invoice.id"] == .string(created.invoice))
            #expect(answer.json[path: "items.data"]?[0]?[path: "price.product.name"] == "Pro")

            let list = try await client.get("/v1/subscriptions", [("expand[0]", "data.customer")])
            #expect(list.json["data"]?[0]?[path: "customer.object"] == "customer")

            let refused = try await client.get("/v1/subscriptions/\(created.subscription)", [("expand[]", "status")])
            #expect(refused.status == 400)
        }
    }
}
