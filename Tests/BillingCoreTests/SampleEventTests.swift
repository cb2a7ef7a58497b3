import BillingCore
import BillingSamples
import Foundation
import Testing

@Suite("Sample events")
struct SampleEventTests {
    /// Event types whose resource has no Stripe example: they get the minimal object.
    static let withoutSample: Set<String> = ["*", "apps.install", "three_d_secure.authentication"]

    @Test("Event types map to the resource in data.object", arguments: [
        ("customer.subscription.updated", "subscription"),
        ("customer.subscription.trial_will_end", "subscription"),
        ("invoice.paid", "invoice"),
        ("invoice.upcoming", "invoice"),
        ("checkout.session.completed", "checkout.session"),
        ("entitlements.active_entitlement_summary.updated", "entitlements.active_entitlement_summary"),
        ("invoice_payment.paid", "invoice_payment"),
        ("payment_method.attached", "payment_method"),
        ("customer.created", "customer"),
        ("customer.discount.created", "discount"),
        ("charge.dispute.created", "dispute"),
        ("charge.refund.updated", "refund"),
        ("application_fee.refund.updated", "fee_refund"),
        ("customer.source.created", "card"),
        ("customer.tax_id.created", "tax_id"),
        ("price.created", "price"),
        ("product.deleted", "product"),
        ("invoiceitem.created", "invoiceitem"),
        ("issuing_authorization.request", "issuing.authorization"),
        ("sigma.scheduled_query_run.created", "scheduled_query_run"),
        ("source.transaction.created", "source_transaction"),
        ("account.external_account.created", "external_account"),
        ("test_helpers.test_clock.ready", "test_helpers.test_clock"),
        ("v1.billing.meter.error_report_triggered", "billing.meter"),
        ("apps.install.created", "apps.install"),
        ("brand_new_thing.happened", "brand_new_thing"),
    ])
    func resourceOfEventType(type: String, resource: String) {
        #expect(SampleEvent.resource(forEventType: type) == resource)
    }

    @Test("Every event type of Stripe's list gets a complete, valid event")
    func everyEventType() throws {
        let types = try Fixtures.eventTypes()
        #expect(types.count == 276)
        for (index, type) in types.enumerated() {
            let livemode = index.isMultiple(of: 2)
            let account: String? = index.isMultiple(of: 3) ? "acct_1Connected0000" : nil
            let bytes = SampleEvent.body(
                type: type, eventID: "evt_\(index)", created: 1_772_000_000, apiVersion: "2026-10-28.clover",
                livemode: livemode, account: account)
            let event = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any], "\(type)")
            #expect(event["id"] as? String == "evt_\(index)")
            #expect(event["object"] as? String == "event")
            #expect(event["type"] as? String == type)
            #expect(event["api_version"] as? String == "2026-10-28.clover")
            #expect((event["created"] as? NSNumber)?.int64Value == 1_772_000_000)
            #expect(event["livemode"] as? Bool == livemode)
            #expect((event["pending_webhooks"] as? NSNumber)?.intValue == 1)
            let request = try #require(event["request"] as? [String: Any])
            #expect(request["id"] is NSNull && request["idempotency_key"] is NSNull)
            #expect(event["account"] as? String == account)
            #expect(event.keys.contains("account") == (account != nil))

            let data = try #require(event["data"] as? [String: Any])
            let object = try #require(data["object"] as? [String: Any], "\(type)")
            #expect(object["livemode"] as? Bool == livemode, "\(type)")
            let resource = SampleEvent.resource(forEventType: type)
            if Self.withoutSample.contains(resource) {
                #expect(object["id"] as? String == "\(resource)_sample")
                #expect(object["object"] as? String == resource)
            } else {
                #expect(SampleObjects.json[resource] != nil, "\(type) → \(resource)")
                #expect(object["object"] != nil, "\(type)")
            }
            // Singletons (balance, settings, the entitlement summary) and previews have no id in Stripe either.
            let withoutID: Set<String> = [
                "balance", "balance_settings", "cash_balance", "tax.settings", "entitlements.active_entitlement_summary",
            ]
            let hasID = object["id"] is String
            #expect(hasID != (withoutID.contains(resource) || type == "invoice.upcoming"), "\(type): id \(hasID)")
        }
    }

    @Test("Modelled event types decode into their model with a status matching the event")
    func modelledEventTypes() throws {
        let created: Int64 = 1_772_000_000
        var checked = 0
        for type in try Fixtures.eventTypes() {
            let object = try dataObject(type: type, created: created)
            switch SampleEvent.resource(forEventType: type) {
            case "subscription":
                try checkSubscription(object, type: type, created: created)
            case "invoice":
                try checkInvoice(object, type: type, created: created)
            case "checkout.session":
                let session = try decode(CheckoutSession.self, object)
                let expected: [String: (CheckoutSessionStatus, String)] = [
                    "checkout.session.completed": (.complete, "paid"),
                    "checkout.session.async_payment_succeeded": (.complete, "paid"),
                    "checkout.session.async_payment_failed": (.complete, "unpaid"),
                    "checkout.session.expired": (.expired, "unpaid"),
                ]
                let (status, payment) = try #require(expected[type], "\(type)")
                #expect(session.status == status, "\(type)")
                #expect(session.paymentStatus == payment, "\(type)")
                #expect(session.url == nil)
                #expect(session.clientReferenceID == "user_42")
                #expect((session.subscription == nil) == (type == "checkout.session.expired"), "\(type)")
            case "payment_method":
                let method = try decode(PaymentMethod.self, object)
                #expect((method.customer == nil) == (type == "payment_method.detached"), "\(type)")
                #expect(method.card?.last4 == "4242")
            case "customer":
                let customer = try decode(Customer.self, object)
                #expect(customer.appUserID == "user_42")
                #expect(customer.deleted == false, "customer.deleted carries the last full state")
            case "price":
                #expect(try decode(Price.self, object).unitAmount == 2000)
            case "product":
                #expect(try decode(Product.self, object).name == "Pro")
            case "entitlements.active_entitlement_summary":
                #expect(try decode(ActiveEntitlementSummary.self, object).entitlements.count == 2)
            case "invoice_payment":
                let payment = try decode(InvoicePayment.self, object)
                #expect(payment.status == "paid")
                #expect(payment.paidAt == created)
                #expect(payment.amountPaid == payment.amountRequested)
            default:
                continue
            }
            checked += 1
        }
        // 8 subscription + 17 invoice + 4 checkout + 4 payment method + 3 customer + 3 price + 3 product
        // + 1 entitlement summary + 1 invoice payment.
        #expect(checked == 44)
    }

    private func checkSubscription(_ object: [String: Any], type: String, created: Int64) throws {
        let subscription = try decode(Subscription.self, object)
        let expected: SubscriptionStatus =
            switch type {
            case "customer.subscription.deleted": .canceled
            case "customer.subscription.paused": .paused
            case "customer.subscription.trial_will_end": .trialing
            default: .active
            }
        #expect(subscription.status == expected, "\(type)")
        switch type {
        case "customer.subscription.deleted":
            #expect(subscription.endedAt == created)
            #expect(subscription.canceledAt == created)
            #expect(subscription.cancellationReason == "cancellation_requested")
        case "customer.subscription.trial_will_end":
            #expect(subscription.trialEnd == created + 3 * 86_400)
            #expect(subscription.currentPeriodEnd == subscription.trialEnd)
            #expect(subscription.currentPeriodStart == subscription.trialStart)
        default:
            #expect(subscription.endedAt == nil, "\(type)")
            #expect(subscription.currentPeriodEnd == 1_772_359_200)
        }
    }

    private func checkInvoice(_ object: [String: Any], type: String, created: Int64) throws {
        let invoice = try decode(Invoice.self, object)
        let expected: [String: InvoiceStatus] = [
            "invoice.created": .draft, "invoice.deleted": .draft, "invoice.finalization_failed": .draft,
            "invoice.upcoming": .draft, "invoice.finalized": .open, "invoice.sent": .open,
            "invoice.payment_attempt_required": .open, "invoice.payment_failed": .open,
            "invoice.payment_action_required": .open, "invoice.overdue": .open, "invoice.will_be_due": .open,
            "invoice.paid": .paid, "invoice.payment_succeeded": .paid, "invoice.overpaid": .paid,
            "invoice.updated": .paid, "invoice.marked_uncollectible": .uncollectible, "invoice.voided": .void,
        ]
        let status = try #require(expected[type], "\(type) has no expectation")
        #expect(invoice.status == status, "\(type)")
        #expect(invoice.subtotal - invoice.discountAmount + invoice.taxAmount == invoice.total)
        #expect(invoice.amountDue == invoice.total)
        #expect(invoice.amountPaid + invoice.amountRemaining == invoice.amountDue, "\(type)")
        #expect(invoice.subscription?.id == "sub_1Sx4kLHd3QfR8sTaV9pWm2cE")
        #expect((invoice.id == nil) == (type == "invoice.upcoming"), "\(type)")
        switch status {
        case .draft:
            #expect(invoice.amountPaid == 0)
            #expect(invoice.number == nil)
            #expect(invoice.statusTransitions == .init(), "\(type)")
        case .open:
            #expect(invoice.amountPaid == 0)
            #expect(invoice.statusTransitions.paidAt == nil)
            #expect(invoice.statusTransitions.finalizedAt != nil)
        case .paid:
            #expect(invoice.amountPaid == invoice.total, "\(type)")
            #expect(invoice.amountRemaining == 0)
            let paidAt = try #require(invoice.statusTransitions.paidAt)
            #expect(paidAt <= created)
            #expect(try #require(invoice.statusTransitions.finalizedAt) <= paidAt)
        case .void:
            #expect(invoice.statusTransitions.voidedAt == created)
        case .uncollectible:
            #expect(invoice.statusTransitions.markedUncollectibleAt == created)
        default:
            Issue.record("unexpected status \(status) for \(type)")
        }
        if type == "invoice.payment_failed" {
            #expect(invoice.attemptCount == 1)
        }
        if type == "invoice.upcoming" {
            #expect(invoice.billingReason == "upcoming")
        }
    }

    @Test("Paid transitions never precede finalization, even for an early event time")
    func earlyEventTime() throws {
        let invoice = try decode(Invoice.self, dataObject(type: "invoice.paid", created: 1_000))
        #expect(invoice.statusTransitions.paidAt == 1_000)
        #expect(invoice.statusTransitions.finalizedAt == 1_000)
    }

    @Test("Bodies are deterministic, keys sorted")
    func deterministic() {
        let make = {
            SampleEvent.body(
                type: "customer.subscription.updated", eventID: "evt_1", created: 1_772_000_000,
                apiVersion: "2026-10-28.clover", livemode: false, account: nil)
        }
        let body = make()
        #expect(body == make())
        let text = String(decoding: body, as: UTF8.self)
        #expect(text.hasPrefix(#"{"api_version":"2026-10-28.clover","created":1772000000,"data":{"object":{"#))
        #expect(text.contains(#""previous_attributes":{"status":"incomplete"}"#))
        #expect(!text.contains(#"\/"#))
        // Booleans stay JSON booleans and integers stay integers through the rewrite.
        #expect(text.contains(#""cancel_at_period_end":false,"#))
        #expect(text.contains(#""livemode":false,"object":"event","pending_webhooks":1,"#))
        #expect(text.contains(#""current_period_end":1772359200,"#))
        #expect(text.hasSuffix(#""type":"customer.subscription.updated"}"#))
    }

    @Test("Object overrides set top-level strings of data.object")
    func overrides() throws {
        let object = try dataObject(
            type: "customer.subscription.created", created: 1, overrides: ["id": "sub_123", "customer": "cus_9"])
        let subscription = try decode(Subscription.self, object)
        #expect(subscription.id == "sub_123")
        #expect(subscription.customer.id == "cus_9")
        #expect(subscription.items.count == 1)

        let upcoming = try dataObject(type: "invoice.upcoming", created: 1, overrides: ["customer": "cus_9"])
        #expect(try decode(Invoice.self, upcoming).customer?.id == "cus_9")
    }

    @Test("Live mode reaches nested objects and the Checkout id")
    func liveMode() throws {
        let subscription = try dataObject(type: "customer.subscription.updated", created: 1, livemode: true)
        let items = try #require((subscription["items"] as? [String: Any])?["data"] as? [[String: Any]])
        let price = try #require(items.first?["price"] as? [String: Any])
        #expect(price["livemode"] as? Bool == true)
        #expect(try decode(Subscription.self, subscription).items.first?.price?.livemode == true)

        let session = try decode(CheckoutSession.self, dataObject(type: "checkout.session.completed", created: 1, livemode: true))
        #expect(session.id.hasPrefix("cs_live_"))
        #expect(session.livemode == true)
    }

    @Test("Unknown event types still give an event")
    func unknownEventType() throws {
        let object = try dataObject(type: "quantum.entanglement.collapsed", created: 5)
        #expect(object["id"] as? String == "quantum.entanglement_sample")
        #expect(object["object"] as? String == "quantum.entanglement")
        let empty = try #require(
            try JSONSerialization.jsonObject(
                with: Data(SampleEvent.body(type: "", eventID: "evt_0", created: 0, apiVersion: "", livemode: false, account: nil))
            ) as? [String: Any])
        #expect(empty["type"] as? String == "")
    }

    // MARK: Helpers

    private func dataObject(
        type: String, created: Int64, livemode: Bool = false, overrides: [String: String] = [:]
    ) throws -> [String: Any] {
        let bytes = SampleEvent.body(
            type: type, eventID: "evt_test", created: created, apiVersion: "2026-10-28.clover", livemode: livemode,
            account: nil, objectOverrides: overrides)
        let event = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        return try #require((event["data"] as? [String: Any])?["object"] as? [String: Any])
    }

    private func decode<T: Decodable>(_ type: T.Type, _ object: [String: Any]) throws -> T {
        try JSONDecoder().decode(type, from: JSONSerialization.data(withJSONObject: object))
    }
}
