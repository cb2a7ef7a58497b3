/// `GET /v1/events` and `/v1/events/:id`: newest first, only the last 30 days (fake clock), with
/// Stripe's filters including `delivery_success`.
extension FakeStore {
    /// Stripe keeps events listable for 30 days.
    static let eventRetention: Int64 = 30 * 86_400

    func listEvents(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["created", "delivery_success", "ending_before", "limit", "starting_after", "type", "types"])
        let list = try ListParameters(form)
        let type = try form.string("type")
        let types = try form.strings("types")
        if type != nil, types != nil { throw .exclusive(["type", "types"]) }
        if let types, types.count > 20 {
            throw .invalidRequest("You may pass up to 20 event types.", param: "types")
        }
        let patterns = types ?? type.map { [$0] }
        let deliverySuccess = try form.boolean("delivery_success")
        let account = account(request.account)
        let oldest = clock.now - Self.eventRetention
        let requested = list.created ?? Int64.min...Int64.max
        let lower = max(requested.lowerBound, oldest)
        // Nothing was created at Int64.min: a window entirely before the retention matches nothing.
        let window = lower <= requested.upperBound ? lower...requested.upperBound : Int64.min...Int64.min
        let statuses = deliveryStatuses
        let page = try account[.event].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore, created: window
        ) { event in
            if let patterns, !patterns.contains(where: { Self.eventType(event.fields.type ?? "", matches: $0) }) {
                return false
            }
            if let deliverySuccess {
                return statuses[event.id]?.succeeded == deliverySuccess
            }
            return true
        }
        return try respond(with: page, url: ObjectKind.event.listURL, to: request, in: account)
    }

    func retrieveEvent(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        let event = try existing(.event, request.id, in: account)
        guard event.created >= clock.now - Self.eventRetention else { throw .noSuch(.event, request.id) }
        return APIResponse(bytes: event.json)
    }

    /// `customer.subscription.updated` matches itself and `customer.*` / `customer.subscription.*`.
    static func eventType(_ type: String, matches pattern: String) -> Bool {
        if pattern == "*" { return true }
        if pattern.hasSuffix(".*") { return type.hasPrefix(pattern.dropLast()) }
        return type == pattern
    }
}
