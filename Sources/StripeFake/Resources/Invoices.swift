/// Invoices: list and retrieve (2025+ shape: `parent.subscription_details.subscription`, lines with
/// `parent.subscription_item_details` and `pricing.price_details`), and the draft → open → paid
/// steps that subscriptions drive.
enum InvoiceObjects {
    /// One line to bill.
    struct Line {
        var price: JSONValue
        var quantity: Int64
        var amount: Int64
        var description: String
        var subscriptionItem: String?
        var periodStart: Int64
        var periodEnd: Int64
    }

    /// A draft invoice of `lines` for `customer` (the customer object, for its e-mail and name).
    static func draft(
        id: String, customer: JSONValue, subscription: (id: String, metadata: JSONValue)?, lines: [Line],
        lineIDs: [String], created: Int64, periodStart: Int64, periodEnd: Int64, billingReason: String,
        template: JSONValue = ObjectTemplates.invoice
    ) -> JSONValue {
        var invoice = template
        let total = lines.reduce(0) { $0 + $1.amount }
        let currency = lines.first?.price["currency"] ?? "usd"
        invoice["id"] = .string(id)
        invoice["created"] = .int(created)
        invoice["currency"] = currency
        invoice["customer"] = customer["id"] ?? nil
        invoice["customer_email"] = customer["email"] ?? nil
        invoice["customer_name"] = customer["name"] ?? nil
        if invoice["customer_phone"] != nil { invoice["customer_phone"] = customer["phone"] ?? nil }
        if invoice["customer_address"] != nil { invoice["customer_address"] = customer["address"] ?? nil }
        if invoice["account_name"] != nil { invoice["account_name"] = "Fake Stripe Account" }
        invoice["billing_reason"] = .string(billingReason)
        invoice["period_start"] = .int(periodStart)
        invoice["period_end"] = .int(periodEnd)
        invoice["discounts"] = []
        invoice["total_discount_amounts"] = []
        if invoice["total_pretax_credit_amounts"] != nil { invoice["total_pretax_credit_amounts"] = [] }
        invoice["total_taxes"] = []
        invoice["metadata"] = [:]
        invoice["livemode"] = false
        for key in ["subtotal", "subtotal_excluding_tax", "total", "total_excluding_tax", "amount_due"] {
            invoice[key] = .int(total)
        }
        invoice["amount_paid"] = 0
        invoice["amount_remaining"] = .int(total)
        if invoice["subscription"] != nil { invoice["subscription"] = .null }  // gone since 2025, null when present
        if let subscription {
            invoice["parent"] = [
                "quote_details": nil,
                "subscription_details": ["metadata": subscription.metadata, "subscription": .string(subscription.id)],
                "type": "subscription_details",
            ]
        } else {
            invoice["parent"] = .null
        }
        invoice["lines"] = [
            "data": .array(zip(lines, lineIDs).map { line($0, id: $1, invoice: id, subscription: subscription?.id) }),
            "has_more": false, "object": "list", "url": .string("/v1/invoices/\(id)/lines"),
        ]
        // Not finalized yet: no number, no hosted page, nothing attempted.
        invoice["status"] = "draft"
        invoice["auto_advance"] = true
        invoice["number"] = .null
        if invoice["receipt_number"] != nil { invoice["receipt_number"] = .null }
        invoice["hosted_invoice_url"] = .null
        invoice["invoice_pdf"] = .null
        invoice["effective_at"] = .null
        invoice["ending_balance"] = .null
        invoice["attempted"] = false
        invoice["attempt_count"] = 0
        invoice["webhooks_delivered_at"] = .null
        invoice["status_transitions"] = [
            "finalized_at": nil, "marked_uncollectible_at": nil, "paid_at": nil, "voided_at": nil,
        ]
        return invoice
    }

    private static func line(_ line: Line, id: String, invoice: String, subscription: String?) -> JSONValue {
        var value = ObjectTemplates.invoiceLine
        value["id"] = .string(id)
        value["invoice"] = .string(invoice)
        value["amount"] = .int(line.amount)
        value["subtotal"] = .int(line.amount)
        value["currency"] = line.price["currency"] ?? "usd"
        value["description"] = .string(line.description)
        value["quantity"] = .int(line.quantity)
        value["quantity_decimal"] = .string(String(line.quantity))
        value["discount_amounts"] = []
        value["discounts"] = []
        value["pretax_credit_amounts"] = []
        value["taxes"] = []
        value["metadata"] = [:]
        value["livemode"] = false
        value["period"] = ["end": .int(line.periodEnd), "start": .int(line.periodStart)]
        value["pricing"] = [
            "price_details": ["price": line.price["id"] ?? nil, "product": line.price["product"] ?? nil],
            "type": "price_details", "unit_amount_decimal": line.price["unit_amount_decimal"] ?? nil,
        ]
        if let subscription, let item = line.subscriptionItem {
            value["parent"] = [
                "invoice_item_details": nil,
                "subscription_item_details": [
                    "invoice_item": nil, "proration": false, "proration_details": ["credited_items": nil],
                    "subscription": .string(subscription), "subscription_item": .string(item),
                ],
                "type": "subscription_item_details",
            ]
        } else {
            value["parent"] = [
                "invoice_item_details": [
                    "invoice_item": .string("ii_" + id.dropFirst(3)), "proration": false,
                    "proration_details": ["credited_items": nil], "subscription": nil,
                ],
                "subscription_item_details": nil, "type": "invoice_item_details",
            ]
        }
        return value
    }

    /// Draft → open: numbered, with a hosted page, finalized at `time`.
    static func finalize(_ invoice: inout JSONValue, number: String, at time: Int64) {
        let id = invoice["id"]?.stringValue ?? ""
        let secret = "test_" + id.dropFirst(3) + "0200fake"
        invoice["status"] = "open"
        invoice["number"] = .string(number)
        invoice["hosted_invoice_url"] = .string("https://invoice.stripe.com/i/acct_1FakeStripeAcct0/\(secret)?s=ap")
        invoice["invoice_pdf"] = .string("https://pay.stripe.com/invoice/acct_1FakeStripeAcct0/\(secret)/pdf?s=ap")
        invoice["effective_at"] = .int(time)
        invoice["ending_balance"] = 0
        invoice["auto_advance"] = false
        invoice["status_transitions"]?["finalized_at"] = .int(time)
    }

    /// Open → paid at `time`.
    static func markPaid(_ invoice: inout JSONValue, at time: Int64) {
        let due = invoice["amount_due"]?.intValue ?? 0
        invoice["status"] = "paid"
        invoice["amount_paid"] = .int(due)
        invoice["amount_remaining"] = 0
        invoice["attempted"] = true
        invoice["attempt_count"] = due > 0 ? 1 : 0
        invoice["status_transitions"]?["paid_at"] = .int(time)
    }

    /// Open, after a failed charge: attempted, retried in three days.
    static func markPaymentFailed(_ invoice: inout JSONValue, at time: Int64) {
        invoice["attempted"] = true
        invoice["attempt_count"] = .int((invoice["attempt_count"]?.intValue ?? 0) + 1)
        invoice["next_payment_attempt"] = .int(time + 3 * 86_400)
    }

    /// A subscription line as Stripe words it: `1 × Pro (at $20.00 / month)`.
    static func lineDescription(quantity: Int64, product: String, price: JSONValue) -> String {
        let amount = BillingPeriod.formatted(
            price["unit_amount"]?.intValue ?? 0, currency: price["currency"]?.stringValue ?? "usd")
        return "\(quantity) × \(product) (at \(amount) / \(BillingPeriod.recurrence(of: price).interval))"
    }

    /// `TQW7MZ2X-0001`: the customer's prefix and its invoice sequence.
    static func number(prefix: String, sequence: Int) -> String {
        let digits = String(sequence)
        return prefix + "-" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

extension FakeStore {
    // MARK: Helpers

    /// Bills `lines` to a customer: the invoice goes draft → open → paid (or stays open after a
    /// failed payment), with `invoice.created`, `invoice.finalized`, then `invoice.paid` and
    /// `invoice.payment_succeeded` (or `invoice.payment_failed`).
    @discardableResult
    func billInvoice(
        customer: String, subscription: (id: String, metadata: JSONValue)?, lines: [InvoiceObjects.Line],
        periodStart: Int64, periodEnd: Int64, billingReason: String, paid: Bool = true, id: String? = nil,
        in account: AccountState, origin: EventOrigin
    ) throws(StripeAPIError) -> StoredObject {
        let owner = try existing(.customer, customer, in: account, param: "customer").value
        let now = clock.now
        var invoice = InvoiceObjects.draft(
            id: id ?? ids.make(.invoice), customer: owner, subscription: subscription, lines: lines,
            lineIDs: lines.map { _ in ids.make("il_1", length: 23) }, created: now, periodStart: periodStart,
            periodEnd: periodEnd, billingReason: billingReason)
        saveAndEmit("invoice.created", invoice, as: .invoice, in: account, origin: origin)

        let prefix = owner["invoice_prefix"]?.stringValue ?? CustomerObjects.invoicePrefix(forCustomer: customer)
        let sequence = account[.invoice].count(in: .customer(customer))
        InvoiceObjects.finalize(&invoice, number: InvoiceObjects.number(prefix: prefix, sequence: sequence), at: now)
        var stored = saveAndEmit("invoice.finalized", invoice, as: .invoice, in: account, origin: origin)

        let old = invoice
        if paid {
            InvoiceObjects.markPaid(&invoice, at: now)
            stored = saveAndEmit("invoice.paid", invoice, as: .invoice, old: old, in: account, origin: origin)
            emit("invoice.payment_succeeded", object: stored.json, in: account, origin: origin)
        } else {
            InvoiceObjects.markPaymentFailed(&invoice, at: now)
            stored = saveAndEmit("invoice.payment_failed", invoice, as: .invoice, old: old, in: account, origin: origin)
        }
        return stored
    }

    // MARK: API

    func listInvoices(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly([
            "collection_method", "created", "customer", "due_date", "ending_before", "limit", "starting_after",
            "status",
            "subscription",
        ])
        let list = try ListParameters(form)
        let status = try form.oneOf("status", ["draft", "open", "paid", "uncollectible", "void"])
        let collectionMethod = try form.oneOf("collection_method", ["charge_automatically", "send_invoice"])
        let customer = try form.string("customer")
        let subscription = try form.string("subscription")
        let account = account(request.account)
        let scope: ListScope =
            if let subscription { .subscription(subscription) } else if let customer { .customer(customer) } else {
                .all
            }
        let page = try account[.invoice].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore, scope: scope,
            created: list.created ?? Int64.min...Int64.max
        ) { invoice in
            (status == nil || invoice.fields.status == status)
                && (customer == nil || invoice.fields.customer == customer)
                && (collectionMethod == nil || invoice.fields.collectionMethod == collectionMethod)
        }
        return try respond(with: page, url: ObjectKind.invoice.listURL, to: request, in: account)
    }

    func retrieveInvoice(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        return try respond(with: existing(.invoice, request.id, in: account), to: request, in: account)
    }
}
