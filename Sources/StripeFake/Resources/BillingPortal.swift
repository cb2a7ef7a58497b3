/// `POST /v1/billing_portal/sessions`: a Customer Portal link for an existing customer.
extension FakeStore {
    func createBillingPortalSession(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly([
            "configuration", "customer", "customer_account", "flow_data", "locale", "on_behalf_of", "return_url",
        ])
        let account = account(request.account)
        let customer = try form.requiredString("customer")
        _ = try existing(.customer, customer, in: account, param: "customer")
        let configuration = try form.string("configuration") ?? "bpc_1FakePortalConfiguration0"
        guard configuration.hasPrefix("bpc_") else {
            throw .invalidRequest(
                "No such configuration: '\(configuration)'", param: "configuration", code: "resource_missing")
        }
        let id = ids.make("bps_1", length: 23)
        let session: JSONValue = [
            "id": .string(id), "object": "billing_portal.session", "configuration": .string(configuration),
            "created": .int(clock.now), "customer": .string(customer), "customer_account": nil, "flow": nil,
            "livemode": false, "locale": JSONValue(try form.string("locale")), "on_behalf_of": nil,
            "return_url": JSONValue(try form.string("return_url")),
            "url": .string(hostedPagesBase.map { "\($0)/hosted/portal/\(id)" } ?? "https://billing.stripe.com/p/session/test_\(id.dropFirst(5))"),
        ]
        if let returnURL = try form.string("return_url") { portalReturnURLs[id] = returnURL }
        let bytes = session.serialized()
        emit("billing_portal.session.created", object: bytes, in: account, origin: request.origin)
        return APIResponse(bytes: bytes)
    }
}
