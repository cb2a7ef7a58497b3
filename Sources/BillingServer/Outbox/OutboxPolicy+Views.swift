import BillingCore
import BillingStore
import Foundation

extension OutboxPolicy {
    /// serve's policy: views resolved under `catalog` at the wall clock, and a payload's `data`
    /// holding the same JSON as `GET /v1/users/{user}/subscription` and `/entitlements`
    /// (without `usage`, which changes on every consume).
    public static func serviceViews(catalog: PlanCatalog, endpoints: [String], now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) -> OutboxPolicy {
        OutboxPolicy(catalog: catalog, endpoints: endpoints, render: { billing, resolution in
            var bytes = Array(#"{"subscription":"#.utf8)
            bytes += SubscriptionView(user: billing.user, scope: billing.scope, resolution: resolution).jsonBytes()
            bytes += Array(#","entitlements":"#.utf8)
            bytes += EntitlementsView(user: billing.user, scope: billing.scope, resolution: resolution).jsonBytes()
            bytes.append(UInt8(ascii: "}"))
            return bytes
        }, now: now, renderUsage: { state in
            var json = JSONBytesWriter()
            json.beginObject()
            json.key("usage")
            json.beginObject()
            UsageJSON.state(state, into: &json)
            json.endObject()
            json.endObject()
            return json.bytes
        })
    }
}
