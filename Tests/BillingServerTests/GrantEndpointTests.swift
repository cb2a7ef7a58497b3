import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

private let now: Int64 = 1_770_000_000
private let day: Int64 = 86_400
private let referralsToken = "tok_referrals_0123456789abcdef"
private let plainAPIToken = "tok_plain_api_0123456789abcdef"
private let supportToken = "con_support_0123456789abcdef"

private func headers(_ token: String, key: String? = nil) -> HTTPFields {
    var fields: HTTPFields = [.authorization: "Bearer \(token)", .contentType: "application/json"]
    if let key { fields[HTTPField.Name("Idempotency-Key")!] = key }
    return fields
}

private func json(_ response: TestResponse) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any], "\(response.text)")
}

/// The application's clock, moved by the test.
private final class TestClock: Sendable {
    private let seconds: Mutex<Int64>
    init(_ seconds: Int64 = now) { self.seconds = Mutex(seconds) }
    func set(_ value: Int64) { seconds.withLock { $0 = value } }
    var value: Int64 { seconds.withLock { $0 } }
}

/// The application with both token lists (or only the console's), the Free/Pro/Enterprise
/// catalog, and a clock the test moves.
private func grantApplication(_ ledger: TemporaryLedger, clock: TestClock = TestClock(), apiTokens: Bool = true) throws -> some ApplicationProtocol {
    var dependencies = makeDependencies(ledger)
    dependencies.labeledAPITokens = apiTokens ? [ConsoleToken(label: "referrals", token: referralsToken), ConsoleToken(token: plainAPIToken)] : []
    dependencies.consoleTokens = [ConsoleToken(label: "support", token: supportToken)]
    dependencies.plans = try fixtureCatalog("free-pro-enterprise")
    dependencies.scope = .test
    dependencies.now = { Date(timeIntervalSince1970: TimeInterval(clock.value)) }
    return makeApplication(dependencies)
}

private func post(
    _ client: some TestClientProtocol, user: String = "user_1", token: String = supportToken, key: String? = nil, _ body: String
) async throws -> TestResponse {
    try await client.execute(uri: "/v1/users/\(user)/grants", method: .post, headers: headers(token, key: key), body: ByteBuffer(string: body))
}

@Suite("Service API: promotional grants (POST, GET, DELETE /v1/users/{user}/grants)")
struct GrantEndpointTests {
    @Test("A grant is 201 with its fields, and the user is Pro with source grant in the subscription and entitlements views")
    func grantGivesAccess() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let clock = TestClock()
        try await grantApplication(ledger, clock: clock).test(.router) { client in
            let response = try await post(client, #"{"tier": "pro", "duration": "P7D", "reason": "support ticket 4411"}"#)
            #expect(response.status == .created, "\(response.text)")
            let grant = try json(response)
            let id = try #require(grant["id"] as? String)
            #expect(id.hasPrefix("grant_"))
            #expect(grant["tier"] as? String == "pro")
            #expect(grant["starts_at"] as? Int64 == now)
            #expect(grant["expires_at"] as? Int64 == now + 7 * day)
            #expect(grant["reason"] as? String == "support ticket 4411")
            #expect(grant["created_by"] as? String == "console:support")
            #expect(grant["revoked_at"] is NSNull && grant["revoked_by"] is NSNull)
            #expect(grant["active"] as? Bool == true)

            let subscription = try json(try await client.execute(uri: "/v1/users/user_1/subscription", method: .get, headers: headers(referralsToken)))
            #expect(subscription["subscribed"] as? Bool == true)
            #expect(subscription["plan"] as? String == "pro")
            #expect(subscription["source"] as? String == "grant")
            #expect(subscription["why"] as? String == "granted")
            #expect(subscription["grant_id"] as? String == id)
            #expect(subscription["valid_until"] as? Int64 == now + 7 * day)
            #expect(subscription["will_renew"] as? Bool == false)
            let entitlements = try json(try await client.execute(uri: "/v1/users/user_1/entitlements", method: .get, headers: headers(referralsToken)))
            #expect(entitlements["plan"] as? String == "pro")
            #expect(entitlements["source"] as? String == "grant")
            #expect(entitlements["grant_id"] as? String == id)
            #expect(entitlements["entitled"] as? Bool == true)

            // By date, with no job: at the expiry the user is Free again.
            clock.set(now + 7 * day)
            let after = try json(try await client.execute(uri: "/v1/users/user_1/subscription", method: .get, headers: headers(referralsToken)))
            #expect(after["subscribed"] as? Bool == false)
            #expect(after["plan"] as? String == "free")
            #expect(after["why"] as? String == "expired")
        }
    }

    @Test("created_by names the token's kind and label; an unlabelled token is token<N>; an app token without console rights grants")
    func createdBy() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let clock = TestClock()
        try await grantApplication(ledger, clock: clock).test(.router) { client in
            let body = #"{"tier": "pro", "expires_at": \#(now + day), "reason": "referral"}"#
            let byApp = try await post(client, token: referralsToken, body)
            #expect(byApp.status == .created)
            #expect(try json(byApp)["created_by"] as? String == "api:referrals")
            let byPlain = try await post(client, token: plainAPIToken, body)
            #expect(try json(byPlain)["created_by"] as? String == "api:token2")
            // The same app token is refused by the metrics API: it has no console rights.
            let metrics = try await client.execute(uri: "/v1/metrics/overview", method: .get, headers: headers(referralsToken))
            #expect(metrics.status == .forbidden)
            for bad in [nil, "Bearer tok_wrong_0123456789abcdef"] {
                var fields: HTTPFields = [.contentType: "application/json"]
                if let bad { fields[.authorization] = bad }
                let refused = try await client.execute(uri: "/v1/users/user_1/grants", method: .get, headers: fields)
                #expect(refused.status == .unauthorized)
                #expect(refused.headers[.wwwAuthenticate] == #"Bearer realm="billingd""#)
                #expect(try json(refused)["error"] != nil)
            }
        }
    }

    @Test("With only console tokens (no BILLINGD_API_TOKENS) the grant routes are served")
    func consoleOnly() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await grantApplication(ledger, apiTokens: false).test(.router) { client in
            let response = try await post(client, #"{"tier": "enterprise", "duration": "P1M", "reason": "pilot"}"#)
            #expect(response.status == .created)
            let list = try await client.execute(uri: "/v1/users/user_1/grants", method: .get, headers: headers(supportToken))
            #expect(list.status == .ok)
        }
    }

    @Test("Bad requests are JSON 400s that say what to fix", arguments: [
        (#"{"tier": "gold", "duration": "P7D", "reason": "x"}"#, "invalid_field", "tier"),
        (#"{"tier": "free", "duration": "P7D", "reason": "x"}"#, "invalid_field", "default tier"),
        (#"{"duration": "P7D", "reason": "x"}"#, "missing_field", "tier"),
        (#"{"tier": "pro", "expires_at": 1769999999, "reason": "x"}"#, "invalid_field", "future"),
        (#"{"tier": "pro", "expires_at": 1770000000, "reason": "x"}"#, "invalid_field", "future"),
        (#"{"tier": "pro", "expires_at": 2090000000, "reason": "x"}"#, "invalid_field", "ten years"),
        (#"{"tier": "pro", "duration": "P11Y", "reason": "x"}"#, "invalid_field", "ten years"),
        (#"{"tier": "pro", "expires_at": 1771000000, "duration": "P7D", "reason": "x"}"#, "conflicting_fields", "not both"),
        (#"{"tier": "pro", "reason": "x"}"#, "missing_field", "duration"),
        (#"{"tier": "pro", "duration": "7 days", "reason": "x"}"#, "invalid_field", "ISO 8601"),
        (#"{"tier": "pro", "duration": "P1.5D", "reason": "x"}"#, "invalid_field", "ISO 8601"),
        (#"{"tier": "pro", "duration": 7, "reason": "x"}"#, "invalid_field", "duration"),
        (#"{"tier": "pro", "duration": "P7D"}"#, "missing_field", "reason"),
        (#"{"tier": "pro", "duration": "P7D", "reason": "   "}"#, "invalid_field", "not empty"),
        (#"{"tier": "pro", "duration": "P7D", "reason": "\#(String(repeating: "r", count: 501))"}"#, "invalid_field", "500"),
        (#"{"tier": "pro", "duration": "P7D", "reason": "a\nb"}"#, "invalid_field", "control"),
        (#"{"tier": "pro", "duration": "P7D", "reason": "x", "user": "u"}"#, "unknown_field", "user"),
        (#"["tier"]"#, "invalid_json", "JSON object"),
    ])
    func badRequests(_ body: String, _ code: String, _ mentions: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let clock = TestClock()
        try await grantApplication(ledger, clock: clock).test(.router) { client in
            let response = try await post(client, body)
            #expect(response.status == .badRequest, "\(response.text)")
            let error = try #require(try json(response)["error"] as? [String: Any])
            #expect(error["code"] as? String == code, "\(response.text)")
            #expect((error["message"] as? String ?? "").contains(mentions), "\(response.text)")
            let list = try json(try await client.execute(uri: "/v1/users/user_1/grants", method: .get, headers: headers(supportToken)))
            #expect((list["data"] as? [Any])?.isEmpty == true, "a refused request grants nothing")
        }
    }

    @Test("Idempotency-Key: the same body answers the same grant (200, Idempotent-Replayed), another body is 409")
    func idempotency() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let clock = TestClock()
        try await grantApplication(ledger, clock: clock).test(.router) { client in
            let body = #"{"tier": "pro", "duration": "P7D", "reason": "support ticket 4411"}"#
            let first = try await post(client, key: "grant-4411", body)
            #expect(first.status == .created)
            clock.set(now + 30)
            let again = try await post(client, key: "grant-4411", body)
            #expect(again.status == .ok)
            #expect(again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try json(again)["id"] as? String == json(first)["id"] as? String)
            #expect(try json(again)["expires_at"] as? Int64 == now + 7 * day, "the first request's expiry, not one from the retry's clock")
            let other = try await post(client, key: "grant-4411", #"{"tier": "enterprise", "duration": "P7D", "reason": "support ticket 4411"}"#)
            #expect(other.status == .conflict)
            let error = try #require(try json(other)["error"] as? [String: Any])
            #expect(error["code"] as? String == "idempotency_key_reused")
            let badKey = try await post(client, key: "has space", body)
            #expect(badKey.status == .badRequest)
            let list = try json(try await client.execute(uri: "/v1/users/user_1/grants", method: .get, headers: headers(supportToken)))
            #expect((list["data"] as? [Any])?.count == 1)
        }
    }

    @Test("The list is newest first; DELETE revokes (kept, by whom), again answers the same; unknown ids are 404 JSON")
    func listAndRevoke() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let clock = TestClock()
        try await grantApplication(ledger, clock: clock).test(.router) { client in
            let first = try json(try await post(client, #"{"tier": "pro", "duration": "P7D", "reason": "one"}"#))
            clock.set(now + 10)
            let second = try json(try await post(client, token: referralsToken, #"{"tier": "pro", "duration": "P2W", "reason": "two"}"#))
            let list = try json(try await client.execute(uri: "/v1/users/user_1/grants", method: .get, headers: headers(referralsToken)))
            #expect(list["object"] as? String == "list" && list["user"] as? String == "user_1")
            let ids = (list["data"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(ids == [second["id"] as? String, first["id"] as? String].compactMap { $0 })

            let id = try #require(first["id"] as? String)
            clock.set(now + 20)
            let revoked = try await client.execute(uri: "/v1/users/user_1/grants/\(id)", method: .delete, headers: headers(referralsToken))
            #expect(revoked.status == .ok)
            #expect(try json(revoked)["revoked_at"] as? Int64 == now + 20)
            #expect(try json(revoked)["revoked_by"] as? String == "api:referrals")
            #expect(try json(revoked)["active"] as? Bool == false)
            clock.set(now + 30)
            let again = try await client.execute(uri: "/v1/users/user_1/grants/\(id)", method: .delete, headers: headers(supportToken))
            #expect(again.status == .ok)
            #expect(try json(again)["revoked_at"] as? Int64 == now + 20, "the first revocation stands")
            #expect(try json(again)["revoked_by"] as? String == "api:referrals")

            for unknown in ["grant_nope0000000000000000000", "not_a_grant", "grant_%25"] {
                let missing = try await client.execute(uri: "/v1/users/user_1/grants/\(unknown)", method: .delete, headers: headers(supportToken))
                #expect(missing.status == .notFound, "\(unknown)")
                #expect((try json(missing)["error"] as? [String: Any])?["code"] as? String == "grant_not_found")
            }
            let otherUser = try await client.execute(uri: "/v1/users/user_2/grants/\(id)", method: .delete, headers: headers(supportToken))
            #expect(otherUser.status == .notFound, "another user's grant is not found")
        }
    }

    @Test("A grant never counts as revenue or as an active subscription: /v1/metrics/overview is unchanged by it")
    func metricsUnchanged() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let clock = TestClock()
        var events = UserLedgerBuilder()
        events.add("customer.created", UserFixtures.customer("cus_m", user: "user_m"))
        events.add("customer.subscription.updated", UserFixtures.subscription("sub_m", customer: "cus_m", status: "active"))
        try await events.apply(to: ledger)
        try await grantApplication(ledger, clock: clock).test(.router) { client in
            let uri = "/v1/metrics/overview?at=\(now + 60)"
            let before = try await client.execute(uri: uri, method: .get, headers: headers(supportToken))
            #expect(before.status == .ok, "\(before.text)")
            for user in ["user_m", "user_new"] {
                let granted = try await post(client, user: user, #"{"tier": "enterprise", "duration": "P1Y", "reason": "gift"}"#)
                #expect(granted.status == .created)
            }
            let after = try await client.execute(uri: uri, method: .get, headers: headers(supportToken))
            #expect(after.text == before.text)
            #expect(after.text.contains("\"active_subscriptions\""))
        }
    }
}

@Suite("BILLINGD_API_TOKENS: TOKEN or LABEL:TOKEN, as the console's")
struct LabeledAPITokenSettingsTests {
    @Test("Labelled and plain API tokens are read; the tokens alone are the service API's and the secrets the logs mask")
    func labeled() throws {
        let settings = try Settings.load(
            environment: ["BILLINGD_API_TOKENS": "referrals:tok_0123456789abcdef, tok_fedcba9876543210"], configFile: nil)
        #expect(settings.serviceAPI.labeledTokens == [
            ConsoleToken(label: "referrals", token: "tok_0123456789abcdef"), ConsoleToken(token: "tok_fedcba9876543210"),
        ])
        #expect(settings.serviceAPI.tokens == ["tok_0123456789abcdef", "tok_fedcba9876543210"])
        #expect(settings.secretValues.contains("tok_0123456789abcdef"))
        #expect(!settings.secretValues.contains("referrals"))
    }

    @Test("Bad API tokens name the variable and never echo a token", arguments: [
        ("app:tok_123", "at least 16 characters"), ("bad label:tok_0123456789abcdef", "TOKEN or LABEL:TOKEN"),
        ("a:tok_0123456789abcdef,a:tok_fedcba9876543210", "a is given twice"),
    ])
    func refused(_ value: String, _ expected: String) throws {
        do {
            _ = try Settings.load(environment: ["BILLINGD_API_TOKENS": value], configFile: nil)
            Issue.record("accepted \(value)")
        } catch {
            let message = "\(error)"
            #expect(message.hasPrefix("BILLINGD_API_TOKENS is not valid") && message.contains(expected), "\(message)")
            #expect(!message.contains("0123456789abcdef") && !message.contains("tok_123"), "\(message)")
        }
    }

    @Test("A caller is named by its list and label, an unlabelled token by its position, an unknown one not at all")
    func callers() {
        let tokens = CallerTokens(
            api: [ConsoleToken(label: "referrals", token: referralsToken), ConsoleToken(token: plainAPIToken)],
            console: [ConsoleToken(token: "con_first_0123456789abcdef"), ConsoleToken(label: "support", token: supportToken)])
        #expect(tokens.caller("Bearer \(referralsToken)")?.name == "api:referrals")
        #expect(tokens.caller("Bearer \(plainAPIToken)")?.name == "api:token2")
        #expect(tokens.caller("bearer con_first_0123456789abcdef")?.name == "console:token1")
        #expect(tokens.caller("Bearer \(supportToken)")?.name == "console:support")
        #expect(tokens.caller("Bearer \(supportToken)x") == nil)
        #expect(tokens.caller("Basic \(supportToken)") == nil)
        #expect(tokens.caller(nil) == nil)
    }
}
