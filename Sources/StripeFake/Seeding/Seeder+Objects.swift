/// Writing the planned objects: each kind through the resource builders (the truth) and, for
/// speed, through a ``JSONTemplate`` made from the first object, after checking a few objects of
/// every variant against the builders.
extension Seeder {
    typealias Fill = JSONTemplate.Fill

    /// Everything planned, and what many objects share, serialized once.
    struct World: Sendable {
        let customers: [CustomerPlan]
        let subscriptions: [SubscriptionPlan]
        let prices: [JSONValue]
        let products: [JSONValue]
        /// Per price: the serialized price (embedded in subscription items), ids and line texts.
        let priceBytes: [[UInt8]]
        let priceIDs: [String]
        let productIDs: [String]
        let unitAmountDecimals: [String]
        let lineDescriptions: [String]
        let trialLineDescriptions: [String]

        init(customers: [CustomerPlan], subscriptions: [SubscriptionPlan], prices: [JSONValue], products: [JSONValue]) {
            self.customers = customers
            self.subscriptions = subscriptions
            self.prices = prices
            self.products = products
            priceBytes = prices.map { $0.serialized() }
            priceIDs = prices.map { $0["id"]?.stringValue ?? "" }
            productIDs = prices.map { $0["product"]?.stringValue ?? "" }
            unitAmountDecimals = prices.map { $0["unit_amount_decimal"]?.stringValue ?? "0" }
            let names = prices.indices.map { products[$0 % products.count]["name"]?.stringValue ?? "Plan" }
            lineDescriptions = prices.indices.map { index in
                InvoiceObjects.lineDescription(quantity: 1, product: names[index], price: prices[index])
            }
            trialLineDescriptions = names.map { "Trial period for \($0)" }
        }

        func lineDescription(_ plan: InvoicePlan) -> String {
            plan.amount == 0 && plan.subscription != nil
                ? trialLineDescriptions[plan.price] : lineDescriptions[plan.price]
        }

        func invoiceNumber(_ plan: InvoicePlan) -> String {
            InvoiceObjects.number(prefix: customers[plan.customer].invoicePrefix, sequence: plan.sequence)
        }

        /// Every planned object, stored form.
        func objects(invoices: [InvoicePlan]) async -> Output {
            var output = Output()
            output.objects[.product] = products.map { Seeder.stored($0, as: .product) }
            output.objects[.price] = prices.map { Seeder.stored($0, as: .price) }
            output.objects[.customer] = await Seeder.render(
                customers, kind: .customer, holes: Seeder.customerHoles, build: Seeder.customerValue,
                fills: Seeder.customerFills, fields: Seeder.customerFields, variant: { _ in "" })
            output.objects[.subscription] = await Seeder.render(
                subscriptions, kind: .subscription, holes: Seeder.subscriptionHoles,
                build: { Seeder.subscriptionValue($0, in: self) }, fills: { Seeder.subscriptionFills($0, in: self) },
                fields: { Seeder.subscriptionFields($0, in: self) },
                // Paused subscriptions carry a `pause_collection` object; they go through the builder.
                variant: { $0.status == "paused" ? nil : "\($0.status) \($0.trial != nil) \($0.cancelAtPeriodEnd)" })
            output.objects[.invoice] = await Seeder.render(
                invoices, kind: .invoice, holes: Seeder.invoiceHoles, build: { Seeder.invoiceValue($0, in: self) },
                fills: { Seeder.invoiceFills($0, in: self) }, fields: { Seeder.invoiceFields($0, in: self) },
                // One-off invoices have no `parent`; they go through the builder.
                variant: { $0.subscription == nil ? nil : "\($0.status) \($0.amount == 0)" })
            return output
        }
    }

    // MARK: Customers

    static let customerHoles = ["id", "created", "email", "name", "metadata.app_user_id", "invoice_prefix"]

    static func customerValue(_ plan: CustomerPlan) -> JSONValue {
        CustomerObjects.customer(
            id: plan.id, created: plan.created, email: plan.email, name: plan.name, description: nil, phone: nil,
            metadata: ["app_user_id": plan.appUserID])
    }

    static func customerFills(_ plan: CustomerPlan) -> [Fill] {
        [
            .string(plan.id), .int(plan.created), .string(plan.email), .string(plan.name), .string(plan.appUserID),
            .string(plan.invoicePrefix),
        ]
    }

    static func customerFields(_ plan: CustomerPlan) -> IndexedFields {
        var fields = IndexedFields()
        fields.email = plan.email
        fields.name = plan.name
        fields.metadata = ["app_user_id": plan.appUserID]
        return fields
    }

    // MARK: Subscriptions

    /// Seeded objects start from Stripe's samples without the members that are almost always null
    /// or empty and that nothing reads, to keep 450,000 objects in reasonable memory (~1–2 KB each).
    private static let compactSubscription = without(
        [
            "application", "application_fee_percent", "billing_cycle_anchor_config", "billing_schedules",
            "billing_thresholds", "customer_account", "days_until_due", "default_source", "default_tax_rates",
            "invoice_settings", "managed_payments", "next_pending_invoice_item_invoice", "on_behalf_of",
            "pending_invoice_item_interval", "pending_setup_intent", "pending_update", "schedule", "test_clock",
            "transfer_data", "trial_settings",
        ], in: ObjectTemplates.subscription)
    private static let compactItem = without(["plan", "billing_thresholds"], in: ObjectTemplates.subscriptionItem)

    static let subscriptionHoles = [
        "id", "customer", "created", "start_date", "billing_cycle_anchor", "status", "metadata.app_user_id",
        "latest_invoice", "trial_start", "trial_end", "cancel_at", "cancel_at_period_end", "canceled_at", "ended_at",
        "cancellation_details.reason", "items.url", "items.data.0.id", "items.data.0.subscription",
        "items.data.0.price", "items.data.0.created", "items.data.0.current_period_start",
        "items.data.0.current_period_end",
    ]

    static func subscriptionValue(_ plan: SubscriptionPlan, in world: World) -> JSONValue {
        let customer = world.customers[plan.customer]
        let item = SubscriptionObjects.item(
            id: plan.itemID, subscription: plan.id, price: world.prices[plan.price], quantity: 1, created: plan.created,
            periodStart: plan.periodStart, periodEnd: plan.periodEnd, template: compactItem)
        var subscription = SubscriptionObjects.subscription(
            id: plan.id, customer: customer.id, created: plan.created, status: plan.status, items: [item],
            metadata: ["app_user_id": customer.appUserID], latestInvoice: plan.latestInvoice,
            defaultPaymentMethod: nil, trial: plan.trial, billingCycleAnchor: plan.trial?.upperBound ?? plan.created,
            template: compactSubscription)
        if let canceledAt = plan.canceledAt {
            subscription["canceled_at"] = .int(canceledAt)
            subscription["ended_at"] = .int(canceledAt)
            subscription["cancellation_details"]?["reason"] = "cancellation_requested"
        }
        if plan.cancelAtPeriodEnd {
            subscription["cancel_at_period_end"] = true
            subscription["cancel_at"] = .int(plan.periodEnd)
            subscription["cancellation_details"]?["reason"] = "cancellation_requested"
        }
        if plan.status == "paused" {
            subscription["pause_collection"] = ["behavior": "void", "resumes_at": nil]
        }
        return subscription
    }

    static func subscriptionFills(_ plan: SubscriptionPlan, in world: World) -> [Fill] {
        let customer = world.customers[plan.customer]
        let canceling = plan.canceledAt != nil || plan.cancelAtPeriodEnd
        return [
            .string(plan.id), .string(customer.id), .int(plan.created), .int(plan.created),
            .int(plan.trial?.upperBound ?? plan.created), .string(plan.status), .string(customer.appUserID),
            .string(plan.latestInvoice), .int(plan.trial?.lowerBound), .int(plan.trial?.upperBound),
            .int(plan.cancelAtPeriodEnd ? plan.periodEnd : nil), .bool(plan.cancelAtPeriodEnd), .int(plan.canceledAt),
            .int(plan.canceledAt), canceling ? .string("cancellation_requested") : .null,
            .string("/v1/subscription_items?subscription=" + plan.id), .string(plan.itemID), .string(plan.id),
            .raw(world.priceBytes[plan.price]), .int(plan.created), .int(plan.periodStart), .int(plan.periodEnd),
        ]
    }

    static func subscriptionFields(_ plan: SubscriptionPlan, in world: World) -> IndexedFields {
        var fields = IndexedFields()
        fields.customer = world.customers[plan.customer].id
        fields.status = plan.status
        fields.collectionMethod = "charge_automatically"
        fields.priceIDs = [world.priceIDs[plan.price]]
        return fields
    }

    // MARK: Invoices

    private static let compactInvoice = without(
        [
            "account_country", "account_name", "account_tax_ids", "application", "automatic_tax",
            "automatically_finalizes_at", "custom_fields", "customer_account", "customer_address", "customer_phone",
            "customer_shipping", "customer_tax_exempt", "customer_tax_ids", "default_payment_method",
            "default_source", "default_tax_rates", "footer", "from_invoice", "issuer", "last_finalization_error",
            "latest_revision", "on_behalf_of", "payment_settings", "rendering", "shipping_cost", "shipping_details",
            "statement_descriptor", "test_clock", "total_pretax_credit_amounts", "amount_overpaid", "amount_shipping",
            "post_payment_credit_notes_amount", "pre_payment_credit_notes_amount", "receipt_number", "subscription",
        ], in: ObjectTemplates.invoice)

    static let invoiceHoles = [
        "id", "created", "customer", "customer_email", "customer_name", "billing_reason", "period_start", "period_end",
        "subtotal", "subtotal_excluding_tax", "total", "total_excluding_tax", "amount_due", "amount_paid",
        "amount_remaining", "parent.subscription_details.metadata.app_user_id",
        "parent.subscription_details.subscription", "status", "number", "hosted_invoice_url", "invoice_pdf",
        "effective_at", "attempted", "attempt_count", "next_payment_attempt", "status_transitions.finalized_at",
        "status_transitions.marked_uncollectible_at", "status_transitions.paid_at", "status_transitions.voided_at",
        "webhooks_delivered_at", "lines.url", "lines.data.0.id", "lines.data.0.invoice", "lines.data.0.amount",
        "lines.data.0.subtotal", "lines.data.0.description", "lines.data.0.period.end", "lines.data.0.period.start",
        "lines.data.0.pricing.price_details.price", "lines.data.0.pricing.price_details.product",
        "lines.data.0.pricing.unit_amount_decimal", "lines.data.0.parent.subscription_item_details.subscription",
        "lines.data.0.parent.subscription_item_details.subscription_item",
    ]

    static func invoiceValue(_ plan: InvoicePlan, in world: World) -> JSONValue {
        let customer = world.customers[plan.customer]
        let subscription = plan.subscription.map { world.subscriptions[$0] }
        let owner: JSONValue = [
            "id": .string(customer.id), "email": .string(customer.email), "name": .string(customer.name),
            "phone": nil, "address": nil,
        ]
        let line = InvoiceObjects.Line(
            price: world.prices[plan.price], quantity: 1, amount: plan.amount,
            description: world.lineDescription(plan), subscriptionItem: subscription?.itemID,
            periodStart: plan.periodStart, periodEnd: plan.periodEnd)
        var invoice = InvoiceObjects.draft(
            id: plan.id, customer: owner,
            subscription: subscription.map { ($0.id, ["app_user_id": .string(customer.appUserID)]) }, lines: [line],
            lineIDs: [plan.lineID], created: plan.created, periodStart: plan.created, periodEnd: plan.created,
            billingReason: plan.billingReason, template: compactInvoice)
        InvoiceObjects.finalize(&invoice, number: world.invoiceNumber(plan), at: plan.created)
        switch plan.status {
        case "paid":
            InvoiceObjects.markPaid(&invoice, at: plan.created + 2)
        case "void":
            invoice["status"] = "void"
            invoice["amount_remaining"] = 0
            invoice["status_transitions"]?["voided_at"] = .int(plan.created + day)
        case "uncollectible":
            invoice["status"] = "uncollectible"
            invoice["status_transitions"]?["marked_uncollectible_at"] = .int(plan.created + 30 * day)
        default:
            InvoiceObjects.markPaymentFailed(&invoice, at: plan.created)
        }
        invoice["webhooks_delivered_at"] = .int(plan.created + 1)
        return invoice
    }

    static func invoiceFills(_ plan: InvoicePlan, in world: World) -> [Fill] {
        let customer = world.customers[plan.customer]
        let subscription = plan.subscription.map { world.subscriptions[$0] }
        let secret = "test_" + plan.id.dropFirst(3) + "0200fake"
        let (paid, remaining, attempted, attempts, nextAttempt): (Int64, Int64, Bool, Int64, Int64?) =
            switch plan.status {
            case "paid": (plan.amount, 0, true, plan.amount > 0 ? 1 : 0, nil)
            case "void": (0, 0, false, 0, nil)
            case "uncollectible": (0, plan.amount, false, 0, nil)
            default: (0, plan.amount, true, 1, plan.created + 3 * day)
            }
        let amount = Fill.int(plan.amount)
        return [
            .string(plan.id), .int(plan.created), .string(customer.id), .string(customer.email), .string(customer.name),
            .string(plan.billingReason), .int(plan.created), .int(plan.created), amount, amount, amount, amount, amount,
            .int(paid), .int(remaining), .string(customer.appUserID), .string(subscription?.id),
            .string(plan.status), .string(world.invoiceNumber(plan)),
            .string("https://invoice.stripe.com/i/acct_1FakeStripeAcct0/" + secret + "?s=ap"),
            .string("https://pay.stripe.com/invoice/acct_1FakeStripeAcct0/" + secret + "/pdf?s=ap"),
            .int(plan.created), .bool(attempted), .int(attempts), .int(nextAttempt), .int(plan.created),
            .int(plan.status == "uncollectible" ? plan.created + 30 * day : nil),
            .int(plan.status == "paid" ? plan.created + 2 : nil),
            .int(plan.status == "void" ? plan.created + day : nil),
            .int(plan.created + 1), .string("/v1/invoices/" + plan.id + "/lines"), .string(plan.lineID),
            .string(plan.id), amount, amount, .string(world.lineDescription(plan)), .int(plan.periodEnd),
            .int(plan.periodStart), .string(world.priceIDs[plan.price]), .string(world.productIDs[plan.price]),
            .string(world.unitAmountDecimals[plan.price]), .string(subscription?.id), .string(subscription?.itemID),
        ]
    }

    static func invoiceFields(_ plan: InvoicePlan, in world: World) -> IndexedFields {
        var fields = IndexedFields()
        fields.customer = world.customers[plan.customer].id
        fields.subscription = plan.subscription.map { world.subscriptions[$0].id }
        fields.status = plan.status
        fields.collectionMethod = "charge_automatically"
        return fields
    }

    // MARK: Rendering

    private static func without(_ keys: [String], in template: JSONValue) -> JSONValue {
        var template = template
        for key in keys { template[key] = nil }
        return template
    }

    static func stored(_ object: JSONValue, as kind: ObjectKind, scratch: inout [UInt8]) -> StoredObject {
        StoredObject(
            id: object["id"]?.stringValue ?? "", created: object["created"]?.intValue ?? 0,
            json: object.serialized(using: &scratch), fields: kind.indexedFields(of: object))
    }

    static func stored(_ object: JSONValue, as kind: ObjectKind) -> StoredObject {
        var scratch: [UInt8] = []
        return stored(object, as: kind, scratch: &scratch)
    }

    /// Writes `plans` through a template made from the first plan with a `variant`, after checking
    /// up to three plans of each variant against `build`; plans without a variant (nil), and all of
    /// them if a check fails, go through `build`.
    static func render<Plan: Seeder.Plan>(
        _ plans: [Plan], kind: ObjectKind, holes: [String], build: @escaping @Sendable (Plan) -> JSONValue,
        fills: @escaping @Sendable (Plan) -> [Fill], fields: @escaping @Sendable (Plan) -> IndexedFields,
        variant: @escaping @Sendable (Plan) -> String?
    ) async -> [StoredObject] {
        var template: JSONTemplate?
        if let first = plans.first(where: { variant($0) != nil }) {
            template = JSONTemplate(build(first), holesAt: holes)
            if template == nil { assertionFailure("a seeding hole of \(kind) names no member of its builder's object") }
        }
        var checked: [String: Int] = [:]
        for plan in plans.prefix(20_000) {
            guard let current = template, let key = variant(plan), checked[key, default: 0] < 3 else { continue }
            checked[key, default: 0] += 1
            let expected = build(plan)
            guard (try? JSONValue(parsing: current.render(fills(plan)))) == expected,
                fields(plan) == kind.indexedFields(of: expected)
            else {
                assertionFailure("the seeding template of \(kind) disagrees with its builder for \(key)")
                template = nil
                break
            }
        }
        let checkedTemplate = template
        return await parallelMap(plans) { plan, scratch in
            guard let checkedTemplate, variant(plan) != nil else {
                return stored(build(plan), as: kind, scratch: &scratch)
            }
            return StoredObject(
                id: plan.id, created: plan.created, json: checkedTemplate.render(fills(plan), using: &scratch),
                fields: fields(plan))
        }
    }

    /// Builds `plans` in parallel chunks, keeping their order.
    private static func parallelMap<Plan: Sendable>(
        _ plans: [Plan], _ make: @escaping @Sendable (Plan, inout [UInt8]) -> StoredObject
    ) async -> [StoredObject] {
        let chunkSize = 4096
        let chunks = stride(from: 0, to: plans.count, by: chunkSize).map { $0..<min($0 + chunkSize, plans.count) }
        var results = [[StoredObject]](repeating: [], count: chunks.count)
        await withTaskGroup(of: (Int, [StoredObject]).self) { group in
            for (index, range) in chunks.enumerated() {
                group.addTask {
                    var scratch: [UInt8] = []
                    scratch.reserveCapacity(8192)
                    return (index, plans[range].map { make($0, &scratch) })
                }
            }
            for await (index, objects) in group { results[index] = objects }
        }
        return results.flatMap { $0 }
    }
}
