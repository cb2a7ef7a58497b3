import Foundation

/// Customers: create, retrieve (a deleted one answers its stub), update, delete, list, search, and
/// the customer's payment methods.
enum CustomerObjects {
    static func customer(
        id: String, created: Int64, email: String?, name: String?, description: String?, phone: String?,
        metadata: [String: String]
    ) -> JSONValue {
        var customer = ObjectTemplates.customer
        customer["id"] = .string(id)
        customer["created"] = .int(created)
        customer["email"] = JSONValue(email)
        customer["name"] = JSONValue(name)
        customer["description"] = JSONValue(description)
        customer["phone"] = JSONValue(phone)
        customer["metadata"] = JSONValue(metadata)
        customer["address"] = .null
        customer["balance"] = 0
        customer["invoice_prefix"] = .string(invoicePrefix(forCustomer: id))
        customer["next_invoice_sequence"] = 1
        customer["preferred_locales"] = []
        customer["livemode"] = false
        var settings = customer["invoice_settings"] ?? [:]
        settings["default_payment_method"] = .null
        customer["invoice_settings"] = settings
        return customer
    }

    /// Stripe derives the invoice number prefix from the customer: 8 upper-case characters.
    static func invoicePrefix(forCustomer id: String) -> String {
        String(id.dropFirst("cus_".count).uppercased().filter { $0.isLetter || $0.isNumber }.suffix(8))
    }

    static func deletedStub(_ kind: ObjectKind, id: String) -> JSONValue {
        ["deleted": true, "id": .string(id), "object": .string(kind.rawValue)]
    }
}

extension FakeStore {
    /// The parameters Stripe accepts on create; those the fake does not model are accepted and ignored.
    private static let customerCreateParameters: Set<String> = [
        "address", "balance", "cash_balance", "coupon", "description", "email", "invoice_prefix", "invoice_settings",
        "metadata", "name", "next_invoice_sequence", "payment_method", "phone", "preferred_locales",
        "promotion_code", "shipping", "source", "tax", "tax_exempt", "tax_id_data", "test_clock",
    ]
    private static let customerUpdateParameters: Set<String> = [
        "address", "balance", "cash_balance", "coupon", "default_source", "description", "email", "invoice_prefix",
        "invoice_settings", "metadata", "name", "next_invoice_sequence", "phone", "preferred_locales",
        "promotion_code", "shipping", "source", "tax", "tax_exempt",
    ]

    // MARK: Helpers

    @discardableResult
    func createCustomer(
        email: String?, name: String?, description: String? = nil, phone: String? = nil,
        metadata: [String: String] = [:], in account: AccountState, origin: EventOrigin = .automatic
    ) -> StoredObject {
        let customer = CustomerObjects.customer(
            id: ids.make(.customer), created: clock.now, email: email, name: name, description: description,
            phone: phone, metadata: metadata)
        return saveAndEmit("customer.created", customer, as: .customer, in: account, origin: origin)
    }

    /// Deletes a customer as Stripe does: its subscriptions are canceled, then `customer.deleted`.
    func deleteCustomer(_ id: String, in account: AccountState, origin: EventOrigin) throws(StripeAPIError) {
        let customer = try existing(.customer, id, in: account)
        for subscription in account[.subscription].all(matching: { $0.fields.customer == id })
        where !["canceled", "incomplete_expired"].contains(subscription.fields.status ?? "") {
            try cancelSubscription(subscription.id, in: account, origin: origin)
        }
        account[.customer].remove(id)
        account.deletedStubs[id] = CustomerObjects.deletedStub(.customer, id: id).serialized()
        emit("customer.deleted", object: customer.json, in: account, origin: origin)
    }

    // MARK: API

    func createCustomer(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(Self.customerCreateParameters)
        let account = account(request.account)
        var metadata: [String: String] = [:]
        if case .set(let entries) = try form.metadata() { metadata = entries.compactMapValues { $0 } }
        let paymentMethod = try form.string("payment_method")
        if let paymentMethod { _ = try existing(.paymentMethod, paymentMethod, in: account, param: "payment_method") }
        let defaultPaymentMethod = try form.object("invoice_settings")?.string("default_payment_method")
        var customer = createCustomer(
            email: try form.string("email"), name: try form.string("name"), description: try form.string("description"),
            phone: try form.string("phone"), metadata: metadata, in: account, origin: request.origin)
        if let paymentMethod {
            try attachPaymentMethod(paymentMethod, to: customer.id, in: account, origin: request.origin)
        }
        if let defaultPaymentMethod {
            customer = try setDefaultPaymentMethod(
                defaultPaymentMethod, of: customer.id, in: account, origin: request.origin)
        }
        return try respond(with: customer, to: request, in: account)
    }

    func retrieveCustomer(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        if account[.customer][request.id] == nil, let stub = account.deletedStubs[request.id] {
            return APIResponse(bytes: stub)
        }
        return try respond(with: existing(.customer, request.id, in: account), to: request, in: account)
    }

    func updateCustomer(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(Self.customerUpdateParameters)
        let account = account(request.account)
        let old = try existing(.customer, request.id, in: account).value
        var customer = old
        for key in ["email", "name", "description", "phone"] {
            if let value = try form.clearableString(key) { customer[key] = JSONValue(value) }
        }
        if let change = try form.metadata() { customer["metadata"] = change.applied(to: customer["metadata"]) }
        if let settings = try form.object("invoice_settings"),
            let paymentMethod = try settings.clearableString("default_payment_method")
        {
            if let paymentMethod {
                let method = try existing(
                    .paymentMethod, paymentMethod, in: account, param: settings.name("default_payment_method"))
                guard method.fields.customer == request.id else {
                    throw .invalidRequest(
                        "The customer does not have a payment method with the ID \(paymentMethod). The payment method must be attached to the customer.",
                        param: settings.name("default_payment_method"))
                }
            }
            customer["invoice_settings"]?["default_payment_method"] = JSONValue(paymentMethod)
        }
        guard customer != old else {
            return try respond(with: existing(.customer, request.id, in: account), to: request, in: account)
        }
        let stored = saveAndEmit(
            "customer.updated", customer, as: .customer, old: old, in: account, origin: request.origin)
        return try respond(with: stored, to: request, in: account)
    }

    func deleteCustomer(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        try deleteCustomer(request.id, in: account, origin: request.origin)
        return APIResponse(CustomerObjects.deletedStub(.customer, id: request.id))
    }

    func listCustomers(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["created", "email", "ending_before", "limit", "starting_after", "test_clock"])
        let list = try ListParameters(form)
        let email = try form.string("email")
        let account = account(request.account)
        let page = try account[.customer].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore,
            created: list.created ?? Int64.min...Int64.max
        ) { customer in email == nil || customer.fields.email == email }
        return try respond(with: page, url: ObjectKind.customer.listURL, to: request, in: account)
    }

    /// `GET /v1/customers/search`: clauses `field:'value'` joined by ` AND ` or ` OR `, over
    /// `email`, `name`, `phone` and `metadata['key']`.
    func searchCustomers(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["limit", "page", "query"])
        let query = try form.requiredString("query")
        var limit = 10
        if let requested = try form.integer("limit") {
            guard (1...100).contains(requested) else {
                throw .invalidRequest("Invalid limit: must be between 1 and 100", param: "limit")
            }
            limit = Int(requested)
        }
        let matches = try CustomerSearchQuery(parsing: query)
        let account = account(request.account)
        var results = account[.customer].all(matching: matches.accepts)
        if let page = try form.string("page"), !page.isEmpty {
            guard let position = results.firstIndex(where: { $0.id == page }) else {
                throw .invalidRequest("Invalid page: \(page)", param: "page")
            }
            results.removeFirst(position + 1)
        }
        let hasMore = results.count > limit
        let data = results.prefix(limit)
        var body: [UInt8] = Array(#"{"object":"search_result","data":["#.utf8)
        for (index, customer) in data.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: customer.json)
        }
        body.append(contentsOf: #"],"has_more":\#(hasMore),"next_page":"#.utf8)
        JSONValue(hasMore ? data.last?.id : nil).write(into: &body)
        body.append(contentsOf: #","url":"/v1/customers/search"}"#.utf8)
        return APIResponse(bytes: body)
    }

    func listCustomerPaymentMethods(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["allow_redisplay", "ending_before", "limit", "starting_after", "type"])
        let list = try ListParameters(form)
        let type = try form.string("type")
        let account = account(request.account)
        _ = try existing(.customer, request.id, in: account)
        let page = try account[.paymentMethod].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore,
            scope: .customer(request.id)
        ) { method in type == nil || method.fields.type == type }
        return try respond(with: page, url: "/v1/customers/\(request.id)/payment_methods", to: request, in: account)
    }
}

/// A customer search query in the subset of Stripe's search language the fake reads.
struct CustomerSearchQuery {
    private enum Field {
        case member(String)
        case metadata(String)
    }

    private let clauses: [(field: Field, value: String)]
    private let requiresAll: Bool

    init(parsing query: String) throws(StripeAPIError) {
        let hasAnd = query.contains(" AND ")
        let hasOr = query.contains(" OR ")
        if hasAnd, hasOr {
            throw .invalidRequest("Search queries cannot mix AND and OR.", param: "query")
        }
        requiresAll = !hasOr
        var clauses: [(Field, String)] = []
        for text in query.components(separatedBy: hasOr ? " OR " : " AND ") {
            let clause = text.trimmingCharacters(in: .whitespaces)
            guard let colon = clause.range(of: ":'"), clause.hasSuffix("'"),
                colon.upperBound <= clause.index(before: clause.endIndex)
            else { throw Self.unsupported(clause) }
            let name = String(clause[..<colon.lowerBound])
            let value = String(clause[colon.upperBound..<clause.index(before: clause.endIndex)])
            if name.hasPrefix("metadata['"), name.hasSuffix("']") {
                clauses.append((.metadata(String(name.dropFirst("metadata['".count).dropLast(2))), value))
            } else if name.hasPrefix("metadata[\""), name.hasSuffix("\"]") {
                clauses.append((.metadata(String(name.dropFirst("metadata[\"".count).dropLast(2))), value))
            } else if ["email", "name", "phone"].contains(name) {
                clauses.append((.member(name), value))
            } else {
                throw Self.unsupported(clause)
            }
        }
        self.clauses = clauses
    }

    private static func unsupported(_ clause: String) -> StripeAPIError {
        .invalidRequest("The fake cannot read this search clause: \(clause)", param: "query")
    }

    func accepts(_ customer: StoredObject) -> Bool {
        let results = clauses.lazy.map { field, value -> Bool in
            switch field {
            case .metadata(let key): return customer.fields.metadata[key] == value
            case .member("email"): return customer.fields.email == value
            case .member("name"): return customer.fields.name == value
            case .member(let name): return customer.value[name]?.stringValue == value
            }
        }
        return requiresAll ? results.allSatisfy { $0 } : results.contains(true)
    }
}
