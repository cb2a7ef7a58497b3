/// Products and prices: `GET /v1/prices`, `/v1/prices/:id`, `/v1/products`, `/v1/products/:id`,
/// and the helpers that create and change them with `product.*` / `price.*` events.
enum CatalogObjects {
    static func product(
        id: String, name: String, description: String?, metadata: [String: String], active: Bool, created: Int64
    )
        -> JSONValue
    {
        var product = ObjectTemplates.product
        product["id"] = .string(id)
        product["name"] = .string(name)
        product["description"] = JSONValue(description)
        product["metadata"] = JSONValue(metadata)
        product["active"] = .bool(active)
        product["created"] = .int(created)
        product["updated"] = .int(created)
        product["default_price"] = .null
        product["marketing_features"] = []
        product["statement_descriptor"] = .null
        product["unit_label"] = .null
        product["livemode"] = false
        return product
    }

    /// A price; `interval` nil makes a one-time price.
    static func price(
        id: String, product: String, unitAmount: Int64, currency: String, interval: String?, intervalCount: Int64,
        lookupKey: String?, nickname: String?, metadata: [String: String], active: Bool, created: Int64
    ) -> JSONValue {
        var price = ObjectTemplates.price
        price["id"] = .string(id)
        price["product"] = .string(product)
        price["unit_amount"] = .int(unitAmount)
        price["unit_amount_decimal"] = .string(String(unitAmount))
        price["currency"] = .string(currency)
        price["lookup_key"] = JSONValue(lookupKey)
        price["nickname"] = JSONValue(nickname)
        price["metadata"] = JSONValue(metadata)
        price["active"] = .bool(active)
        price["created"] = .int(created)
        price["livemode"] = false
        if let interval {
            price["type"] = "recurring"
            price["recurring"] = [
                "interval": .string(interval), "interval_count": .int(intervalCount), "meter": nil,
                "trial_period_days": nil, "usage_type": "licensed",
            ]
        } else {
            price["type"] = "one_time"
            price["recurring"] = .null
        }
        return price
    }

    /// The legacy `plan` Stripe still puts beside `price` on a subscription item.
    static func plan(from price: JSONValue) -> JSONValue {
        let (interval, count) = BillingPeriod.recurrence(of: price)
        return [
            "active": price["active"] ?? true, "amount": price["unit_amount"] ?? nil,
            "amount_decimal": price["unit_amount_decimal"] ?? nil, "billing_scheme": "per_unit",
            "created": price["created"] ?? nil, "currency": price["currency"] ?? "usd", "id": price["id"] ?? nil,
            "interval": .string(interval), "interval_count": .int(count), "livemode": false,
            "metadata": price["metadata"] ?? [:], "meter": nil, "nickname": price["nickname"] ?? nil, "object": "plan",
            "product": price["product"] ?? nil, "tiers_mode": nil, "transform_usage": nil, "trial_period_days": nil,
            "usage_type": "licensed",
        ]
    }
}

extension FakeStore {
    // MARK: Helpers

    @discardableResult
    func createProduct(
        name: String, description: String? = nil, metadata: [String: String] = [:], active: Bool = true,
        in account: AccountState, origin: EventOrigin = .automatic
    ) -> StoredObject {
        let product = CatalogObjects.product(
            id: ids.make(.product), name: name, description: description, metadata: metadata, active: active,
            created: clock.now)
        return saveAndEmit("product.created", product, as: .product, in: account, origin: origin)
    }

    @discardableResult
    func createPrice(
        product: String, unitAmount: Int64, currency: String = "usd", interval: String? = "month",
        intervalCount: Int64 = 1, lookupKey: String? = nil, nickname: String? = nil, metadata: [String: String] = [:],
        active: Bool = true, in account: AccountState, origin: EventOrigin = .automatic
    ) throws(StripeAPIError) -> StoredObject {
        _ = try existing(.product, product, in: account, param: "product")
        if let lookupKey, account[.price].all(matching: { $0.fields.lookupKey == lookupKey }).first != nil {
            throw .invalidRequest(
                "A price (\(lookupKey)) already uses that lookup key.", param: "lookup_key")
        }
        let price = CatalogObjects.price(
            id: ids.make(.price), product: product, unitAmount: unitAmount, currency: currency, interval: interval,
            intervalCount: intervalCount, lookupKey: lookupKey, nickname: nickname, metadata: metadata, active: active,
            created: clock.now)
        return saveAndEmit("price.created", price, as: .price, in: account, origin: origin)
    }

    /// The product name of a price, for invoice line descriptions.
    func productName(ofPrice price: JSONValue, in account: AccountState) -> String {
        if let product = expandableID(price["product"]), let stored = account[.product][product],
            let name = stored.value["name"]?.stringValue
        {
            return name
        }
        return price["nickname"]?.stringValue ?? "Subscription"
    }

    // MARK: API

    func listPrices(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly([
            "active", "created", "currency", "ending_before", "limit", "lookup_keys", "product", "recurring",
            "starting_after", "type",
        ])
        let list = try ListParameters(form)
        let active = try form.boolean("active")
        let lookupKeys = try form.strings("lookup_keys").map(Set.init)
        if let lookupKeys, lookupKeys.count > 10 {
            throw .invalidRequest("You may only specify up to 10 lookup keys.", param: "lookup_keys")
        }
        let product = try form.string("product")
        let type = try form.oneOf("type", ["one_time", "recurring"])
        let currency = try form.string("currency")
        let account = account(request.account)
        let page = try account[.price].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore,
            created: list.created ?? Int64.min...Int64.max
        ) { price in
            (active == nil || price.fields.active == active)
                && (lookupKeys == nil || price.fields.lookupKey.map { lookupKeys!.contains($0) } == true)
                && (product == nil || price.fields.product == product)
                && (type == nil || price.fields.type == type)
                && (currency == nil || price.value["currency"]?.stringValue == currency)
        }
        return try respond(with: page, url: ObjectKind.price.listURL, to: request, in: account)
    }

    func retrievePrice(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        return try respond(with: existing(.price, request.id, in: account), to: request, in: account)
    }

    func listProducts(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["active", "created", "ending_before", "ids", "limit", "shippable", "starting_after", "url"])
        let list = try ListParameters(form)
        let active = try form.boolean("active")
        let ids = try form.strings("ids").map(Set.init)
        let account = account(request.account)
        let page = try account[.product].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore,
            created: list.created ?? Int64.min...Int64.max
        ) { product in
            (active == nil || product.fields.active == active) && (ids == nil || ids!.contains(product.id))
        }
        return try respond(with: page, url: ObjectKind.product.listURL, to: request, in: account)
    }

    func retrieveProduct(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        return try respond(with: existing(.product, request.id, in: account), to: request, in: account)
    }
}
