/// Subscriptions: create (active or trialing, with a paid first invoice), retrieve, update
/// (cancel at period end, metadata, items), cancel, list; and renewal for tests.
/// Billing periods are on the items (`items.data[].current_period_start/end`), the 2025+ shape.
enum SubscriptionObjects {
    static func item(
        id: String, subscription: String, price: JSONValue, quantity: Int64, created: Int64, periodStart: Int64,
        periodEnd: Int64, template: JSONValue = ObjectTemplates.subscriptionItem
    ) -> JSONValue {
        var item = template
        item["id"] = .string(id)
        item["subscription"] = .string(subscription)
        item["price"] = price
        if item["plan"] != nil { item["plan"] = CatalogObjects.plan(from: price) }
        item["quantity"] = .int(quantity)
        item["created"] = .int(created)
        item["current_period_start"] = .int(periodStart)
        item["current_period_end"] = .int(periodEnd)
        item["metadata"] = [:]
        item["discounts"] = []
        item["tax_rates"] = []
        return item
    }

    static func subscription(
        id: String, customer: String, created: Int64, status: String, items: [JSONValue], metadata: [String: String],
        latestInvoice: String?, defaultPaymentMethod: String?, trial: ClosedRange<Int64>?, billingCycleAnchor: Int64,
        template: JSONValue = ObjectTemplates.subscription
    ) -> JSONValue {
        var subscription = template
        subscription["id"] = .string(id)
        subscription["customer"] = .string(customer)
        subscription["created"] = .int(created)
        subscription["start_date"] = .int(created)
        subscription["billing_cycle_anchor"] = .int(billingCycleAnchor)
        subscription["status"] = .string(status)
        subscription["currency"] = items.first?[path: "price.currency"] ?? "usd"
        subscription["metadata"] = JSONValue(metadata)
        subscription["latest_invoice"] = JSONValue(latestInvoice)
        subscription["default_payment_method"] = JSONValue(defaultPaymentMethod)
        subscription["trial_start"] = JSONValue(trial?.lowerBound)
        subscription["trial_end"] = JSONValue(trial?.upperBound)
        subscription["discounts"] = []
        subscription["description"] = .null
        subscription["cancel_at"] = .null
        subscription["cancel_at_period_end"] = false
        subscription["canceled_at"] = .null
        subscription["ended_at"] = .null
        subscription["cancellation_details"] = ["comment": nil, "feedback": nil, "reason": nil]
        subscription["livemode"] = false
        subscription["items"] = [
            "data": .array(items), "has_more": false, "object": "list",
            "url": .string("/v1/subscription_items?subscription=\(id)"),
        ]
        return subscription
    }

    /// The end of the latest item period: when a `cancel_at_period_end` subscription ends.
    static func periodEnd(of subscription: JSONValue) -> Int64? {
        (subscription[path: "items.data"]?.arrayValue ?? []).compactMap { $0["current_period_end"]?.intValue }.max()
    }

    static let statuses = [
        "active", "all", "canceled", "ended", "incomplete", "incomplete_expired", "past_due", "paused", "trialing",
        "unpaid",
    ]
}

extension FakeStore {
    private static let subscriptionCreateParameters: Set<String> = [
        "add_invoice_items", "application_fee_percent", "automatic_tax", "backdate_start_date", "billing_cycle_anchor",
        "billing_cycle_anchor_config", "billing_mode", "billing_thresholds", "cancel_at", "cancel_at_period_end",
        "collection_method", "coupon", "currency", "customer", "days_until_due", "default_payment_method",
        "default_source", "default_tax_rates", "description", "discounts", "invoice_settings", "items", "metadata",
        "off_session", "on_behalf_of", "payment_behavior", "payment_settings", "pending_invoice_item_interval",
        "promotion_code", "proration_behavior", "transfer_data", "trial_end", "trial_from_plan", "trial_period_days",
        "trial_settings",
    ]
    private static let subscriptionUpdateParameters: Set<String> = [
        "add_invoice_items", "application_fee_percent", "automatic_tax", "billing_cycle_anchor", "billing_thresholds",
        "cancel_at", "cancel_at_period_end", "cancellation_details", "collection_method", "coupon", "days_until_due",
        "default_payment_method", "default_source", "default_tax_rates", "description", "discounts",
        "invoice_settings", "items", "metadata", "off_session", "on_behalf_of", "pause_collection",
        "payment_behavior", "payment_settings", "pending_invoice_item_interval", "promotion_code",
        "proration_behavior", "proration_date", "transfer_data", "trial_end", "trial_from_plan", "trial_settings",
    ]
    private static let subscriptionItemParameters: Set<String> = [
        "billing_thresholds", "clear_usage", "deleted", "discounts", "id", "metadata", "plan", "price", "price_data",
        "quantity", "tax_rates",
    ]

    // MARK: Helpers

    /// A price that a subscription may use: it exists, is active and recurring.
    func subscribablePrice(_ id: String, in account: AccountState, param: String) throws(StripeAPIError) -> JSONValue {
        let price = try existing(.price, id, in: account, param: param)
        guard price.fields.active != false else {
            throw .invalidRequest(
                "The price specified is inactive. This field only accepts active prices.", param: param)
        }
        guard price.fields.type == "recurring" else {
            throw .invalidRequest(
                "The price specified is set to `type=one_time` but this field only accepts prices with `type=recurring`.",
                param: param)
        }
        return price.value
    }

    /// Creates a subscription and bills its first invoice: `customer.subscription.created`, then
    /// the invoice's events. Trialing when `trialDays` > 0, with a $0 invoice.
    @discardableResult
    func createSubscription(
        customer: String, items: [(price: JSONValue, quantity: Int64)], trialDays: Int64? = nil,
        metadata: [String: String] = [:], defaultPaymentMethod: String? = nil, cancelAtPeriodEnd: Bool = false,
        in account: AccountState, origin: EventOrigin
    ) throws(StripeAPIError) -> (subscription: StoredObject, invoice: StoredObject) {
        _ = try existing(.customer, customer, in: account, param: "customer")
        let now = clock.now
        let id = ids.make(.subscription)
        let invoiceID = ids.make(.invoice)
        let trialEnd = trialDays.flatMap { $0 > 0 ? now + $0 * 86_400 : nil }

        var itemValues: [JSONValue] = []
        var lines: [InvoiceObjects.Line] = []
        for (price, quantity) in items {
            let (interval, count) = BillingPeriod.recurrence(of: price)
            let periodEnd = trialEnd ?? BillingPeriod.advance(now, interval: interval, count: count)
            let itemID = ids.make("si_", length: 14)
            itemValues.append(
                SubscriptionObjects.item(
                    id: itemID, subscription: id, price: price, quantity: quantity, created: now, periodStart: now,
                    periodEnd: periodEnd))
            let product = productName(ofPrice: price, in: account)
            let unitAmount = price["unit_amount"]?.intValue ?? 0
            lines.append(
                InvoiceObjects.Line(
                    price: price, quantity: quantity, amount: trialEnd == nil ? unitAmount * quantity : 0,
                    description: trialEnd == nil
                        ? InvoiceObjects.lineDescription(quantity: quantity, product: product, price: price)
                        : "Trial period for \(product)",
                    subscriptionItem: itemID, periodStart: now, periodEnd: periodEnd))
        }
        var subscription = SubscriptionObjects.subscription(
            id: id, customer: customer, created: now, status: trialEnd == nil ? "active" : "trialing",
            items: itemValues,
            metadata: metadata, latestInvoice: invoiceID, defaultPaymentMethod: defaultPaymentMethod,
            trial: trialEnd.map { now...$0 }, billingCycleAnchor: trialEnd ?? now)
        if cancelAtPeriodEnd {
            subscription["cancel_at_period_end"] = true
            subscription["cancel_at"] = JSONValue(SubscriptionObjects.periodEnd(of: subscription))
        }
        let stored = saveAndEmit(
            "customer.subscription.created", subscription, as: .subscription, in: account, origin: origin)
        let invoice = try billInvoice(
            customer: customer, subscription: (id, JSONValue(metadata)), lines: lines, periodStart: now, periodEnd: now,
            billingReason: "subscription_create", id: invoiceID, in: account, origin: origin)
        return (stored, invoice)
    }

    /// Cancels now: `canceled`, `canceled_at`, `ended_at`, then `customer.subscription.deleted`.
    @discardableResult
    func cancelSubscription(
        _ id: String, reason: String = "cancellation_requested", in account: AccountState, origin: EventOrigin
    ) throws(StripeAPIError) -> StoredObject {
        let old = try existing(.subscription, id, in: account).value
        guard !["canceled", "incomplete_expired"].contains(old["status"]?.stringValue ?? "") else {
            throw .noSuch(.subscription, id)
        }
        let now = clock.now
        var subscription = old
        subscription["status"] = "canceled"
        subscription["canceled_at"] = .int(now)
        subscription["ended_at"] = .int(now)
        subscription["cancel_at_period_end"] = false
        subscription["cancellation_details"]?["reason"] = .string(reason)
        return saveAndEmit(
            "customer.subscription.deleted", subscription, as: .subscription, in: account, origin: origin)
    }

    /// Starts the next period of every item and bills it (`subscription_cycle`); a failed payment
    /// leaves the subscription `past_due`. Ends instead a subscription set to cancel at period end.
    @discardableResult
    func renewSubscription(
        _ id: String, paymentSucceeds: Bool, in account: AccountState, origin: EventOrigin
    )
        throws(StripeAPIError) -> StoredObject
    {
        let old = try existing(.subscription, id, in: account).value
        guard let customer = expandableID(old["customer"]), old["status"]?.stringValue != "canceled" else {
            throw .invalidRequest("A canceled subscription cannot be renewed.")
        }
        if old["cancel_at_period_end"]?.boolValue == true {
            return try cancelSubscription(id, in: account, origin: origin)
        }
        let now = clock.now
        var subscription = old
        var lines: [InvoiceObjects.Line] = []
        var items = subscription[path: "items.data"]?.arrayValue ?? []
        for index in items.indices {
            let price = items[index]["price"] ?? [:]
            let (interval, count) = BillingPeriod.recurrence(of: price)
            let start = max(items[index]["current_period_end"]?.intValue ?? now, 0)
            let end = BillingPeriod.advance(start, interval: interval, count: count)
            items[index]["current_period_start"] = .int(start)
            items[index]["current_period_end"] = .int(end)
            let quantity = items[index]["quantity"]?.intValue ?? 1
            let product = productName(ofPrice: price, in: account)
            lines.append(
                InvoiceObjects.Line(
                    price: price, quantity: quantity, amount: (price["unit_amount"]?.intValue ?? 0) * quantity,
                    description: InvoiceObjects.lineDescription(quantity: quantity, product: product, price: price),
                    subscriptionItem: items[index]["id"]?.stringValue, periodStart: start, periodEnd: end))
        }
        subscription["items"]?["data"] = .array(items)
        let invoiceID = ids.make(.invoice)
        subscription["latest_invoice"] = .string(invoiceID)
        subscription["status"] = paymentSucceeds ? "active" : "past_due"
        if old["status"]?.stringValue == "trialing" { subscription["trial_end"] = .int(now) }
        let previousStart =
            (old[path: "items.data"]?.arrayValue ?? []).compactMap { $0["current_period_start"]?.intValue }.min() ?? now
        try billInvoice(
            customer: customer, subscription: (id, old["metadata"] ?? [:]), lines: lines, periodStart: previousStart,
            periodEnd: now, billingReason: "subscription_cycle", paid: paymentSucceeds, id: invoiceID, in: account,
            origin: origin)
        return saveAndEmit(
            "customer.subscription.updated", subscription, as: .subscription, old: old, in: account, origin: origin)
    }

    // MARK: API

    func createSubscription(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(Self.subscriptionCreateParameters)
        let account = account(request.account)
        let customer = try form.requiredString("customer")
        _ = try existing(.customer, customer, in: account, param: "customer")
        guard let itemForms = try form.objects("items"), !itemForms.isEmpty else { throw .missingParameter("items") }
        var items: [(price: JSONValue, quantity: Int64)] = []
        for item in itemForms {
            try item.allowOnly(Self.subscriptionItemParameters)
            let price = try subscribablePrice(item.requiredString("price"), in: account, param: item.name("price"))
            let quantity = try item.integer("quantity") ?? 1
            guard quantity >= 0 else {
                throw .invalidRequest("Invalid quantity: must be non-negative", param: item.name("quantity"))
            }
            if items.contains(where: { $0.price["id"] == price["id"] }) {
                throw .invalidRequest(
                    "Cannot add multiple subscription items with the same price: \(price["id"]?.stringValue ?? "").",
                    param: item.name("price"))
            }
            items.append((price, quantity))
        }
        let trialDays = try form.integer("trial_period_days")
        if let trialDays, !(0...730).contains(trialDays) {
            throw .invalidRequest("Invalid trial_period_days: must be between 0 and 730", param: "trial_period_days")
        }
        var metadata: [String: String] = [:]
        if case .set(let entries) = try form.metadata() { metadata = entries.compactMapValues { $0 } }
        let paymentMethod = try form.string("default_payment_method")
        if let paymentMethod {
            _ = try existing(.paymentMethod, paymentMethod, in: account, param: "default_payment_method")
        }
        let created = try createSubscription(
            customer: customer, items: items, trialDays: trialDays, metadata: metadata,
            defaultPaymentMethod: paymentMethod, cancelAtPeriodEnd: try form.boolean("cancel_at_period_end") ?? false,
            in: account, origin: request.origin)
        return try respond(with: created.subscription, to: request, in: account)
    }

    func retrieveSubscription(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        return try respond(with: existing(.subscription, request.id, in: account), to: request, in: account)
    }

    func updateSubscription(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(Self.subscriptionUpdateParameters)
        let account = account(request.account)
        let old = try existing(.subscription, request.id, in: account).value
        var subscription = old
        if old["status"]?.stringValue == "canceled",
            let other = form.members.keys.sorted().first(where: {
                !["metadata", "cancellation_details", "expand"].contains($0)
            })
        {
            throw .invalidRequest(
                "A canceled subscription can only update its cancellation_details and metadata.", param: other)
        }
        if let change = try form.metadata() { subscription["metadata"] = change.applied(to: subscription["metadata"]) }
        if let details = try form.object("cancellation_details") {
            try details.allowOnly(["comment", "feedback"])
            if let comment = try details.clearableString("comment") {
                subscription["cancellation_details"]?["comment"] = JSONValue(comment)
            }
            if let feedback = try details.clearableString("feedback") {
                subscription["cancellation_details"]?["feedback"] = JSONValue(feedback)
            }
        }
        if let description = try form.clearableString("description") {
            subscription["description"] = JSONValue(description)
        }
        if let paymentMethod = try form.clearableString("default_payment_method") {
            if let paymentMethod {
                _ = try existing(.paymentMethod, paymentMethod, in: account, param: "default_payment_method")
            }
            subscription["default_payment_method"] = JSONValue(paymentMethod)
        }
        if let itemForms = try form.objects("items") {
            try changeItems(of: &subscription, with: itemForms, in: account)
        }
        if let cancelAtPeriodEnd = try form.boolean("cancel_at_period_end") {
            subscription["cancel_at_period_end"] = .bool(cancelAtPeriodEnd)
            subscription["cancel_at"] =
                cancelAtPeriodEnd ? JSONValue(SubscriptionObjects.periodEnd(of: subscription)) : .null
            subscription["cancellation_details"]?["reason"] = cancelAtPeriodEnd ? "cancellation_requested" : nil
        }
        if let cancelAt = try form.clearableString("cancel_at") {
            guard let cancelAt else {
                subscription["cancel_at"] = .null
                return try saveUpdatedSubscription(subscription, old: old, request: request, in: account)
            }
            guard let time = Int64(cancelAt) else { throw .invalidInteger("cancel_at", cancelAt) }
            subscription["cancel_at"] = .int(time)
        }
        return try saveUpdatedSubscription(subscription, old: old, request: request, in: account)
    }

    private func saveUpdatedSubscription(
        _ subscription: JSONValue, old: JSONValue, request: APIRequest, in account: AccountState
    )
        throws(StripeAPIError) -> APIResponse
    {
        guard subscription != old else {
            return try respond(with: existing(.subscription, request.id, in: account), to: request, in: account)
        }
        let stored = saveAndEmit(
            "customer.subscription.updated", subscription, as: .subscription, old: old, in: account,
            origin: request.origin)
        return try respond(with: stored, to: request, in: account)
    }

    /// `items[i][id]` + `price`/`quantity` changes an item, `items[i][id]` + `deleted` removes one,
    /// `items[i][price]` alone adds one. Periods stay as they are (no proration in the fake).
    private func changeItems(
        of subscription: inout JSONValue, with itemForms: [FormParameters], in account: AccountState
    )
        throws(StripeAPIError)
    {
        var items = subscription[path: "items.data"]?.arrayValue ?? []
        let subscriptionID = subscription["id"]?.stringValue ?? ""
        let now = clock.now
        for item in itemForms {
            try item.allowOnly(Self.subscriptionItemParameters)
            let price = try item.string("price").map { id throws(StripeAPIError) in
                try subscribablePrice(id, in: account, param: item.name("price"))
            }
            let quantity = try item.integer("quantity")
            if let itemID = try item.string("id") {
                guard let index = items.firstIndex(where: { $0["id"]?.stringValue == itemID }) else {
                    throw .invalidRequest(
                        "No such subscription item: '\(itemID)'", param: item.name("id"), code: "resource_missing")
                }
                if try item.boolean("deleted") == true {
                    items.remove(at: index)
                    continue
                }
                if let price {
                    items[index]["price"] = price
                    items[index]["plan"] = CatalogObjects.plan(from: price)
                }
                if let quantity { items[index]["quantity"] = .int(quantity) }
            } else {
                guard let price else { throw .missingParameter(item.name("price")) }
                if items.contains(where: { $0[path: "price.id"] == price["id"] }) {
                    throw .invalidRequest(
                        "Cannot add multiple subscription items with the same price: \(price["id"]?.stringValue ?? "").",
                        param: item.name("price"))
                }
                let start = items.first?["current_period_start"]?.intValue ?? now
                let end = items.first?["current_period_end"]?.intValue ?? now
                items.append(
                    SubscriptionObjects.item(
                        id: ids.make("si_", length: 14), subscription: subscriptionID, price: price,
                        quantity: quantity ?? 1, created: now, periodStart: start, periodEnd: end))
            }
        }
        guard !items.isEmpty else {
            throw .invalidRequest("A subscription must have at least one active plan.", param: "items")
        }
        subscription["items"]?["data"] = .array(items)
    }

    func cancelSubscription(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["cancellation_details", "invoice_now", "prorate"])
        let account = account(request.account)
        let subscription = try cancelSubscription(request.id, in: account, origin: request.origin)
        return try respond(with: subscription, to: request, in: account)
    }

    func listSubscriptions(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly([
            "automatic_tax", "collection_method", "created", "current_period_end", "current_period_start", "customer",
            "ending_before", "limit", "price", "starting_after", "status", "test_clock",
        ])
        let list = try ListParameters(form)
        let status = try form.oneOf("status", SubscriptionObjects.statuses)
        let customer = try form.string("customer")
        let price = try form.string("price")
        let collectionMethod = try form.oneOf("collection_method", ["charge_automatically", "send_invoice"])
        let account = account(request.account)
        let page = try account[.subscription].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore,
            scope: customer.map { .customer($0) } ?? .all, created: list.created ?? Int64.min...Int64.max
        ) { subscription in
            let current = subscription.fields.status ?? ""
            let statusMatches: Bool =
                switch status {
                case nil: !["canceled", "incomplete_expired"].contains(current)
                case "all": true
                case "ended": ["canceled", "incomplete_expired"].contains(current)
                case let wanted?: current == wanted
                }
            return statusMatches && (price == nil || subscription.fields.priceIDs.contains(price!))
                && (collectionMethod == nil || subscription.fields.collectionMethod == collectionMethod)
        }
        return try respond(with: page, url: ObjectKind.subscription.listURL, to: request, in: account)
    }
}
