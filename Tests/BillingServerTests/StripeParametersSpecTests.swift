import BillingCore
import BillingServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StripeFake
import Testing

/// Stripe's OpenAPI description, read as plain JSON: the part billingd calls, kept in
/// `Fixtures/stripe/openapi-subset.json` (scripts/gen-openapi-subset), or a whole description named
/// by `STRIPE_OPENAPI_SPEC`; and a checker of form parameters against it: every
/// key (nested ones included) must exist in the operation's request body schema or query
/// parameters, and every value must fit its type, enum and length.
struct StripeOpenAPISpec: @unchecked Sendable {
    // @unchecked: `root` is a tree of Foundation JSON values that is never mutated after load.
    let root: [String: Any]
    let file: String

    /// The description, or what is wrong with its file: the checks fail rather than skip.
    static let shared: Result<StripeOpenAPISpec, SpecMissing> = {
        let path = location
        guard let data = FileManager.default.contents(atPath: path),
            let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any], root["paths"] is [String: Any]
        else { return .failure(SpecMissing(path: path)) }
        return .success(StripeOpenAPISpec(root: root, file: path))
    }()

    struct SpecMissing: Error, CustomStringConvertible {
        let path: String
        var description: String { "no OpenAPI description with paths at \(path) (run scripts/gen-openapi-subset, or fix STRIPE_OPENAPI_SPEC)" }
    }

    static var location: String {
        if let path = ProcessInfo.processInfo.environment["STRIPE_OPENAPI_SPEC"] { return path }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/stripe/openapi-subset.json").path
    }

    private var paths: [String: Any] { root["paths"] as? [String: Any] ?? [:] }

    /// The spec's path template for a concrete path (`/v1/subscriptions/sub_1` → `/v1/subscriptions/{subscription_exposed_id}`).
    func template(for path: String) -> String? {
        if paths[path] != nil { return path }
        let segments = path.split(separator: "/")
        return paths.keys.sorted().first { template in
            let parts = template.split(separator: "/")
            guard parts.count == segments.count else { return false }
            return zip(parts, segments).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
        }
    }

    func operation(_ method: String, _ path: String) -> [String: Any]? {
        guard let template = template(for: path), let item = paths[template] as? [String: Any] else { return nil }
        return item[method.lowercased()] as? [String: Any]
    }

    /// Every problem with a request's flat `name=value` pairs; empty when Stripe would accept all of them.
    func problems(_ method: String, _ path: String, _ pairs: [(name: String, value: String)]) -> [String] {
        guard let operation = operation(method, path) else { return ["\(method) \(path): no such operation in the spec"] }
        var problems: [String] = []
        if method == "POST" {
            let schema = resolve(
                ((((operation["requestBody"] as? [String: Any])?["content"] as? [String: Any])?["application/x-www-form-urlencoded"] as? [String: Any])?["schema"] as? [String: Any]) ?? [:])
            for required in schema["required"] as? [String] ?? [] where !pairs.contains(where: { segments($0.name).first == required }) {
                problems.append("\(method) \(path): required parameter \(required) is missing")
            }
            for pair in pairs {
                problems += check(segments(pair.name)[...], pair.value, schema, name: pair.name).map { "\(method) \(path): \($0)" }
            }
        } else {
            let parameters = (operation["parameters"] as? [[String: Any]] ?? []).filter { $0["in"] as? String == "query" }
            for pair in pairs {
                let parts = segments(pair.name)
                guard let parameter = parameters.first(where: { $0["name"] as? String == parts.first }) else {
                    problems.append("\(method) \(path): unknown query parameter \(pair.name)")
                    continue
                }
                problems += check(parts.dropFirst(), pair.value, parameter["schema"] as? [String: Any] ?? [:], name: pair.name)
                    .map { "\(method) \(path): \($0)" }
            }
        }
        return problems
    }

    /// `a[b][0]` → `["a", "b", "0"]`.
    func segments(_ name: String) -> [String] {
        name.replacingOccurrences(of: "]", with: "").split(separator: "[", omittingEmptySubsequences: false).map(String.init)
    }

    private func resolve(_ schema: [String: Any]) -> [String: Any] {
        guard let reference = schema["$ref"] as? String, reference.hasPrefix("#/") else { return schema }
        var node: Any = root
        for part in reference.dropFirst(2).split(separator: "/") {
            node = (node as? [String: Any])?[String(part)] ?? [:]
        }
        return resolve(node as? [String: Any] ?? [:])
    }

    private func check(_ segments: ArraySlice<String>, _ value: String, _ raw: [String: Any], name: String) -> [String] {
        let schema = resolve(raw)
        if let alternatives = (schema["anyOf"] ?? schema["oneOf"]) as? [[String: Any]] {
            let results = alternatives.map { check(segments, value, $0, name: name) }
            return results.contains { $0.isEmpty } ? [] : ["\(name)=\(value) fits none of its alternatives: \(results.flatMap { $0 }.joined(separator: "; "))"]
        }
        let type = schema["type"] as? String
        guard let key = segments.first else {
            switch type {
            case "string"?:
                if let allowed = schema["enum"] as? [String], !allowed.contains(value) {
                    return ["\(name)=\(value) is not one of \(allowed)"]
                }
                if let maximum = schema["maxLength"] as? Int, value.count > maximum { return ["\(name) is longer than \(maximum)"] }
                return []
            case "integer"?: return Int64(value) == nil ? ["\(name)=\(value) is not an integer"] : []
            case "number"?: return Double(value) == nil ? ["\(name)=\(value) is not a number"] : []
            case "boolean"?: return ["true", "false"].contains(value) ? [] : ["\(name)=\(value) is not a boolean"]
            default: return ["\(name) needs nested keys (\(type ?? "untyped")), got a plain value"]
            }
        }
        let rest = segments.dropFirst()
        if type == "array" {
            guard Int(key) != nil, let items = schema["items"] as? [String: Any] else { return ["\(name): [\(key)] is not an array index"] }
            return check(rest, value, items, name: name)
        }
        if let property = (schema["properties"] as? [String: Any])?[key] as? [String: Any] {
            return check(rest, value, property, name: name)
        }
        if let additional = schema["additionalProperties"] as? [String: Any] {
            return check(rest, value, additional, name: name)
        }
        return ["\(name): \(key) is not a parameter here"]
    }
}

@Suite("The parameters billingd sends to Stripe exist in Stripe's OpenAPI description")
struct StripeParametersSpecTests {
    @Test("The checker itself catches unknown keys, nested ones included, bad enum values and wrong types")
    func checkerCatchesMistakes() throws {
        let spec = try StripeOpenAPISpec.shared.get()
        let good: [(name: String, value: String)] = [
            ("mode", "subscription"), ("line_items[0][price]", "price_1"), ("line_items[0][quantity]", "2"),
            ("success_url", "https://a.example/"), ("subscription_data[metadata][k]", "v"), ("metadata[app_user_id]", "u"),
        ]
        #expect(spec.problems("POST", "/v1/checkout/sessions", good) == [])
        for (bad, why) in [
            (("mode", "subscriptions"), "enum"), (("line_items[0][prize]", "price_1"), "nested unknown key"),
            (("line_items[x][price]", "price_1"), "array index"), (("allow_promotion_codes", "yes"), "boolean"),
            (("subscription_data[trial_period_days]", "14d"), "integer"), (("subscription_data[trial_days]", "14"), "unknown nested key"),
            (("customer_id", "cus_1"), "unknown key"), (("metadata", "x"), "object given a plain value"),
        ] as [((String, String), String)] {
            #expect(!spec.problems("POST", "/v1/checkout/sessions", good + [bad]).isEmpty, "\(why): \(bad)")
        }
        #expect(!spec.problems("POST", "/v1/checkout/sessions", [("mode", "subscription")]).isEmpty, "success_url is required")
        #expect(!spec.problems("GET", "/v1/prices", [("lookup_key", "pro")]).isEmpty)
        #expect(spec.problems("GET", "/v1/prices", [("lookup_keys[0]", "pro"), ("limit", "1")]) == [])
    }

    @Test("Every request of checkout (all options), portal and both kinds of cancel fits the spec, enum values included")
    func everyRequestFits() async throws {
        let spec = try StripeOpenAPISpec.shared.get()
        let harness = try await BillingHarness.start()
        defer { Task { await harness.stop() } }
        try await harness.subscribe("user_sub_a", to: harness.prices.proMonthly)
        try await harness.subscribe("user_sub_b", to: harness.prices.teamMonthly, quantity: 2)
        let longUser = String(repeating: "u", count: 230)
        try await harness.application().test(.router) { client in
            let bodies = [
                checkoutJSON("user_spec_1", #""plan": "pro", "interval": "year", "quantity": 3, "trial_days": 30, "allow_promotion_codes": true, "email": "ada@example.com""#),
                checkoutJSON("user_spec_2", #""lookup_key": "team_seat_monthly", "allow_promotion_codes": false"#),
                checkoutJSON("user_spec_3", #""price": "\#(harness.prices.proMonthly)""#),
                checkoutJSON(longUser, #""plan": "team""#),
            ]
            for body in bodies {
                let response = try await postJSON(client, "/v1/checkout-sessions", body)
                #expect(response.status == .created, "\(response.text)")
            }
            let portal = try await postJSON(client, "/v1/portal-sessions", #"{"user": "user_spec_1", "return_url": "https://a.example/account"}"#)
            #expect(portal.status == .created)
            #expect(try await postJSON(client, "/v1/users/user_sub_a/subscription/cancel", "").status == .ok)
            #expect(try await postJSON(client, "/v1/users/user_sub_b/subscription/cancel", #"{"at_period_end": false}"#).status == .ok)
        }

        var seen = Set<String>()
        for request in await harness.fake.requests {
            let pairs = FlatForm.pairs(request.method == "POST" ? String(decoding: request.body, as: UTF8.self) : request.query ?? "")
            let template = spec.template(for: request.path) ?? request.path
            seen.insert("\(request.method) \(template)")
            #expect(spec.problems(request.method, request.path, pairs) == [], "\(request)")
        }
        for operation in [
            "POST /v1/customers", "POST /v1/checkout/sessions", "POST /v1/billing_portal/sessions",
            "POST /v1/subscriptions/{subscription_exposed_id}", "DELETE /v1/subscriptions/{subscription_exposed_id}",
            "GET /v1/prices", "GET /v1/prices/{price}",
        ] {
            #expect(seen.contains(operation), "the flows exercised \(operation)")
        }
        // client_reference_id is at most 200 characters in the spec: a longer user id is tied by metadata alone.
        let long = await harness.sentForms("POST", "/v1/checkout/sessions").first { $0["metadata[app_user_id]"] == longUser }
        #expect(long?["client_reference_id"] == nil)
        #expect(long?["subscription_data[metadata][app_user_id]"] == longUser)
    }

    /// Operations reconcile calls that Stripe added after the 2023-08-16 description: the check
    /// cannot judge them, and says so by name rather than skip them silently.
    static let newerThanTheSpec = [
        "GET /v1/entitlements/active_entitlements", "GET /v1/billing/meters", "GET /v1/invoice_payments",
    ]

    @Test("Every list and retrieve request of a full reconcile, events sweep and payment methods included, fits the spec")
    func reconcileRequestsFit() async throws {
        let spec = try StripeOpenAPISpec.shared.get()
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        await harness.fake.seed(customers: 6, subscriptions: 6, invoices: 6, prices: 2, products: 1)
        _ = try await harness.run()
        // Objects gone from Stripe without an event are fetched one by one to confirm it.
        let invoices = await harness.fake.ids(of: .invoice)
        await harness.fake.remove(.invoice, invoices[0])
        let customers = await harness.fake.ids(of: .customer)
        await harness.fake.remove(.customer, customers[0])
        _ = try await harness.run()

        var seen = Set<String>()
        for request in await harness.fake.requests {
            let operation = "\(request.method) \(spec.template(for: request.path) ?? request.path)"
            seen.insert(operation)
            if Self.newerThanTheSpec.contains(where: { operation.hasPrefix($0) }) { continue }
            let pairs = FlatForm.pairs(request.method == "POST" ? String(decoding: request.body, as: UTF8.self) : request.query ?? "")
            #expect(spec.problems(request.method, request.path, pairs) == [], "\(request)")
        }
        for operation in [
            "GET /v1/events", "GET /v1/products", "GET /v1/prices", "GET /v1/customers", "GET /v1/subscriptions", "GET /v1/invoices",
            "GET /v1/customers/{customer}/payment_methods", "GET /v1/invoices/{invoice}", "GET /v1/customers/{customer}",
        ] {
            #expect(seen.contains(operation), "reconcile exercised \(operation); it sent \(seen.sorted())")
        }
    }
}
