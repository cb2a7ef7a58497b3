/// `POST /v1/test_helpers/billingd/objects`: holds an object exactly as given, with no event —
/// how `billingd trigger` in local mode makes the fake know the customers, subscriptions and
/// other objects it sends billingd, so that Checkout, the portal and cancel find them later.
/// Form parameters: `kind` (an ``ObjectKind`` raw value), `object` (its JSON), and `delete=true`
/// to forget the object instead.
extension FakeStore {
    func holdObject(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["kind", "object", "delete"])
        let kindName = try form.requiredString("kind")
        guard let kind = ObjectKind(rawValue: kindName), kind != .event else {
            throw .invalidRequest("Invalid kind: \(kindName) is not an object kind the fake holds.", param: "kind")
        }
        let object: JSONValue
        do {
            object = try JSONValue(parsing: Array(try form.requiredString("object").utf8))
        } catch let error as StripeAPIError {
            throw error
        } catch {
            throw .invalidRequest("Invalid object: \(error)", param: "object")
        }
        guard let id = object["id"]?.stringValue, object["created"]?.intValue != nil else {
            throw .invalidRequest("The object needs a string `id` and an integer `created`.", param: "object")
        }
        let state = account(request.account)
        if try form.boolean("delete") == true {
            _ = state[kind].remove(id)
            return APIResponse(["id": .string(id), "object": .string(kind.rawValue), "deleted": true])
        }
        return APIResponse(bytes: save(object, as: kind, in: state).value.serialized())
    }
}
