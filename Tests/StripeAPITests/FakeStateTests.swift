import StripeFake
import Testing

/// Accounts are separate; seeding is fast and consistent; state can drift without events.
@Suite struct FakeStateTests {
    @Test func connectedAccountsNeverSeeEachOther() async throws {
        try await withFake { fake, client in
            var connected = client
            connected.account = "acct_1Connected"
            let platform = try await client.post("/v1/customers", [("email", "platform@example.com")])
            let other = try await connected.post("/v1/customers", [("email", "connected@example.com")])
            #expect(try await client.get("/v1/customers").dataIDs == [platform.json["id"]?.stringValue ?? ""])
            #expect(try await connected.get("/v1/customers").dataIDs == [other.json["id"]?.stringValue ?? ""])
            #expect(try await client.get("/v1/customers/\(other.json["id"]?.stringValue ?? "")").status == 404)
            let events = try await connected.get("/v1/events")
            #expect(events.json["data"]?[0]?["account"] == "acct_1Connected")
            #expect(events.json["data"]?[0]?["livemode"] == false)
            #expect(await fake.count(of: .customer, account: "acct_1Connected") == 1)
            #expect(await fake.requests.last?.account == "acct_1Connected")

            var invalid = client
            invalid.account = "not-an-account"
            #expect(try await invalid.get("/v1/customers").status == 403)
        }
    }

    /// Consistent, not timed: how fast seeding is belongs in a benchmark, not an assertion.
    @Test func seedingTenThousandObjectsIsConsistent() async throws {
        try await withFake { fake, client in
            let summary = await fake.seed(
                customers: 2_000, subscriptions: 3_000, invoices: 5_000, prices: 4, products: 2, seed: 7)
            #expect(summary.customers == 2_000)
            #expect(summary.subscriptions == 3_000)
            #expect(summary.invoices == 5_000)
            #expect(summary.events == 0)
            #expect(await fake.events().isEmpty)

            // Every invoice belongs to a seeded subscription of the same customer.
            let page = try await client.get("/v1/invoices", [("limit", "100")])
            for invoice in page.json["data"]?.arrayValue ?? [] {
                let subscriptionID = try #require(
                    invoice[path: "parent.subscription_details.subscription"]?.stringValue)
                let subscription = try #require(await fake.object(.subscription, subscriptionID))
                #expect(subscription["customer"] == invoice["customer"])
            }
            let all = try await client.get("/v1/subscriptions", [("status", "all"), ("limit", "100")])
            let statuses = Set((all.json["data"]?.arrayValue ?? []).compactMap { $0["status"]?.stringValue })
            #expect(statuses.isSuperset(of: ["active", "canceled"]))

            // The same seed gives the same data.
            let again = try await StripeFake.start()
            await again.seed(customers: 2_000, subscriptions: 3_000, invoices: 5_000, prices: 4, products: 2, seed: 7)
            let emails = { (fake: StripeFake) async -> [String] in
                var emails: [String] = []
                for id in await fake.ids(of: .customer).prefix(20) {
                    emails.append(await fake.object(.customer, id)?["email"]?.stringValue ?? "")
                }
                return emails
            }
            #expect(await emails(fake) == (await emails(again)))
            await again.stop()
        }
    }

    @Test func driftWithoutEventsAndChangesWithEvents() async throws {
        try await withFake { fake, client in
            let catalog = try await FakeCatalog.make(in: fake)
            let customer = await fake.createCustomer(email: "d@example.com")
            let subscription = try await fake.createSubscription(customer: customer, price: catalog.monthly)
                .subscription
            let eventsBefore = await fake.events().count

            try await fake.mutate(.subscription, subscription) { $0["status"] = "past_due" }
            #expect(try await client.get("/v1/subscriptions/\(subscription)").json["status"] == "past_due")
            #expect(await fake.events().count == eventsBefore)

            #expect(await fake.remove(.customer, customer))
            #expect(try await client.get("/v1/customers/\(customer)").status == 404)
            #expect(await fake.events().count == eventsBefore)

            try await fake.update(.subscription, subscription) { $0["status"] = "unpaid" }
            let event = try #require(await fake.events().last)
            #expect(event["type"] == "customer.subscription.updated")
            #expect(event[path: "data.previous_attributes.status"] == "past_due")

            let renewed = try await fake.createSubscription(
                customer: await fake.createCustomer(email: "r@example.com"), price: catalog.monthly)
            try await fake.renewSubscription(renewed.subscription, paymentSucceeds: false)
            #expect(await fake.object(.subscription, renewed.subscription)?["status"] == "past_due")
            #expect(
                await fake.eventTypes().suffix(4) == [
                    "invoice.created", "invoice.finalized", "invoice.payment_failed", "customer.subscription.updated",
                ])
        }
    }

    @Test func paymentMethodsAttachAndDetach() async throws {
        try await withFake { fake, client in
            let customer = await fake.createCustomer(email: "pm@example.com")
            let method = try await fake.attachPaymentMethod(customer: customer, makeDefault: true)
            let listed = try await client.get("/v1/customers/\(customer)/payment_methods", [("type", "card")])
            #expect(listed.dataIDs == [method])
            #expect(listed.json["url"] == .string("/v1/customers/\(customer)/payment_methods"))
            let detached = try await client.post("/v1/payment_methods/\(method)/detach")
            #expect(detached.json["customer"] == .null)
            #expect(
                try await client.get("/v1/customers/\(customer)").json[path: "invoice_settings.default_payment_method"]
                    == .null)
            #expect(
                await fake.eventTypes().suffix(3) == [
                    "customer.updated", "payment_method.detached", "customer.updated",
                ])
            let again = try await client.post("/v1/payment_methods/\(method)/detach")
            #expect(again.status == 400)
        }
    }
}
