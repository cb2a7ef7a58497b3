import StripeFake
import Testing

/// Lists page like Stripe's: newest first, `starting_after` / `ending_before`, `has_more`, filters.
@Suite struct FakeListTests {
    @Test func paginationReachesEveryCustomerExactlyOnce() async throws {
        try await withFake { fake, client in
            await fake.seed(customers: 1_000)
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                var query = [("limit", "100")]
                if let cursor { query.append(("starting_after", cursor)) }
                let page = try await client.get("/v1/customers", query)
                #expect(page.status == 200)
                #expect(page.json["object"] == "list")
                #expect(page.json["url"] == "/v1/customers")
                seen += page.dataIDs
                cursor = page.dataIDs.last
                pages += 1
                if page.json["has_more"] == false { break }
            } while pages < 20
            #expect(pages == 10)
            #expect(seen.count == 1_000)
            #expect(Set(seen).count == 1_000)
            #expect(seen == (await fake.ids(of: .customer)))

            // Newest first: `created` never increases along the list.
            let firstPage = try await client.get("/v1/customers", [("limit", "100")])
            let created = (firstPage.json["data"]?.arrayValue ?? []).compactMap { $0["created"]?.intValue }
            #expect(created == created.sorted(by: >))

            // ending_before walks back: the page before the second page is the first page.
            let second = try await client.get("/v1/customers", [("limit", "100"), ("starting_after", seen[99])])
            let back = try await client.get("/v1/customers", [("limit", "100"), ("ending_before", second.dataIDs[0])])
            #expect(back.dataIDs == Array(seen[0..<100]))
            #expect(back.json["has_more"] == false)
        }
    }

    @Test func unknownCursorIsResourceMissing() async throws {
        try await withFake { _, client in
            let answer = try await client.get("/v1/customers", [("starting_after", "cus_nope")])
            #expect(answer.status == 400)
            #expect(answer.error?["code"] == "resource_missing")
            #expect(answer.error?["param"] == "starting_after")
            let both = try await client.get("/v1/customers", [("starting_after", "a"), ("ending_before", "b")])
            #expect(both.status == 400)
        }
    }

    @Test func createdFiltersBoundTheList() async throws {
        let clock = FakeClock(fixedAt: 1_800_000_000)
        try await withFake(.init(clock: clock)) { fake, client in
            var ids: [String] = []
            for index in 0..<5 {
                ids.append(await fake.createCustomer(email: "c\(index)@example.com"))
                clock.advance(by: 100)
            }
            let gte = try await client.get("/v1/customers", [("created[gte]", "1800000200")])
            #expect(gte.dataIDs == [ids[4], ids[3], ids[2]])
            let range = try await client.get(
                "/v1/customers", [("created[gt]", "1800000000"), ("created[lt]", "1800000300")])
            #expect(range.dataIDs == [ids[2], ids[1]])
            let exact = try await client.get("/v1/customers", [("created", "1800000100")])
            #expect(exact.dataIDs == [ids[1]])
            let bad = try await client.get("/v1/customers", [("created[after]", "1")])
            #expect(bad.status == 400)
            #expect(bad.error?["param"] == "created[after]")
        }
    }

    @Test func subscriptionsListHidesCanceledUnlessAskedForAll() async throws {
        try await withFake { fake, client in
            let catalog = try await FakeCatalog.make(in: fake)
            let customer = await fake.createCustomer(email: "s@example.com")
            let active = try await fake.createSubscription(customer: customer, price: catalog.monthly).subscription
            let trialing = try await fake.createSubscription(customer: customer, price: catalog.yearly, trialDays: 14)
                .subscription
            let canceled = try await client.post(
                "/v1/subscriptions",
                [("customer", customer), ("items[0][price]", catalog.monthly), ("items[0][quantity]", "2")])
            let canceledID = try #require(canceled.json["id"]?.stringValue)
            let deleted = try await client.delete("/v1/subscriptions/\(canceledID)")
            #expect(deleted.json["status"] == "canceled")
            #expect(deleted.json["canceled_at"]?.intValue != nil)
            #expect(deleted.json["ended_at"]?.intValue != nil)

            let byDefault = try await client.get("/v1/subscriptions")
            #expect(Set(byDefault.dataIDs) == [active, trialing])
            let all = try await client.get("/v1/subscriptions", [("status", "all")])
            #expect(Set(all.dataIDs) == [active, trialing, canceledID])
            let onlyCanceled = try await client.get("/v1/subscriptions", [("status", "canceled")])
            #expect(onlyCanceled.dataIDs == [canceledID])
            let onlyTrialing = try await client.get("/v1/subscriptions", [("status", "trialing")])
            #expect(onlyTrialing.dataIDs == [trialing])
            let byPrice = try await client.get("/v1/subscriptions", [("price", catalog.yearly)])
            #expect(byPrice.dataIDs == [trialing])
            let badStatus = try await client.get("/v1/subscriptions", [("status", "sleeping")])
            #expect(badStatus.status == 400)
            #expect(badStatus.error?["param"] == "status")
        }
    }

    @Test func subscriptionShapesAndUpdates() async throws {
        try await withFake { fake, client in
            let catalog = try await FakeCatalog.make(in: fake)
            let customer = await fake.createCustomer(email: "s@example.com")
            let created = try await client.post(
                "/v1/subscriptions",
                [("customer", customer), ("items[0][price]", catalog.monthly), ("metadata[app_user_id]", "u1")])
            let subscription = created.json
            let id = try #require(subscription["id"]?.stringValue)
            #expect(subscription["status"] == "active")
            let item = try #require(subscription[path: "items.data"]?[0])
            #expect(item[path: "price.id"] == .string(catalog.monthly))
            let start = try #require(item["current_period_start"]?.intValue)
            let end = try #require(item["current_period_end"]?.intValue)
            #expect(end - start >= 28 * 86_400)
            let invoiceID = try #require(subscription["latest_invoice"]?.stringValue)

            let invoice = try await client.get("/v1/invoices/\(invoiceID)")
            #expect(invoice.json["status"] == "paid")
            #expect(invoice.json["amount_paid"] == 2000)
            #expect(invoice.json[path: "parent.subscription_details.subscription"] == .string(id))
            #expect(invoice.json["billing_reason"] == "subscription_create")
            let invoices = try await client.get("/v1/invoices", [("subscription", id)])
            #expect(invoices.dataIDs == [invoiceID])

            let canceling = try await client.post("/v1/subscriptions/\(id)", [("cancel_at_period_end", "true")])
            #expect(canceling.json["cancel_at_period_end"] == true)
            #expect(canceling.json["cancel_at"] == .int(end))
            let upgraded = try await client.post(
                "/v1/subscriptions/\(id)",
                [("items[0][id]", item["id"]?.stringValue ?? ""), ("items[0][price]", catalog.yearly)])
            #expect(upgraded.json[path: "items.data"]?[0]?[path: "price.id"] == .string(catalog.yearly))
            let wrongType = try await client.post("/v1/subscriptions/\(id)", [("cancel_at_period_end", "maybe")])
            #expect(wrongType.status == 400)
            #expect(wrongType.error?["param"] == "cancel_at_period_end")

            #expect(
                await fake.eventTypes() == [
                    "product.created", "price.created", "price.created", "customer.created",
                    "customer.subscription.created", "invoice.created", "invoice.finalized", "invoice.paid",
                    "invoice.payment_succeeded", "customer.subscription.updated", "customer.subscription.updated",
                ])
            let update = try #require(await fake.events().dropLast().last)
            #expect(update[path: "data.previous_attributes"]?["cancel_at_period_end"] == false)
        }
    }

    @Test func pricesAndProductsFilter() async throws {
        try await withFake { fake, client in
            let catalog = try await FakeCatalog.make(in: fake)
            let byKey = try await client.get("/v1/prices", [("lookup_keys[]", "pro_yearly")])
            #expect(byKey.dataIDs == [catalog.yearly])
            try await fake.update(.price, catalog.monthly) { $0["active"] = false }
            let active = try await client.get("/v1/prices", [("active", "true")])
            #expect(active.dataIDs == [catalog.yearly])
            let products = try await client.get("/v1/products")
            #expect(products.dataIDs == [catalog.product])
            let product = try await client.get("/v1/products/\(catalog.product)")
            #expect(product.json["name"] == "Pro")
            #expect(await fake.eventTypes().last == "price.updated")
        }
    }
}
