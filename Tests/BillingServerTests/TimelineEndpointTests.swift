import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

private let now: Int64 = 1_770_000_000
private let appToken = "tok_timeline_app_0123456789abcdef"
private let operatorToken = "con_timeline_ops_0123456789abcdef"

private func headers(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

private func json(_ response: TestResponse) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any], "\(response.text)")
}

/// The application with both token lists, the Free/Pro/Enterprise catalog and a fixed clock.
private func timelineApplication(_ ledger: TemporaryLedger) throws -> some ApplicationProtocol {
    var dependencies = makeDependencies(ledger)
    dependencies.labeledAPITokens = [ConsoleToken(label: "app", token: appToken)]
    dependencies.consoleTokens = [ConsoleToken(label: "support", token: operatorToken)]
    dependencies.plans = try fixtureCatalog("free-pro-enterprise")
    dependencies.scope = .test
    dependencies.now = { Date(timeIntervalSince1970: TimeInterval(now)) }
    return makeApplication(dependencies)
}

/// `count` grants for `user`, one a second up to `now`.
private func grants(_ ledger: TemporaryLedger, user: String = "user_1", count: Int, expiresAt: Int64 = now + 86_400) async throws {
    for index in 0..<count {
        _ = try await ledger.store.grants.create(
            GrantRequest(tier: "pro", expiresAt: expiresAt, reason: "ticket \(index)", createdBy: "console:support", fingerprint: "\(index)"),
            for: user, in: .test, now: now - Int64(count - index))
    }
}

@Suite("Service API: GET /v1/users/{user}/timeline")
struct TimelineEndpointTests {
    @Test("The timeline answers each item's fields, newest first, for the app's and the operators' tokens alike")
    func answers() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await grants(ledger, count: 2)
        try await timelineApplication(ledger).test(.router) { client in
            for token in [appToken, operatorToken] {
                let response = try await client.execute(uri: "/v1/users/user_1/timeline", method: .get, headers: headers(token))
                #expect(response.status == .ok, "\(response.text)")
                let body = try json(response)
                #expect(body["object"] as? String == "list" && body["user"] as? String == "user_1" && body["livemode"] as? Bool == false)
                #expect(body["has_more"] as? Bool == false && body["next_cursor"] is NSNull)
                let data = try #require(body["data"] as? [[String: Any]])
                #expect(data.count == 2)
                let first = try #require(data.first)
                #expect(Set(first.keys) == ["at", "kind", "source", "summary", "ref", "entitlement"])
                #expect(first["kind"] as? String == "grant.created" && first["source"] as? String == "grant")
                #expect(first["at"] as? Int64 == now - 1 && first["entitlement"] is NSNull)
                #expect((first["summary"] as? String)?.hasSuffix("by console:support: ticket 1") == true)
                #expect((first["ref"] as? String)?.hasPrefix("grant_") == true)
            }
            let anonymous = try await client.execute(uri: "/v1/users/user_1/timeline", method: .get)
            #expect(anonymous.status == .unauthorized)
        }
    }

    @Test("Pages follow next_cursor to the end, each item once; an unknown user has an empty timeline")
    func pages() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await grants(ledger, count: 7)
        try await timelineApplication(ledger).test(.router) { client in
            var refs: [String] = []
            var uri = "/v1/users/user_1/timeline?limit=3"
            var pages = 0
            while true {
                let body = try json(try await client.execute(uri: uri, method: .get, headers: headers(appToken)))
                refs += try #require(body["data"] as? [[String: Any]]).compactMap { $0["ref"] as? String }
                pages += 1
                guard let next = body["next_cursor"] as? String else {
                    #expect(body["has_more"] as? Bool == false)
                    break
                }
                #expect(body["has_more"] as? Bool == true)
                uri = "/v1/users/user_1/timeline?limit=3&cursor=\(next)"
            }
            #expect(pages == 3 && refs.count == 7 && Set(refs).count == 7)

            let nobody = try json(try await client.execute(uri: "/v1/users/user_nobody/timeline", method: .get, headers: headers(appToken)))
            #expect((nobody["data"] as? [Any])?.isEmpty == true && nobody["next_cursor"] is NSNull)
        }
    }

    @Test("A bad limit or cursor, or an unknown parameter, is a JSON 400 that says what to send", arguments: [
        ("limit=0", "invalid_parameter"), ("limit=501", "invalid_parameter"), ("limit=ten", "invalid_parameter"), ("limit=", "invalid_parameter"),
        ("cursor=nonsense", "invalid_cursor"), ("cursor=t1.%21%21", "invalid_cursor"), ("limit=5&limit=6", "invalid_parameter"),
        ("page=2", "unknown_parameter"),
    ])
    func refusals(_ query: String, _ code: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await timelineApplication(ledger).test(.router) { client in
            let response = try await client.execute(uri: "/v1/users/user_1/timeline?\(query)", method: .get, headers: headers(appToken))
            #expect(response.status == .badRequest, "\(query): \(response.text)")
            #expect(response.headers[.contentType] == "application/json")
            let error = try #require(try json(response)["error"] as? [String: Any])
            #expect(error["code"] as? String == code, "\(query)")
        }
    }
}

@Suite("Console: the customer page's timeline")
struct ConsoleTimelineTests {
    static let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    @Test("The customer page shows the timeline newest first, 50 at a time, with an Older link that pages on")
    func section() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await grants(ledger, count: 52)
        try await timelineApplication(ledger).test(.router) { client in
            let cookie = try await client.execute(
                uri: "/console/sign-in", method: .post, headers: Self.form, body: ByteBuffer(string: "token=\(operatorToken)")
            ) { response in
                String(try #require(response.headers[.setCookie]).prefix { $0 != ";" })
            }
            let page = try await client.execute(uri: "/console/customers?user=user_1", method: .get, headers: [.cookie: cookie])
            #expect(page.status == .ok)
            let html = String(buffer: page.body)
            #expect(html.contains("<section class=\"card\" id=\"timeline\"><h2>Timeline</h2>"))
            #expect(html.components(separatedBy: "grant.created").count - 1 == 50, "one page of 50")
            #expect(html.contains("by console:support: ticket 51"), "the newest first")
            // (The Grants section above lists every grant: only the timeline's section counts.)
            let timeline = html[try #require(html.range(of: "id=\"timeline\"")).lowerBound...]
            #expect(!timeline.contains("ticket 1<"), "the oldest on the next page")
            let marker = "href=\"/console/customers?user=user_1&amp;timeline="
            let start = try #require(html.range(of: marker)?.upperBound)
            let cursor = String(html[start...].prefix { $0 != "#" })
            #expect(html.contains("id=\"timeline-older\""))

            let older = try await client.execute(uri: "/console/customers?user=user_1&timeline=\(cursor)", method: .get, headers: [.cookie: cookie])
            #expect(older.status == .ok)
            let second = String(buffer: older.body)
            #expect(second.components(separatedBy: "grant.created").count - 1 == 2)
            #expect(second.contains("ticket 0") && second.contains("ticket 1<"))
            #expect(!second.contains("id=\"timeline-older\"") && second.contains("id=\"timeline-newest\""))

            let bad = try await client.execute(uri: "/console/customers?user=user_1&timeline=x", method: .get, headers: [.cookie: cookie])
            #expect(bad.status == .badRequest)
        }
    }
}

@Suite("billingd timeline: the built binary", .needsBillingdBinary)
struct TimelineCommandTests {
    @Test("--json prints the service API's page; the table lists each item and how to page on")
    func command() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        // The command reads at the real clock: grants that run out long after it.
        try await grants(ledger, count: 3, expiresAt: 4_000_000_000)
        let environment = ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path, "BILLINGD_LOG_LEVEL": "error"]

        let run = try await billingd(["timeline", "user_1", "--json", "--limit", "2"], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let data = try #require(body["data"] as? [[String: Any]])
        #expect(data.map { $0["kind"] as? String } == ["grant.created", "grant.created"])
        #expect(data.first?["at"] as? Int64 == now - 1)
        let next = try #require(body["next_cursor"] as? String)

        let rest = try await billingd(["timeline", "user_1", "--json", "--cursor", next], environment: environment)
        #expect(rest.status == 0, "\(rest.stderr)")
        let last = try #require(try JSONSerialization.jsonObject(with: Data(rest.stdout.utf8)) as? [String: Any])
        #expect((last["data"] as? [[String: Any]])?.count == 1 && last["next_cursor"] is NSNull)

        let table = try await billingd(["timeline", "user_1", "--limit", "2"], environment: environment)
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("KIND") && table.stdout.contains("grant.created") && table.stdout.contains("ticket 2"))
        #expect(table.stdout.contains("More: billingd timeline user_1 --cursor \(next)"))

        let bad = try await billingd(["timeline", "user_1", "--cursor", "nonsense"], environment: environment)
        #expect(bad.status != 0 && bad.stderr.contains("--cursor"))
        let nobody = try await billingd(["timeline", "user_nobody"], environment: environment)
        #expect(nobody.status == 0 && nobody.stdout.contains("nothing in the ledger"))
    }
}
