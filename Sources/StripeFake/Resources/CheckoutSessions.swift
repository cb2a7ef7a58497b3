/// Checkout Sessions: create (validated as Stripe does), retrieve, list, line items, expire; and
/// `completeCheckout`, which does what a buyer paying on the hosted page makes Stripe do.
enum CheckoutObjects {
    /// What a session sells; Stripe shows it only through `line_items`, so it is kept beside the session.
    struct Order {
        var lineItems: [(price: JSONValue, quantity: Int64)]
        var trialDays: Int64?
        var subscriptionMetadata: [String: String]
    }

    static func lineItems(of order: Order, session: String) -> JSONValue {
        let items: [JSONValue] = order.lineItems.enumerated().map { index, item in
            let amount = (item.price["unit_amount"]?.intValue ?? 0) * item.quantity
            return [
                "id": .string("li_1\(session.suffix(20))\(index)"),
                "object": "item", "amount_discount": 0, "amount_subtotal": .int(amount), "amount_tax": 0,
                "amount_total": .int(amount), "currency": item.price["currency"] ?? "usd",
                "description": item.price["nickname"] ?? nil, "price": item.price, "quantity": .int(item.quantity),
            ]
        }
        return [
            "object": "list", "data": .array(items), "has_more": false,
            "url": .string("/v1/checkout/sessions/\(session)/line_items"),
        ]
    }
}

extension FakeStore {
    private static let checkoutCreateParameters: Set<String> = [
        "adaptive_pricing", "after_expiration", "allow_promotion_codes", "automatic_tax", "billing_address_collection",
        "branding_settings", "cancel_url", "client_reference_id", "consent_collection", "currency", "custom_fields",
        "custom_text", "customer", "customer_account", "customer_creation", "customer_email", "customer_update",
        "discounts", "excluded_payment_method_types", "expires_at", "invoice_creation", "line_items", "locale",
        "metadata", "mode", "name_collection", "optional_items", "origin_context", "payment_intent_data",
        "payment_method_collection", "payment_method_configuration", "payment_method_data", "payment_method_options",
        "payment_method_types", "permissions", "phone_number_collection", "redirect_on_completion", "return_url",
        "saved_payment_method_options", "setup_intent_data", "shipping_address_collection", "shipping_options",
        "submit_type", "subscription_data", "success_url", "tax_id_collection", "ui_mode", "wallet_options",
    ]

    // MARK: API

    func createCheckoutSession(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(Self.checkoutCreateParameters)
        let account = account(request.account)
        let now = clock.now

        guard let mode = try form.oneOf("mode", ["payment", "setup", "subscription"]) else {
            throw .missingParameter("mode")
        }
        let uiMode = try form.oneOf("ui_mode", ["hosted", "embedded", "custom"]) ?? "hosted"
        let successURL = try form.string("success_url")
        let cancelURL = try form.string("cancel_url")
        let returnURL = try form.string("return_url")
        if uiMode == "hosted" {
            guard let successURL, !successURL.isEmpty else { throw .missingParameter("success_url") }
            if returnURL != nil {
                throw .invalidRequest(
                    "You may only specify `return_url` when `ui_mode` is `embedded` or `custom`.", param: "return_url")
            }
        } else {
            if successURL != nil {
                throw .invalidRequest(
                    "You may not specify `success_url` when `ui_mode` is `\(uiMode)`.", param: "success_url")
            }
            if cancelURL != nil {
                throw .invalidRequest(
                    "You may not specify `cancel_url` when `ui_mode` is `\(uiMode)`.", param: "cancel_url")
            }
            if try form.string("redirect_on_completion") != "never", returnURL == nil {
                throw .missingParameter("return_url")
            }
        }

        let customer = try form.string("customer")
        let customerEmail = try form.string("customer_email")
        if customer != nil, customerEmail != nil { throw .exclusive(["customer", "customer_email"]) }
        if let customer { _ = try existing(.customer, customer, in: account, param: "customer") }

        var order = CheckoutObjects.Order(lineItems: [], trialDays: nil, subscriptionMetadata: [:])
        let lineItemForms = try form.objects("line_items") ?? []
        if mode != "setup", lineItemForms.isEmpty { throw .missingParameter("line_items") }
        for item in lineItemForms {
            try item.allowOnly([
                "adjustable_quantity", "dynamic_tax_rates", "price", "price_data", "quantity", "tax_rates",
            ])
            if item.has("price_data") {
                throw .invalidRequest(
                    "The fake reads line items with `price` only, not `price_data`.", param: item.name("price_data"))
            }
            let priceID = try item.requiredString("price")
            let price = try existing(.price, priceID, in: account, param: item.name("price"))
            guard price.fields.active != false else {
                throw .invalidRequest(
                    "The price specified is inactive. This field only accepts active prices.", param: item.name("price")
                )
            }
            guard let quantity = try item.integer("quantity") else {
                throw .invalidRequest(
                    "Quantity is required. Add `quantity` to `\(item.prefix)`", param: item.name("quantity"))
            }
            guard quantity >= 1 else {
                throw .invalidRequest("This value must be greater than or equal to 1.", param: item.name("quantity"))
            }
            if mode == "payment", price.fields.type == "recurring" {
                throw .invalidRequest(
                    "You specified `payment` mode but passed a recurring price. Either switch to `subscription` mode or use only one-time prices.",
                    param: item.name("price"))
            }
            order.lineItems.append((price.value, quantity))
        }
        if mode == "subscription", !order.lineItems.contains(where: { $0.price["type"]?.stringValue == "recurring" }) {
            throw .invalidRequest(
                "You must provide at least one recurring price in `subscription` mode when using prices.",
                param: "line_items")
        }
        if let subscriptionData = try form.object("subscription_data") {
            guard mode == "subscription" else {
                throw .invalidRequest(
                    "You can only specify `subscription_data` in `subscription` mode.", param: "subscription_data")
            }
            try subscriptionData.allowOnly([
                "application_fee_percent", "billing_cycle_anchor", "billing_mode", "default_tax_rates", "description",
                "invoice_settings", "metadata", "on_behalf_of", "proration_behavior", "transfer_data", "trial_end",
                "trial_period_days", "trial_settings",
            ])
            if let days = try subscriptionData.integer("trial_period_days") {
                guard (1...730).contains(days) else {
                    throw .invalidRequest(
                        "The trial period must be between 1 and 730 days.",
                        param: subscriptionData.name("trial_period_days"))
                }
                order.trialDays = days
            }
            if case .set(let entries) = try subscriptionData.metadata() {
                order.subscriptionMetadata = entries.compactMapValues { $0 }
            }
        }

        let expiresAt = try form.integer("expires_at") ?? now + 24 * 3600
        if expiresAt < now + 30 * 60 {
            throw .invalidRequest(
                "The `expires_at` timestamp must be at least 30 minutes from Checkout Session creation.",
                param: "expires_at")
        }
        if expiresAt > now + 24 * 3600 {
            throw .invalidRequest(
                "The `expires_at` timestamp must be less than 24 hours from Checkout Session creation.",
                param: "expires_at")
        }
        let clientReference = try form.string("client_reference_id")
        if let clientReference, clientReference.count > 200 {
            throw .invalidRequest("`client_reference_id` must be at most 200 characters.", param: "client_reference_id")
        }
        var metadata: [String: String] = [:]
        if case .set(let entries) = try form.metadata() { metadata = entries.compactMapValues { $0 } }

        let id = ids.make(.checkoutSession)
        let subtotal = order.lineItems.reduce(0) { $0 + ($1.price["unit_amount"]?.intValue ?? 0) * $1.quantity }
        let total = order.trialDays == nil ? subtotal : 0
        var session = ObjectTemplates.checkoutSession
        session["id"] = .string(id)
        session["created"] = .int(now)
        session["expires_at"] = .int(expiresAt)
        session["mode"] = .string(mode)
        session["ui_mode"] = .string(uiMode)
        session["status"] = "open"
        session["payment_status"] = "unpaid"
        session["success_url"] = JSONValue(successURL)
        session["cancel_url"] = JSONValue(cancelURL)
        session["return_url"] = JSONValue(returnURL)
        session["client_reference_id"] = JSONValue(clientReference)
        session["customer"] = JSONValue(customer)
        session["customer_email"] = JSONValue(customerEmail)
        session["customer_creation"] = customer == nil ? (mode == "payment" ? "if_required" : "always") : nil
        session["customer_details"] = .null
        session["metadata"] = JSONValue(metadata)
        session["allow_promotion_codes"] = try form.boolean("allow_promotion_codes").map { .bool($0) } ?? .null
        session["currency"] = order.lineItems.first?.price["currency"] ?? nil
        session["amount_subtotal"] = .int(subtotal)
        session["amount_total"] = .int(total)
        session["total_details"] = ["amount_discount": 0, "amount_shipping": 0, "amount_tax": 0]
        session["discounts"] = []
        session["invoice"] = .null
        session["subscription"] = .null
        session["payment_intent"] = .null
        session["livemode"] = false
        if uiMode == "hosted" {
            session["url"] = .string(
                hostedPagesBase.map { "\($0)/hosted/pay/\(id)" } ?? "https://checkout.stripe.com/c/pay/\(id)#fidkdWxOYHwnPyd1blpxYHZxWjA0fakefake")
            session["client_secret"] = .null
        } else {
            session["url"] = .null
            session["client_secret"] = .string("\(id)_secret_fake\(id.suffix(12))")
        }
        let stored = save(session, as: .checkoutSession, in: account)
        account.checkoutOrders[id] = order
        return try respond(with: stored, to: request, in: account)
    }

    func retrieveCheckoutSession(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        return try respond(with: existing(.checkoutSession, request.id, in: account), to: request, in: account)
    }

    func listCheckoutSessions(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly([
            "created", "customer", "customer_details", "ending_before", "limit", "payment_intent", "payment_link",
            "starting_after", "status", "subscription",
        ])
        let list = try ListParameters(form)
        let customer = try form.string("customer")
        let subscription = try form.string("subscription")
        let status = try form.oneOf("status", ["complete", "expired", "open"])
        let account = account(request.account)
        let page = try account[.checkoutSession].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore,
            scope: customer.map { .customer($0) } ?? .all, created: list.created ?? Int64.min...Int64.max
        ) { session in
            (subscription == nil || session.fields.subscription == subscription)
                && (status == nil || session.fields.status == status)
        }
        return try respond(with: page, url: ObjectKind.checkoutSession.listURL, to: request, in: account)
    }

    func listCheckoutLineItems(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["ending_before", "limit", "starting_after"])
        let account = account(request.account)
        _ = try existing(.checkoutSession, request.id, in: account)
        let order =
            account.checkoutOrders[request.id] ?? .init(lineItems: [], trialDays: nil, subscriptionMetadata: [:])
        return APIResponse(CheckoutObjects.lineItems(of: order, session: request.id))
    }

    func expireCheckoutSession(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        let session = try expireCheckoutSession(request.id, in: account, origin: request.origin)
        return try respond(with: session, to: request, in: account)
    }

    // MARK: Helpers

    @discardableResult
    func expireCheckoutSession(
        _ id: String, in account: AccountState, origin: EventOrigin
    ) throws(StripeAPIError)
        -> StoredObject
    {
        let old = try existing(.checkoutSession, id, in: account).value
        guard old["status"]?.stringValue == "open" else {
            throw .invalidRequest(
                "Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout Session has a status of \"\(old["status"]?.stringValue ?? "")\"."
            )
        }
        var session = old
        session["status"] = "expired"
        session["url"] = .null
        return saveAndEmit(
            "checkout.session.expired", session, as: .checkoutSession, old: old, in: account, origin: origin)
    }

    /// Does what a buyer completing the hosted page makes Stripe do: creates the customer if the
    /// session has none, attaches a card, creates the subscription and its paid invoice
    /// (subscription mode), then completes the session, with each of Stripe's events in order.
    @discardableResult
    func completeCheckout(
        _ id: String, email: String?, name: String?, in account: AccountState
    ) throws(StripeAPIError)
        -> StoredObject
    {
        let old = try existing(.checkoutSession, id, in: account).value
        guard old["status"]?.stringValue == "open" else {
            throw .invalidRequest(
                "The Checkout Session \(id) is \(old["status"]?.stringValue ?? "not open"), not open.")
        }
        let order = account.checkoutOrders[id] ?? .init(lineItems: [], trialDays: nil, subscriptionMetadata: [:])
        let mode = old["mode"]?.stringValue ?? "payment"
        let origin = EventOrigin.automatic
        var session = old

        var customerID = old["customer"]?.stringValue
        if customerID == nil, mode != "payment" || old["customer_creation"]?.stringValue == "always" {
            let buyerEmail =
                email ?? old["customer_email"]?.stringValue ?? "buyer+\(id.suffix(8).lowercased())@example.com"
            customerID = createCustomer(email: buyerEmail, name: name ?? "Test Buyer", in: account, origin: origin).id
        }
        let customer = customerID.flatMap { account[.customer][$0]?.value }
        let paymentMethod = try customerID.map { customer throws(StripeAPIError) in
            try createCardPaymentMethod(customer: customer, in: account, origin: origin).id
        }

        switch mode {
        case "subscription":
            guard let customerID else { break }
            let created = try createSubscription(
                customer: customerID, items: order.lineItems.filter { $0.price["type"]?.stringValue == "recurring" },
                trialDays: order.trialDays, metadata: order.subscriptionMetadata, defaultPaymentMethod: paymentMethod,
                in: account, origin: origin)
            session["subscription"] = .string(created.subscription.id)
            session["invoice"] = .string(created.invoice.id)
        case "payment":
            session["payment_intent"] = .string(ids.make("pi_1", length: 23))
        default:
            session["setup_intent"] = .string(ids.make("seti_1", length: 23))
        }
        let total = old["amount_total"]?.intValue ?? 0
        session["status"] = "complete"
        session["payment_status"] = mode == "setup" || total == 0 ? "no_payment_required" : "paid"
        session["url"] = .null
        session["customer"] = JSONValue(customerID)
        session["customer_details"] = [
            "address": [
                "city": nil, "country": "US", "line1": nil, "line2": nil, "postal_code": "94103", "state": nil,
            ],
            "business_name": nil, "email": customer?["email"] ?? JSONValue(email ?? old["customer_email"]?.stringValue),
            "individual_name": nil, "name": customer?["name"] ?? JSONValue(name), "phone": nil, "tax_exempt": "none",
            "tax_ids": [],
        ]
        return saveAndEmit(
            "checkout.session.completed", session, as: .checkoutSession, old: old, in: account, origin: origin)
    }
}
