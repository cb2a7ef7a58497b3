/// Payment methods: retrieve, attach, detach, and the helper that gives a customer a card.
enum PaymentMethodObjects {
    static func card(
        id: String, customer: String?, created: Int64, brand: String, last4: String, expMonth: Int64, expYear: Int64,
        email: String?, name: String?
    ) -> JSONValue {
        var method = ObjectTemplates.paymentMethod
        method["id"] = .string(id)
        method["customer"] = JSONValue(customer)
        method["created"] = .int(created)
        method["livemode"] = false
        method["metadata"] = [:]
        method["billing_details"] = [
            "address": ["city": nil, "country": nil, "line1": nil, "line2": nil, "postal_code": nil, "state": nil],
            "email": JSONValue(email), "name": JSONValue(name), "phone": nil, "tax_id": nil,
        ]
        var card = method["card"] ?? [:]
        card["brand"] = .string(brand)
        card["display_brand"] = .string(brand)
        card["last4"] = .string(last4)
        card["exp_month"] = .int(expMonth)
        card["exp_year"] = .int(expYear)
        card["networks"] = ["available": [.string(brand)], "preferred": nil]
        // A stable fingerprint per card number ending, as Stripe gives one per card number.
        card["fingerprint"] = .string(String("\(brand)\(last4)fp0000000000".prefix(16)))
        method["card"] = card
        return method
    }
}

extension FakeStore {
    // MARK: Helpers

    /// A card payment method attached to `customer` (`payment_method.attached`), optionally its default.
    @discardableResult
    func createCardPaymentMethod(
        customer: String, brand: String = "visa", last4: String = "4242", expMonth: Int64 = 12, expYear: Int64 = 2030,
        makeDefault: Bool = false, in account: AccountState, origin: EventOrigin = .automatic
    ) throws(StripeAPIError) -> StoredObject {
        let owner = try existing(.customer, customer, in: account, param: "customer").value
        let method = PaymentMethodObjects.card(
            id: ids.make(.paymentMethod), customer: customer, created: clock.now, brand: brand, last4: last4,
            expMonth: expMonth, expYear: expYear, email: owner["email"]?.stringValue, name: owner["name"]?.stringValue)
        let stored = saveAndEmit("payment_method.attached", method, as: .paymentMethod, in: account, origin: origin)
        if makeDefault { try setDefaultPaymentMethod(stored.id, of: customer, in: account, origin: origin) }
        return stored
    }

    @discardableResult
    func attachPaymentMethod(
        _ id: String, to customer: String, in account: AccountState, origin: EventOrigin
    )
        throws(StripeAPIError) -> StoredObject
    {
        let old = try existing(.paymentMethod, id, in: account).value
        _ = try existing(.customer, customer, in: account, param: "customer")
        if let current = expandableID(old["customer"]) {
            guard current == customer else {
                throw .invalidRequest(
                    "The payment method you provided has already been attached to a customer.", param: "customer")
            }
            return try existing(.paymentMethod, id, in: account)
        }
        var method = old
        method["customer"] = .string(customer)
        return saveAndEmit("payment_method.attached", method, as: .paymentMethod, old: old, in: account, origin: origin)
    }

    /// Detaches a payment method; a customer that had it as default loses it (`customer.updated`).
    @discardableResult
    func detachPaymentMethod(
        _ id: String, in account: AccountState, origin: EventOrigin
    ) throws(StripeAPIError)
        -> StoredObject
    {
        let old = try existing(.paymentMethod, id, in: account).value
        guard let customer = expandableID(old["customer"]) else {
            throw .invalidRequest(
                "The payment method you provided is not attached to a customer so detachment is impossible.")
        }
        var method = old
        method["customer"] = .null
        let stored = saveAndEmit(
            "payment_method.detached", method, as: .paymentMethod, old: old, in: account, origin: origin)
        if let owner = account[.customer][customer]?.value,
            owner[path: "invoice_settings.default_payment_method"]?.stringValue == id
        {
            var updated = owner
            updated["invoice_settings"]?["default_payment_method"] = .null
            saveAndEmit("customer.updated", updated, as: .customer, old: owner, in: account, origin: origin)
        }
        return stored
    }

    /// Sets `invoice_settings.default_payment_method` of a customer (`customer.updated`).
    @discardableResult
    func setDefaultPaymentMethod(
        _ id: String, of customer: String, in account: AccountState, origin: EventOrigin
    )
        throws(StripeAPIError) -> StoredObject
    {
        let old = try existing(.customer, customer, in: account).value
        _ = try existing(.paymentMethod, id, in: account, param: "invoice_settings[default_payment_method]")
        var updated = old
        updated["invoice_settings"]?["default_payment_method"] = .string(id)
        return saveAndEmit("customer.updated", updated, as: .customer, old: old, in: account, origin: origin)
    }

    // MARK: API

    func retrievePaymentMethod(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        return try respond(with: existing(.paymentMethod, request.id, in: account), to: request, in: account)
    }

    func attachPaymentMethod(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["customer", "customer_account"])
        let account = account(request.account)
        let customer = try form.requiredString("customer")
        let method = try attachPaymentMethod(request.id, to: customer, in: account, origin: request.origin)
        return try respond(with: method, to: request, in: account)
    }

    func detachPaymentMethod(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        let method = try detachPaymentMethod(request.id, in: account, origin: request.origin)
        return try respond(with: method, to: request, in: account)
    }
}
