import BillingCore
import BillingSamples
import Foundation
import Testing

// Values of the coherent story the fixtures tell (scripts/gen-fixtures).
private let customerID = "cus_TqW7mZ2xLp9Kna"
private let subscriptionID = "sub_1Sx4kLHd3QfR8sTaV9pWm2cE"
private let itemID = "si_TqW8bN3vYc6Rdh"
private let invoiceID = "in_1Sx4kMHd3QfR8sTa0r7GJ2uQ"
private let paymentMethodID = "pm_1Sx4jZHd3QfR8sTa4kT9sBnP"
private let priceID = "price_1SmQ2aHd3QfR8sTaYq7Vh3Lc"
private let yearlyPriceID = "price_1SmQ2bHd3QfR8sTaR5zW8nJd"
private let productID = "prod_TjU5xN8wKq3Rme"
private let periodStart: Int64 = 1_769_940_000  // 2026-02-01 10:00:00 UTC
private let periodEnd: Int64 = 1_772_359_200  // 2026-03-01 10:00:00 UTC
private let nextPeriodEnd: Int64 = 1_775_037_600  // 2026-04-01 10:00:00 UTC

@Suite("Stripe object decoding")
struct ObjectDecodingTests {
    // MARK: Every fixture

    static var modelOfFixture: [(String, any Decodable.Type)] {
        [
            ("customer", Customer.self), ("customer_deleted", Customer.self), ("subscription", Subscription.self),
            ("subscription_2023-08-16", Subscription.self), ("subscription_unknown_status", Subscription.self),
            ("invoice", Invoice.self), ("invoice_2023-08-16", Invoice.self), ("invoice_upcoming", Invoice.self),
            ("payment_method", PaymentMethod.self), ("price", Price.self), ("price_yearly", Price.self),
            ("product", Product.self), ("checkout_session", CheckoutSession.self),
            ("active_entitlement_summary", ActiveEntitlementSummary.self), ("invoice_payment", InvoicePayment.self),
            ("charge_refunded_2023-08-16", Charge.self),
        ]
    }

    @Test("Every object fixture has a model and decodes into it")
    func everyFixtureDecodes() throws {
        let files = try FileManager.default.contentsOfDirectory(
            at: Fixtures.root.appendingPathComponent("Fixtures/objects"), includingPropertiesForKeys: nil)
        let names = Set(files.filter { $0.pathExtension == "json" }.map { $0.deletingPathExtension().lastPathComponent })
        #expect(names == Set(Self.modelOfFixture.map(\.0)))
        for (name, model) in Self.modelOfFixture {
            #expect(throws: Never.self, "\(name)") { _ = try JSONDecoder().decode(model, from: Fixtures.object(name)) }
        }
    }

    @Test("The samples of modelled resources are the fixtures, value for value")
    func samplesMatchFixtures() throws {
        func sample<T: Decodable>(_ type: T.Type, _ resource: String) throws -> T {
            try JSONDecoder().decode(type, from: Data(try #require(SampleObjects.json[resource]).utf8))
        }
        #expect(try sample(Customer.self, "customer") == Fixtures.decode(Customer.self, "customer"))
        #expect(try sample(Customer.self, "deleted_customer") == Fixtures.decode(Customer.self, "customer_deleted"))
        #expect(try sample(Subscription.self, "subscription") == Fixtures.decode(Subscription.self, "subscription"))
        #expect(try sample(Invoice.self, "invoice") == Fixtures.decode(Invoice.self, "invoice"))
        #expect(try sample(Price.self, "price") == Fixtures.decode(Price.self, "price"))
        #expect(try sample(Product.self, "product") == Fixtures.decode(Product.self, "product"))
        #expect(try sample(PaymentMethod.self, "payment_method") == Fixtures.decode(PaymentMethod.self, "payment_method"))
        #expect(
            try sample(CheckoutSession.self, "checkout.session")
                == Fixtures.decode(CheckoutSession.self, "checkout_session"))
        #expect(
            try sample(ActiveEntitlementSummary.self, "entitlements.active_entitlement_summary")
                == Fixtures.decode(ActiveEntitlementSummary.self, "active_entitlement_summary"))
        #expect(try sample(InvoicePayment.self, "invoice_payment") == Fixtures.decode(InvoicePayment.self, "invoice_payment"))
        let item = try sample(SubscriptionItem.self, "subscription_item")
        #expect(try item == Fixtures.decode(Subscription.self, "subscription").items.first)
        let line = try sample(InvoiceLine.self, "line_item")
        #expect(try line == Fixtures.decode(Invoice.self, "invoice").lines.first)
    }

    @Test("Every sample object is a JSON object naming its type")
    func everySampleIsJSON() throws {
        #expect(SampleObjects.json.count == 176)
        for (resource, json) in SampleObjects.json {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(resource)")
            let type = object["object"] as? String
            #expect(type != nil, "\(resource) has no object member")
        }
    }

    // MARK: Customer

    @Test("Customer: the fields billingd keeps")
    func customer() throws {
        let customer = try Fixtures.decode(Customer.self, "customer")
        #expect(customer.id == customerID)
        #expect(customer.email == "ada@example.com")
        #expect(customer.name == "Ada Lovelace")
        #expect(customer.created == 1_769_939_695)
        #expect(customer.deleted == false)
        #expect(customer.livemode == false)
        #expect(customer.currency == "usd")
        #expect(customer.delinquent == false)
        #expect(customer.defaultPaymentMethod?.id == paymentMethodID)
        #expect(customer.defaultSource == nil)
        #expect(customer.metadata == ["app_user_id": "user_42"])
        #expect(customer.appUserID == "user_42")
    }

    @Test("A deleted customer is the bare stub")
    func deletedCustomer() throws {
        let customer = try Fixtures.decode(Customer.self, "customer_deleted")
        #expect(customer.id == customerID)
        #expect(customer.deleted)
        #expect(customer.email == nil)
        #expect(customer.metadata.isEmpty)
        #expect(customer.appUserID == nil)
    }

    @Test("Metadata keeps string values and skips null and non-string ones")
    func lenientMetadata() throws {
        let json = #"{"id":"cus_1","metadata":{"app_user_id":"u1","n":5,"flag":true,"gone":null,"nested":{"a":"b"},"empty":""}}"#
        let customer = try JSONDecoder().decode(Customer.self, from: Data(json.utf8))
        #expect(customer.metadata == ["app_user_id": "u1", "empty": ""])
        #expect(customer.appUserID == "u1")

        let nullMetadata = try JSONDecoder().decode(Customer.self, from: Data(#"{"id":"cus_2","metadata":null}"#.utf8))
        #expect(nullMetadata.metadata == [:])
        let oddMetadata = try JSONDecoder().decode(Customer.self, from: Data(#"{"id":"cus_3","metadata":[1]}"#.utf8))
        #expect(oddMetadata.metadata == [:])
    }

    @Test("An expanded default payment method decodes to its id")
    func expandedDefaultPaymentMethod() throws {
        var object = try Fixtures.jsonObject("customer")
        object["invoice_settings"] = ["default_payment_method": try Fixtures.jsonObject("payment_method")]
        let customer = try JSONDecoder().decode(Customer.self, from: Fixtures.json(object))
        #expect(customer.defaultPaymentMethod == Expandable(id: paymentMethodID))
    }

    // MARK: Subscription

    @Test("Subscription (new shape): periods resolved from the items")
    func subscription() throws {
        let subscription = try Fixtures.decode(Subscription.self, "subscription")
        #expect(subscription.id == subscriptionID)
        #expect(subscription.customer.id == customerID)
        #expect(subscription.status == .active)
        #expect(subscription.created == periodStart)
        #expect(subscription.startDate == periodStart)
        #expect(subscription.livemode == false)
        #expect(subscription.currency == "usd")
        #expect(subscription.cancelAtPeriodEnd == false)
        #expect(subscription.cancelAt == nil)
        #expect(subscription.canceledAt == nil)
        #expect(subscription.endedAt == nil)
        #expect(subscription.trialStart == nil)
        #expect(subscription.trialEnd == nil)
        #expect(subscription.collectionMethod == "charge_automatically")
        #expect(subscription.defaultPaymentMethod?.id == paymentMethodID)
        #expect(subscription.latestInvoice?.id == invoiceID)
        #expect(subscription.metadata == ["app_user_id": "user_42"])
        #expect(subscription.cancellationReason == nil)
        #expect(subscription.pauseBehavior == nil)
        #expect(subscription.currentPeriodStart == periodStart)
        #expect(subscription.currentPeriodEnd == periodEnd)
        #expect(subscription.itemsHasMore == false)

        let item = try #require(subscription.items.first)
        #expect(subscription.items.count == 1)
        #expect(item.id == itemID)
        #expect(item.quantity == 1)
        #expect(item.currentPeriodStart == periodStart)
        #expect(item.currentPeriodEnd == periodEnd)
        #expect(item.created == periodStart)
        #expect(item.price?.id == priceID)
        #expect(item.price?.unitAmount == 2000)
        #expect(item.price?.recurring?.interval == .month)
        #expect(item.price?.product?.id == productID)
    }

    @Test("Subscription (2023-08-16 shape): periods on the subscription, none on items")
    func oldSubscription() throws {
        let old = try Fixtures.decode(Subscription.self, "subscription_2023-08-16")
        let new = try Fixtures.decode(Subscription.self, "subscription")
        #expect(old.items.first?.currentPeriodEnd == nil)
        #expect(old.items.first?.currentPeriodStart == nil)
        #expect(old.currentPeriodStart == periodStart)
        #expect(old.currentPeriodEnd == periodEnd)
        #expect(old.currentPeriodEnd == new.currentPeriodEnd)
        #expect(old.currentPeriodStart == new.currentPeriodStart)
        #expect(old.id == new.id)
        #expect(old.customer == new.customer)
        #expect(old.status == new.status)
        #expect(old.items.first?.price == new.items.first?.price)
    }

    @Test("Subscription periods across items: earliest start, latest end; top-level wins when present")
    func periodsAcrossItems() throws {
        var object = try Fixtures.jsonObject("subscription")
        var items = try #require(object["items"] as? [String: Any])
        var data = try #require(items["data"] as? [[String: Any]])
        var second = data[0]
        second["id"] = "si_second"
        second["current_period_start"] = periodStart - 100
        second["current_period_end"] = nextPeriodEnd
        data.append(second)
        items["data"] = data
        items["has_more"] = true
        object["items"] = items
        let subscription = try JSONDecoder().decode(Subscription.self, from: Fixtures.json(object))
        #expect(subscription.items.map(\.id) == [itemID, "si_second"])
        #expect(subscription.itemsHasMore)
        #expect(subscription.currentPeriodStart == periodStart - 100)
        #expect(subscription.currentPeriodEnd == nextPeriodEnd)

        object["current_period_start"] = 10
        object["current_period_end"] = 20
        let topLevel = try JSONDecoder().decode(Subscription.self, from: Fixtures.json(object))
        #expect(topLevel.currentPeriodStart == 10)
        #expect(topLevel.currentPeriodEnd == 20)

        object["items"] = ["object": "list", "data": [] as [Any], "has_more": false]
        object.removeValue(forKey: "current_period_start")
        object.removeValue(forKey: "current_period_end")
        let noItems = try JSONDecoder().decode(Subscription.self, from: Fixtures.json(object))
        #expect(noItems.items.isEmpty)
        #expect(noItems.currentPeriodStart == nil)
        #expect(noItems.currentPeriodEnd == nil)
    }

    @Test("Unknown status, interval and fields are kept or ignored, never fatal")
    func unknownValues() throws {
        let subscription = try Fixtures.decode(Subscription.self, "subscription_unknown_status")
        #expect(subscription.status.rawValue == "some_future_status")
        #expect(subscription.status == SubscriptionStatus(rawValue: "some_future_status"))
        let known: [SubscriptionStatus] = [.incomplete, .incompleteExpired, .trialing, .active, .pastDue, .canceled, .unpaid, .paused]
        #expect(!known.contains(subscription.status))
        #expect(subscription.collectionMethod == "charge_telepathically")
        #expect(subscription.items.first?.price?.recurring?.interval.rawValue == "fortnight")
        #expect(subscription.currentPeriodEnd == periodEnd)
    }

    @Test("Known status values have Stripe's spelling")
    func statusSpellings() {
        #expect(SubscriptionStatus.incompleteExpired.rawValue == "incomplete_expired")
        #expect(SubscriptionStatus.pastDue.rawValue == "past_due")
        #expect(InvoiceStatus.uncollectible.rawValue == "uncollectible")
        #expect(CheckoutSessionStatus.complete.rawValue == "complete")
        #expect(RecurringInterval.year.rawValue == "year")
    }

    @Test("An expanded customer object decodes to its id")
    func expandedCustomer() throws {
        var object = try Fixtures.jsonObject("subscription")
        object["customer"] = try Fixtures.jsonObject("customer")
        let subscription = try JSONDecoder().decode(Subscription.self, from: Fixtures.json(object))
        #expect(subscription.customer == Expandable(id: customerID))

        var invoice = try Fixtures.jsonObject("invoice")
        invoice["customer"] = try Fixtures.jsonObject("customer")
        #expect(try JSONDecoder().decode(Invoice.self, from: Fixtures.json(invoice)).customer?.id == customerID)
    }

    @Test("A customer that is neither an id nor an object with an id is an error")
    func badExpandable() throws {
        var object = try Fixtures.jsonObject("subscription")
        object["customer"] = 42
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Subscription.self, from: Fixtures.json(object))
        }
        object["customer"] = ["object": "customer"]
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Subscription.self, from: Fixtures.json(object))
        }
    }

    @Test("Cancellation and pause details come from their nested objects")
    func cancellationAndPause() throws {
        var object = try Fixtures.jsonObject("subscription")
        object["status"] = "canceled"
        object["cancel_at_period_end"] = true
        object["canceled_at"] = periodStart + 5
        object["ended_at"] = periodEnd
        object["cancellation_details"] = ["reason": "payment_failed", "comment": NSNull(), "feedback": NSNull()]
        object["pause_collection"] = ["behavior": "void", "resumes_at": NSNull()]
        let subscription = try JSONDecoder().decode(Subscription.self, from: Fixtures.json(object))
        #expect(subscription.status == .canceled)
        #expect(subscription.cancelAtPeriodEnd)
        #expect(subscription.canceledAt == periodStart + 5)
        #expect(subscription.endedAt == periodEnd)
        #expect(subscription.cancellationReason == "payment_failed")
        #expect(subscription.pauseBehavior == "void")
    }

    // MARK: Invoice

    @Test("Invoice (new shape): amounts, tax, discount and subscription resolved")
    func invoice() throws {
        let invoice = try Fixtures.decode(Invoice.self, "invoice")
        #expect(invoice.id == invoiceID)
        #expect(invoice.number == "TQW7MZ2X-0001")
        #expect(invoice.customer?.id == customerID)
        #expect(invoice.customerEmail == "ada@example.com")
        #expect(invoice.customerName == "Ada Lovelace")
        #expect(invoice.status == .paid)
        #expect(invoice.currency == "usd")
        #expect(invoice.subtotal == 2000)
        #expect(invoice.discountAmount == 200)
        #expect(invoice.taxAmount == 144)
        #expect(invoice.total == 1944)
        #expect(invoice.subtotal - invoice.discountAmount + invoice.taxAmount == invoice.total)
        #expect(invoice.amountDue == 1944)
        #expect(invoice.amountPaid == 1944)
        #expect(invoice.amountRemaining == 0)
        #expect(invoice.created == periodStart)
        #expect(invoice.periodStart == periodStart)
        #expect(invoice.periodEnd == periodStart)
        #expect(invoice.dueDate == nil)
        #expect(invoice.billingReason == "subscription_create")
        #expect(invoice.collectionMethod == "charge_automatically")
        #expect(invoice.hostedInvoiceURL?.hasPrefix("https://invoice.stripe.com/i/") == true)
        #expect(invoice.invoicePDF?.hasPrefix("https://pay.stripe.com/invoice/") == true)
        #expect(invoice.livemode == false)
        #expect(invoice.attemptCount == 1)
        #expect(invoice.statusTransitions == .init(finalizedAt: periodStart + 1, paidAt: periodStart + 3))
        #expect(invoice.subscription?.id == subscriptionID)
        #expect(invoice.metadata.isEmpty)
        #expect(invoice.linesHasMore == false)
        #expect(invoice.deleted == false)

        let line = try #require(invoice.lines.first)
        #expect(invoice.lines.count == 1)
        #expect(line.id == "il_1Sx4kMHd3QfR8sTaLx5nE8wB")
        #expect(line.amount == 2000)
        #expect(line.currency == "usd")
        #expect(line.description == "1 × Pro (at $20.00 / month)")
        #expect(line.quantity == 1)
        #expect(line.periodStart == periodStart)
        #expect(line.periodEnd == periodEnd)
        #expect(line.priceID == priceID)
        #expect(line.subscription == subscriptionID)
        #expect(line.proration == false)
    }

    @Test("Invoice (2023-08-16 shape) resolves to the same values as the new shape")
    func oldInvoice() throws {
        let old = try Fixtures.decode(Invoice.self, "invoice_2023-08-16")
        let new = try Fixtures.decode(Invoice.self, "invoice")
        #expect(old.subscription?.id == subscriptionID)
        #expect(old.taxAmount == 144)
        #expect(old.discountAmount == 200)
        // Only the old shape names what paid the invoice; the new one names it on its payments.
        #expect(old.charge?.id == "ch_3Sx4kNHd3QfR8sTa1q0Zx9Ww" && old.paymentIntent?.id == "pi_3Sx4kNHd3QfR8sTa1aB2cD3e")
        #expect(new.charge == nil && new.paymentIntent == nil)
        var oldWithoutPayment = old
        (oldWithoutPayment.charge, oldWithoutPayment.paymentIntent) = (nil, nil)
        #expect(oldWithoutPayment == new)
        #expect(old.lines.first?.priceID == priceID)
        #expect(old.lines.first?.subscription == subscriptionID)
    }

    @Test("A refund (Stripe's published example) and an invoice payment name what they refund and what paid")
    func refundAndPayment() throws {
        let json = #"""
            {"amount": 100, "balance_transaction": null, "charge": "ch_1PgafuB7WZ01zgkWXYmPNZs8", "created": 1234567890,
             "currency": "usd", "destination_details": {"card": {"type": "reversal"}, "type": "card"},
             "id": "re_1Pgc72B7WZ01zgkWqPvrRrPE", "metadata": {}, "object": "refund", "payment_intent": null, "reason": null,
             "receipt_number": null, "source_transfer_reversal": null, "status": "succeeded", "transfer_reversal": null}
            """#
        let refund = try JSONDecoder().decode(Refund.self, from: Data(json.utf8))
        #expect(refund == Refund(
            id: "re_1Pgc72B7WZ01zgkWqPvrRrPE", amount: 100, currency: "usd", charge: "ch_1PgafuB7WZ01zgkWXYmPNZs8", status: Refund.succeeded,
            created: 1_234_567_890))
        #expect(refund.statusRank == 1)
        let payment = try Fixtures.decode(InvoicePayment.self, "invoice_payment")
        #expect(payment.paymentIntent?.id == "pi_3Sx4kNHd3QfR8sTa1aB2cD3e" && payment.charge == nil)
    }

    @Test("Old invoice tax: `tax` first, else the sum of total_tax_amounts; new total_taxes wins over both")
    func taxResolution() throws {
        var object = try Fixtures.jsonObject("invoice_2023-08-16")
        object["tax"] = NSNull()
        object["total_tax_amounts"] = [["amount": 100, "inclusive": false], ["amount": 44, "inclusive": false]]
        #expect(try JSONDecoder().decode(Invoice.self, from: Fixtures.json(object)).taxAmount == 144)

        object["tax"] = 150
        #expect(try JSONDecoder().decode(Invoice.self, from: Fixtures.json(object)).taxAmount == 150)

        object["total_taxes"] = [["amount": 7], ["amount": 8]]
        #expect(try JSONDecoder().decode(Invoice.self, from: Fixtures.json(object)).taxAmount == 15)

        for key in ["tax", "total_tax_amounts", "total_taxes", "total_discount_amounts"] {
            object.removeValue(forKey: key)
        }
        let untaxed = try JSONDecoder().decode(Invoice.self, from: Fixtures.json(object))
        #expect(untaxed.taxAmount == 0)
        #expect(untaxed.discountAmount == 0)
    }

    @Test("The upcoming invoice has no id and bills the next period")
    func upcomingInvoice() throws {
        let upcoming = try Fixtures.decode(Invoice.self, "invoice_upcoming")
        #expect(upcoming.id == nil)
        #expect(upcoming.status == .draft)
        #expect(upcoming.billingReason == "upcoming")
        #expect(upcoming.number == nil)
        #expect(upcoming.amountDue == 1944)
        #expect(upcoming.amountPaid == 0)
        #expect(upcoming.amountRemaining == 1944)
        #expect(upcoming.subscription?.id == subscriptionID)
        #expect(upcoming.statusTransitions == .init())
        #expect(upcoming.lines.first?.periodStart == periodEnd)
        #expect(upcoming.lines.first?.periodEnd == nextPeriodEnd)
    }

    @Test("Invoice lines: new parent details resolve subscription and proration by parent.type")
    func lineParentDetails() throws {
        let json = #"""
            {"id":"il_1","amount":-500,"currency":"usd","period":{"start":1,"end":2},"subscription":null,
             "pricing":{"type":"price_details","price_details":{"price":{"id":"price_x","object":"price"},"product":"prod_x"}},
             "parent":{"type":"invoice_item_details","subscription_item_details":null,
                       "invoice_item_details":{"invoice_item":"ii_1","proration":true,"subscription":"sub_x"}}}
            """#
        let line = try JSONDecoder().decode(InvoiceLine.self, from: Data(json.utf8))
        #expect(line.amount == -500)
        #expect(line.priceID == "price_x")
        #expect(line.subscription == "sub_x")
        #expect(line.proration)
        #expect(line.periodStart == 1)
        #expect(line.periodEnd == 2)

        let bare = try JSONDecoder().decode(InvoiceLine.self, from: Data(#"{"id":"il_2","amount":5,"currency":"eur"}"#.utf8))
        #expect(bare == InvoiceLine(id: "il_2", amount: 5, currency: "eur"))
    }

    @Test("A deleted invoice stub decodes; a live invoice without currency does not")
    func deletedInvoice() throws {
        let stub = try JSONDecoder().decode(
            Invoice.self, from: Data(#"{"id":"in_1","object":"invoice","deleted":true}"#.utf8))
        #expect(stub.deleted)
        #expect(stub.id == "in_1")
        #expect(stub.total == 0)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Invoice.self, from: Data(#"{"id":"in_2","object":"invoice","total":5}"#.utf8))
        }
    }

    @Test("Amounts are exact 64-bit integers; a fractional amount is refused")
    func exactAmounts() throws {
        var object = try Fixtures.jsonObject("invoice")
        object["total"] = 9_007_199_254_740_993 as Int64  // 2^53 + 1: lost by any Double round trip
        #expect(try JSONDecoder().decode(Invoice.self, from: Fixtures.json(object)).total == 9_007_199_254_740_993)
        let fractional = Data(#"{"id":"in_3","currency":"usd","total":10.5}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Invoice.self, from: fractional) }
    }

    // MARK: Payment method, prices, product

    @Test("Payment method: card brand, last 4, expiry, fingerprint; nothing else of the card")
    func paymentMethod() throws {
        let method = try Fixtures.decode(PaymentMethod.self, "payment_method")
        #expect(method.id == paymentMethodID)
        #expect(method.type == "card")
        #expect(method.customer?.id == customerID)
        #expect(method.created == 1_769_939_990)
        #expect(method.livemode == false)
        #expect(method.metadata.isEmpty)
        let card = try #require(method.card)
        #expect(card == Card(brand: "visa", last4: "4242", expMonth: 12, expYear: 2030,
                             fingerprint: "Hd3QfR8sTa7kX2pQ", funding: "credit", country: "US"))
        let kept = Mirror(reflecting: card).children.compactMap(\.label)
        #expect(kept == ["brand", "last4", "expMonth", "expYear", "fingerprint", "funding", "country"])
        let methodFields = Mirror(reflecting: method).children.compactMap(\.label)
        #expect(!methodFields.contains { $0.lowercased().contains("email") || $0.lowercased().contains("billing") })
    }

    @Test("A detached payment method has no customer")
    func detachedPaymentMethod() throws {
        var object = try Fixtures.jsonObject("payment_method")
        object["customer"] = NSNull()
        #expect(try JSONDecoder().decode(PaymentMethod.self, from: Fixtures.json(object)).customer == nil)
    }

    @Test("Prices: monthly and yearly")
    func prices() throws {
        let monthly = try Fixtures.decode(Price.self, "price")
        #expect(monthly.id == priceID)
        #expect(monthly.product?.id == productID)
        #expect(monthly.active == true)
        #expect(monthly.currency == "usd")
        #expect(monthly.unitAmount == 2000)
        #expect(monthly.lookupKey == "pro_monthly")
        #expect(monthly.nickname == "Pro monthly")
        #expect(monthly.type == "recurring")
        #expect(monthly.recurring == Recurring(interval: .month, intervalCount: 1, usageType: "licensed"))
        #expect(monthly.created == 1_767_603_720)
        #expect(monthly.livemode == false)
        #expect(monthly.metadata == ["tier": "pro"])
        #expect(monthly.deleted == false)

        let yearly = try Fixtures.decode(Price.self, "price_yearly")
        #expect(yearly.id == yearlyPriceID)
        #expect(yearly.unitAmount == 20000)
        #expect(yearly.lookupKey == "pro_yearly")
        #expect(yearly.recurring?.interval == .year)
        #expect(yearly.recurring?.intervalCount == 1)
    }

    @Test("Product")
    func product() throws {
        let product = try Fixtures.decode(Product.self, "product")
        #expect(product.id == productID)
        #expect(product.name == "Pro")
        #expect(product.active == true)
        #expect(product.description == "Unlimited projects, 100 GB storage, 5 seats.")
        #expect(product.defaultPrice?.id == priceID)
        #expect(product.created == 1_767_603_600)
        #expect(product.updated == 1_767_603_900)
        #expect(product.metadata == ["tier": "pro"])
        #expect(product.deleted == false)

        let deleted = try JSONDecoder().decode(
            Product.self, from: Data(try #require(SampleObjects.json["deleted_product"]).utf8))
        #expect(deleted == Product(id: productID, deleted: true))
    }

    // MARK: Checkout, entitlements, invoice payments

    @Test("Checkout session: completed subscription checkout for user_42")
    func checkoutSession() throws {
        let session = try Fixtures.decode(CheckoutSession.self, "checkout_session")
        #expect(session.id.hasPrefix("cs_test_"))
        #expect(session.mode == "subscription")
        #expect(session.status == .complete)
        #expect(session.paymentStatus == "paid")
        #expect(session.clientReferenceID == "user_42")
        #expect(session.customer?.id == customerID)
        #expect(session.subscription?.id == subscriptionID)
        #expect(session.invoice?.id == invoiceID)
        #expect(session.amountSubtotal == 2000)
        #expect(session.amountTotal == 1944)
        #expect(session.currency == "usd")
        let created: Int64 = 1_769_939_700
        #expect(session.created == created)
        #expect(session.expiresAt == created + 86_400)
        #expect(session.url == nil)
        #expect(session.customerEmail == "ada@example.com")
        #expect(session.metadata == ["app_user_id": "user_42"])
        #expect(session.livemode == false)
    }

    @Test("Checkout session e-mail falls back to customer_email")
    func checkoutEmailFallback() throws {
        var object = try Fixtures.jsonObject("checkout_session")
        object["customer_details"] = NSNull()
        object["customer_email"] = "prefilled@example.com"
        #expect(try JSONDecoder().decode(CheckoutSession.self, from: Fixtures.json(object)).customerEmail == "prefilled@example.com")
    }

    @Test("Active entitlement summary: features as ids or expanded objects")
    func entitlementSummary() throws {
        let summary = try Fixtures.decode(ActiveEntitlementSummary.self, "active_entitlement_summary")
        #expect(summary.customer == customerID)
        #expect(summary.hasMore == false)
        #expect(summary.livemode == false)
        #expect(summary.entitlements.map(\.lookupKey) == ["projects_unlimited", "storage_100gb"])
        #expect(summary.entitlements.map(\.featureID) == [
            "feat_test_61Tz8QvHd3QfR8sTa9X2bLm4Kq7Wn3Re", "feat_test_61Tz8QwHd3QfR8sTaL4mP8sVx2Cd6Jh",
        ])
        #expect(summary.entitlements.first?.id == "ent_test_61Tz8RaHd3QfR8sTaQ5nW2kLz7Xb4Fg")
    }

    @Test("Invoice payment")
    func invoicePayment() throws {
        let payment = try Fixtures.decode(InvoicePayment.self, "invoice_payment")
        #expect(payment.id == "inpay_1Sx4kNHd3QfR8sTaK7mQ2pLs")
        #expect(payment.invoice?.id == invoiceID)
        #expect(payment.amountPaid == 1944)
        #expect(payment.amountRequested == 1944)
        #expect(payment.currency == "usd")
        #expect(payment.status == "paid")
        #expect(payment.created == periodStart + 1)
        #expect(payment.paidAt == periodStart + 3)
        #expect(payment.isDefault == true)
        #expect(payment.livemode == false)
    }
}
