import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import BillingServer

private let unlabelledToken = "con_unlabelled_0123456789abcdef"
private let now: Int64 = 1_770_000_000

/// A grant form the console refuses, and what it says.
struct ConsoleGrantRefusal: Sendable, CustomTestStringConvertible {
    let fields: [(String, String)]
    let message: String
    init(_ fields: [(String, String)], _ message: String) {
        self.fields = fields
        self.message = message
    }
    var testDescription: String { message }
}

@Suite("The console's grants: POST /console/customers/grants and /grants/revoke")
struct ConsoleGrantsTests {
    static let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    func application(_ ledger: TemporaryLedger) throws -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        // Unlabelled: the grant names it by its position, as the API does.
        dependencies.consoleTokens = [ConsoleToken(token: unlabelledToken)]
        dependencies.plans = try fixtureCatalog("free-pro-enterprise")
        dependencies.now = { Date(timeIntervalSince1970: TimeInterval(now)) }
        return makeApplication(dependencies)
    }

    /// Signs in; the session's `Cookie` header.
    func signIn(_ client: some TestClientProtocol) async throws -> String {
        try await client.execute(uri: "/console/sign-in", method: .post, headers: Self.form, body: ByteBuffer(string: "token=\(unlabelledToken)")) { response in
            String(try #require(response.headers[.setCookie]).prefix { $0 != ";" })
        }
    }

    /// The customer page of `user`, and the hidden fields of its grant form.
    func grantForm(_ client: some TestClientProtocol, cookie: String, user: String = "user_1") async throws -> (page: String, csrf: String, key: String) {
        let page = try await client.execute(uri: "/console/customers?user=\(user)", method: .get, headers: [.cookie: cookie]) { String(buffer: $0.body) }
        let csrf = try #require(page.firstMatch(of: #/name="csrf" value="([^"]+)"/#)?.output.1)
        let key = try #require(page.firstMatch(of: #/name="idempotency_key" value="([^"]+)"/#)?.output.1)
        return (page, String(csrf), String(key))
    }

    func post(_ client: some TestClientProtocol, _ path: String, cookie: String, _ fields: [(String, String)]) async throws -> TestResponse {
        var headers = Self.form
        headers[.cookie] = cookie
        let body = fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&")
        return try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    /// Forms the console refuses, and what it says.
    static let refusals: [ConsoleGrantRefusal] = [
        ConsoleGrantRefusal([("tier", "pro"), ("length", "P7D"), ("reason", "")], "The field &quot;reason&quot; is required"),
        ConsoleGrantRefusal([("tier", "pro"), ("length", "P7D"), ("reason", "   ")], "a reason that is not empty"),
        ConsoleGrantRefusal([("tier", "pro"), ("length", "date"), ("expires_on", "2026-01-31"), ("reason", "kept")], "The end date 2026-01-31 has passed: choose today or a later day."),
        ConsoleGrantRefusal([("tier", "pro"), ("length", "date"), ("expires_on", "2026-02-30"), ("reason", "kept")], "“2026-02-30” is not a date: give it as YYYY-MM-DD."),
        ConsoleGrantRefusal([("tier", "pro"), ("length", "date"), ("expires_on", ""), ("reason", "kept")], "Choose the date the grant ends"),
        ConsoleGrantRefusal([("tier", "pro"), ("length", "date"), ("expires_on", "2040-01-01"), ("reason", "kept")], "A grant lasts at most ten years"),
        ConsoleGrantRefusal([("tier", "pro"), ("length", "P7D"), ("expires_on", "2026-03-01"), ("reason", "kept")], "Give a length or an end date, not both"),
        ConsoleGrantRefusal([("tier", "pro"), ("length", "P99Y"), ("reason", "kept")], "Choose one of the form&#39;s lengths"),
        ConsoleGrantRefusal([("tier", "free"), ("length", "P7D"), ("reason", "kept")], "a tier above the default tier free"),
        ConsoleGrantRefusal([("tier", "gold"), ("length", "P7D"), ("reason", "kept")], "a tier of the plan catalog (pro, enterprise)"),
    ]

    @Test("A refused grant shows the customer page again (400) with why beside the form and what was typed kept", arguments: Self.refusals)
    func refused(_ refusal: ConsoleGrantRefusal) async throws {
        let (fields, message) = (refusal.fields, refusal.message)
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            let cookie = try await signIn(client)
            let form = try await grantForm(client, cookie: cookie)
            let response = try await post(client, "/console/customers/grants", cookie: cookie, [("csrf", form.csrf), ("user", "user_1")] + fields)
            #expect(response.status == .badRequest)
            let page = String(buffer: response.body)
            let problem = try #require(page.firstMatch(of: #/<p class="alert" role="alert" id="grant-error">([^<]*)</p>/#)?.output.1)
            #expect(problem.contains(message), "\(problem)")
            #expect(page.contains("<h1>Customer user_1</h1>"), "the customer page, with its sections")
            if let reason = fields.first(where: { $0.0 == "reason" })?.1, !reason.isEmpty {
                #expect(page.contains("id=\"grant-reason\" name=\"reason\" value=\"\(reason)\""), "the reason typed is kept")
            }
            #expect(try await ledger.store.grants.grants(of: "user_1", in: .test).isEmpty)
        }
    }

    @Test("A grant from the form is the API's grant, given by console:token1; the same form sent twice gives one; a date lasts through that day")
    func granted() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            let cookie = try await signIn(client)
            let form = try await grantForm(client, cookie: cookie)
            #expect(form.page.contains("No grant."))
            let fields = [("csrf", form.csrf), ("user", "user_1"), ("idempotency_key", form.key), ("tier", "pro"), ("length", "P7D"), ("reason", "ticket 4411")]
            let first = try await post(client, "/console/customers/grants", cookie: cookie, fields)
            #expect(first.status == .seeOther)
            #expect(first.headers[.location] == "/console/customers?user=user_1&notice=granted#grants")
            let again = try await post(client, "/console/customers/grants", cookie: cookie, fields)
            #expect(again.headers[.location] == "/console/customers?user=user_1&notice=granted-again#grants")
            let grants = try await ledger.store.grants.grants(of: "user_1", in: .test)
            #expect(grants.count == 1, "the form sent twice gives one grant")
            let grant = try #require(grants.first)
            #expect(grant.tier == "pro" && grant.reason == "ticket 4411" && grant.createdBy == "console:token1")
            #expect(grant.startsAt == now && grant.expiresAt == now + 7 * 86_400)

            let shown = try await client.execute(uri: "/console/customers?user=user_1&notice=granted", method: .get, headers: [.cookie: cookie]) { String(buffer: $0.body) }
            #expect(shown.contains("Access granted"))
            #expect(shown.contains("<strong id=\"tier\">Pro</strong>"), "the entitlement includes the grant")
            #expect(shown.contains("data-grant=\"\(grant.id)\""), "a revoke button for it")

            // Through 2026-02-04 (now is 2026-02-02 02:40 UTC): it ends at 2026-02-05 00:00 UTC.
            let dated = try await grantForm(client, cookie: cookie, user: "user_2")
            let response = try await post(
                client, "/console/customers/grants", cookie: cookie,
                [("csrf", dated.csrf), ("user", "user_2"), ("tier", "enterprise"), ("length", "date"), ("expires_on", "2026-02-04"), ("reason", "beta tester")])
            #expect(response.status == .seeOther)
            let expiresAt = try #require(try await ledger.store.grants.grants(of: "user_2", in: .test).first).expiresAt
            #expect(expiresAt == 1_770_249_600)
        }
    }

    @Test("Revoke marks the grant revoked by console:token1 and answers 303; an unknown grant is 404; without the CSRF token, 403")
    func revoked() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let created = try await ledger.store.grants.create(
            GrantRequest(tier: "pro", expiresAt: now + 86_400, reason: "r", createdBy: "api:app", fingerprint: "f"), for: "user_1", in: .test, now: now)
        guard case .created(let grant) = created else { Issue.record("not created: \(created)"); return }
        try await application(ledger).test(.router) { client in
            let cookie = try await signIn(client)
            let form = try await grantForm(client, cookie: cookie)
            let refused = try await post(client, "/console/customers/grants/revoke", cookie: cookie, [("user", "user_1"), ("grant", grant.id)])
            #expect(refused.status == .forbidden)
            let unknown = try await post(
                client, "/console/customers/grants/revoke", cookie: cookie, [("csrf", form.csrf), ("user", "user_1"), ("grant", "grant_0000000000000000000000000")])
            #expect(unknown.status == .notFound)
            let elsewhere = try await post(client, "/console/customers/grants/revoke", cookie: cookie, [("csrf", form.csrf), ("user", "user_2"), ("grant", grant.id)])
            #expect(elsewhere.status == .notFound, "another user's grant")
            let response = try await post(client, "/console/customers/grants/revoke", cookie: cookie, [("csrf", form.csrf), ("user", "user_1"), ("grant", grant.id)])
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == "/console/customers?user=user_1&notice=revoked#grants")
            let stored = try #require(try await ledger.store.grants.grants(of: "user_1", in: .test).first)
            #expect(stored.revokedAt == now && stored.revokedBy == "console:token1")
        }
    }
}
