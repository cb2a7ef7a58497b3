import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import BillingServer

private let operatorToken = "con_ops_0123456789abcdef"
private let financeToken = "con_finance_0123456789abcdef"
private let serviceToken = "tok_app_console_0123456789abcdef"

@Suite("The console's session cookie, CSRF tokens, throttle and HTML escaping")
struct ConsoleSecurityTests {
    let tokens = [ConsoleToken(label: "ops", token: operatorToken), ConsoleToken(label: "finance", token: financeToken)]
    let now: Int64 = 1_800_000_000

    @Test("A session signed in with a token verifies on another replica with the same tokens, until 12 hours have passed")
    func sessionLifetime() throws {
        let sessions = ConsoleSessions(tokens: tokens)
        let signed = try #require(sessions.signIn(token: operatorToken, now: now))
        #expect(signed.session.label == "ops")
        #expect(signed.session.expiresAt == now + 12 * 3600)
        #expect(!signed.value.contains(operatorToken), "the cookie never holds the token")
        let replica = ConsoleSessions(tokens: tokens.reversed())
        #expect(replica.verify(signed.value, now: now + 60) == signed.session, "another replica (or a restart) accepts it")
        #expect(replica.verify(signed.value, now: now + 12 * 3600 - 1) != nil)
        #expect(replica.verify(signed.value, now: now + 12 * 3600) == nil, "expired after 12 h")
        #expect(sessions.signIn(token: "con_wrong_0123456789abcdef", now: now) == nil)
        #expect(sessions.signIn(token: serviceToken, now: now) == nil, "the app's tokens never open the console")
        #expect(sessions.signIn(token: String(operatorToken.dropLast()), now: now) == nil)
    }

    @Test("Removing a token ends its sessions and only its; adding one ends none")
    func tokenRemoval() throws {
        let sessions = ConsoleSessions(tokens: tokens)
        let ops = try #require(sessions.signIn(token: operatorToken, now: now))
        let finance = try #require(sessions.signIn(token: financeToken, now: now))
        let withoutOps = ConsoleSessions(tokens: [tokens[1]])
        #expect(withoutOps.verify(ops.value, now: now) == nil)
        #expect(withoutOps.verify(finance.value, now: now) != nil)
        let added = ConsoleSessions(tokens: tokens + [ConsoleToken(token: "con_new_0123456789abcdef")])
        #expect(added.verify(ops.value, now: now) != nil && added.verify(finance.value, now: now) != nil)
    }

    @Test("A tampered cookie is refused: its expiry, session, token id or signature changed, or malformed")
    func tampering() throws {
        let sessions = ConsoleSessions(tokens: tokens)
        let value = try #require(sessions.signIn(token: operatorToken, now: now)).value
        let other = try #require(sessions.signIn(token: financeToken, now: now)).value
        var parts = value.split(separator: ".").map(String.init)
        let otherParts = other.split(separator: ".").map(String.init)
        func with(_ index: Int, _ replacement: String) -> String {
            var copy = parts
            copy[index] = replacement
            return copy.joined(separator: ".")
        }
        let forged = [
            with(3, String(now + 11 * 3600 + 1_000)), with(2, otherParts[2]), with(1, otherParts[1]), with(4, otherParts[4]),
            with(4, String(parts[4].dropLast()) + (parts[4].last == "A" ? "B" : "A")), with(4, Self.lastBitsFlipped(parts[4])),
            with(0, "v2"), "", "v1", value + ".x",
            String(value.dropLast()), value.replacingOccurrences(of: ".", with: "%2E"), String(repeating: "a", count: 10_000),
        ]
        for cookie in forged { #expect(sessions.verify(cookie, now: now) == nil, "\(cookie.prefix(80))") }
        // An expiry pushed beyond 12 h from now is refused even when signed (a clock far behind).
        parts[3] = String(now + 13 * 3600)
        #expect(sessions.verify(parts.joined(separator: "."), now: now) == nil)
        #expect(sessions.verify(value, now: now) != nil)
    }

    /// A base64url text whose last character differs only in the bits no byte uses: decoded
    /// leniently, the same bytes.
    static func lastBitsFlipped(_ text: String) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        guard let last = text.last, let index = alphabet.firstIndex(of: last) else { return text }
        // 32 bytes are 43 characters: the last one carries 4 bits and 2 unused ones.
        return String(text.dropLast()) + String(alphabet[index ^ 1])
    }

    @Test("The CSRF token is bound to its session: another session's, a changed or a missing one is refused")
    func csrf() throws {
        let sessions = ConsoleSessions(tokens: tokens)
        let one = try #require(sessions.signIn(token: operatorToken, now: now)).session
        let two = try #require(sessions.signIn(token: operatorToken, now: now)).session
        let token = sessions.csrfToken(for: one)
        #expect(sessions.checkCSRF(token, for: one))
        #expect(!sessions.checkCSRF(token, for: two))
        #expect(!sessions.checkCSRF(sessions.csrfToken(for: two), for: one))
        #expect(!sessions.checkCSRF(nil, for: one))
        #expect(!sessions.checkCSRF("", for: one))
        #expect(!sessions.checkCSRF(String(token.dropLast()), for: one))
        #expect(!sessions.checkCSRF(token + "=", for: one))
        #expect(!sessions.checkCSRF(Self.lastBitsFlipped(token), for: one), "the same bytes, spelled otherwise")
    }

    @Test("Five wrong tokens in a minute throttle that address, not others, until the first leaves the window")
    func throttle() {
        let throttle = ConsoleSignInThrottle(limit: 5, window: 60)
        for second in 0..<4 { throttle.failed("10.0.0.1", now: now + Int64(second)) }
        #expect(throttle.retryAfter("10.0.0.1", now: now + 4) == nil, "four are allowed")
        throttle.failed("10.0.0.1", now: now + 4)
        #expect(throttle.retryAfter("10.0.0.1", now: now + 5) == 55)
        #expect(throttle.retryAfter("10.0.0.2", now: now + 5) == nil, "another address is not throttled")
        #expect(throttle.retryAfter("10.0.0.1", now: now + 60) == nil, "the first failure left the window")
        throttle.failed("10.0.0.3", now: now)
        throttle.succeeded("10.0.0.3")
        #expect(throttle.retryAfter("10.0.0.3", now: now) == nil)
    }

    @Test("Every interpolated value is escaped: markup, quotes and ampersands cannot break out", arguments: [
        "<script>alert(1)</script>", "\" onmouseover=\"alert(1)", "' autofocus onfocus='x", "a & b &amp; c", "</td></tr><img src=x onerror=1>",
    ])
    func escaping(_ hostile: String) {
        let html: HTML = "<td title=\"\(hostile)\">\(hostile)</td>"
        let escaped = HTML.escape(hostile)
        #expect(html.text == "<td title=\"\(escaped)\">\(escaped)</td>", "the value goes in escaped, the markup around it as written")
        #expect(!escaped.contains { "<>\"'".contains($0) }, "no character that ends text or an attribute survives: \(escaped)")
        let entities = escaped.split(separator: "&", omittingEmptySubsequences: false).dropFirst()
        #expect(entities.allSatisfy { part in ["amp;", "lt;", "gt;", "quot;", "#39;"].contains { part.hasPrefix($0) } }, "every & starts an entity")
        #expect(HTML.escape("a & b") == "a &amp; b")
        #expect(HTML.escape("<\"'>") == "&lt;&quot;&#39;&gt;")
    }

    @Test("Money in each currency's own decimals: cents, yen without decimals, dinars with three; groups and signs")
    func money() {
        #expect(ConsoleFormat.money(1_234, "usd") == "$12.34")
        #expect(ConsoleFormat.money(123_456_789, "eur") == "€1,234,567.89")
        #expect(ConsoleFormat.money(1_200, "jpy") == "¥1,200")
        #expect(ConsoleFormat.money(12_345, "kwd") == "12.345 KWD")
        #expect(ConsoleFormat.money(-500, "gbp") == "−£5.00")
        #expect(ConsoleFormat.money(milliunits: 9_990, "USD") == "$9.99")
        #expect(ConsoleFormat.money(milliunits: 1_200_000, "JPY") == "¥1,200")
    }
}

@Suite("/console over HTTP: off without tokens, sign-in, sessions, CSRF and headers")
struct ConsoleHTTPTests {
    func application(_ ledger: TemporaryLedger, tokens: [ConsoleToken] = [ConsoleToken(label: "ops", token: operatorToken)]) -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [serviceToken]
        dependencies.consoleTokens = tokens
        return makeApplication(dependencies)
    }

    static let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    /// Signs in and returns the `Cookie` header of the session.
    static func signIn(_ client: some TestClientProtocol) async throws -> String {
        try await client.execute(uri: "/console/sign-in", method: .post, headers: form, body: ByteBuffer(string: "token=\(operatorToken)")) { response in
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == "/console/overview")
            let cookie = try #require(response.headers[.setCookie])
            return String(cookie.prefix { $0 != ";" })
        }
    }

    @Test("Without BILLINGD_CONSOLE_TOKENS, /console is an unknown route: 404 JSON")
    func offWithoutTokens() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger, tokens: []).test(.router) { client in
            for path in ["/console", "/console/sign-in", "/console/overview", "/console/static/console.css"] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.status == .notFound, "\(path)")
                    #expect(response.headers[.contentType] == "application/json")
                }
            }
        }
    }

    @Test("Every console answer carries the strict CSP, nosniff, a same-origin referrer policy and no-store; the CSS comes from the binary")
    func headers() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            for path in ["/console/sign-in", "/console/overview", "/console/static/console.css"] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.headers[.contentSecurityPolicy] == ConsoleHeadersMiddleware.contentSecurityPolicy, "\(path)")
                    #expect(response.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
                    #expect(response.headers[HTTPField.Name("Referrer-Policy")!] == "same-origin")
                }
            }
            #expect(ConsoleHeadersMiddleware.contentSecurityPolicy
                == "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
            try await client.execute(uri: "/console/sign-in", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.cacheControl] == "no-store")
                let page = String(buffer: response.body)
                #expect(page.contains("name=\"viewport\""))
                #expect(!page.contains("<script") && !page.contains("style=") && !page.contains("<style"), "no inline script or style")
                #expect(!page.contains("http://") && !page.contains("https://"), "nothing from elsewhere")
            }
            try await client.execute(uri: "/console/static/console.css", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "text/css; charset=utf-8")
                #expect(String(buffer: response.body).contains("@media (max-width: 640px)"), "readable on a phone")
            }
        }
    }

    @Test("A page without a session redirects to the sign-in; the sign-in sets an HttpOnly, SameSite=Strict cookie for /console for 12 h")
    func signIn() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            for path in ["/console", "/console/overview", "/console/customers?q=x", "/console/events", "/console/reconcile"] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.status == .seeOther, "\(path)")
                    #expect(response.headers[.location] == "/console/sign-in")
                }
            }
            try await client.execute(uri: "/console/sign-in", method: .post, headers: Self.form, body: ByteBuffer(string: "token=\(serviceToken)")) { response in
                #expect(response.status == .unauthorized, "the app's token is not an operator token")
                #expect(response.headers[.setCookie] == nil)
            }
            try await client.execute(uri: "/console/sign-in", method: .post, headers: Self.form, body: ByteBuffer(string: "token=\(operatorToken)")) { response in
                let cookie = try #require(response.headers[.setCookie])
                #expect(cookie.hasPrefix("billingd_console=v1."))
                for attribute in ["Max-Age=43200", "Path=/console", "HttpOnly", "SameSite=Strict"] { #expect(cookie.contains(attribute), "\(cookie)") }
                #expect(!cookie.contains("Secure"), "plain HTTP without BILLINGD_CONSOLE_SECURE_COOKIE")
            }
            var https = Self.form
            https[HTTPField.Name("X-Forwarded-Proto")!] = "https"
            try await client.execute(uri: "/console/sign-in", method: .post, headers: https, body: ByteBuffer(string: "token=\(operatorToken)")) { response in
                #expect(response.headers[.setCookie]?.hasSuffix("; Secure") == true, "over TLS (a proxy's X-Forwarded-Proto) the cookie is Secure")
            }
            let cookie = try await Self.signIn(client)
            for path in ["/console/overview", "/console/customers", "/console/events", "/console/reconcile"] {
                try await client.execute(uri: path, method: .get, headers: [.cookie: cookie]) { response in
                    #expect(response.status == .ok, "\(path): \(String(buffer: response.body).prefix(300))")
                    #expect(response.headers[.contentType] == "text/html; charset=utf-8")
                }
            }
        }
    }

    @Test("A state-changing POST without the session's CSRF token, with another's, or from another origin is refused with 403")
    func csrfRefused() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            let cookie = try await Self.signIn(client)
            var headers = Self.form
            headers[.cookie] = cookie
            for body in ["event_id=evt_1&livemode=false", "event_id=evt_1&livemode=false&csrf=", "event_id=evt_1&livemode=false&csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"] {
                try await client.execute(uri: "/console/events/retry", method: .post, headers: headers, body: ByteBuffer(string: body)) { response in
                    #expect(response.status == .forbidden, "\(body)")
                    #expect(response.headers[.contentSecurityPolicy] != nil)
                }
            }
            for path in ["/console/sign-out", "/console/outbox/retry", "/console/outbox/enable", "/console/reconcile/dry-run"] {
                try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: "id=x")) { response in
                    #expect(response.status == .forbidden, "\(path)")
                }
            }
            // No session at all: refused too.
            try await client.execute(uri: "/console/events/retry", method: .post, headers: Self.form, body: ByteBuffer(string: "event_id=evt_1")) { response in
                #expect(response.status == .forbidden)
            }
            // With the page's token the form goes through (nothing to retry here).
            let page = try await client.execute(uri: "/console/events", method: .get, headers: [.cookie: cookie]) { String(buffer: $0.body) }
            let csrf = try #require(page.firstMatch(of: #/name="csrf" value="([^"]+)"/#)?.output.1)
            try await client.execute(
                uri: "/console/events/retry", method: .post, headers: headers, body: ByteBuffer(string: "event_id=evt_1&livemode=false&csrf=\(csrf)")
            ) { response in
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/console/events?notice=not-retried")
            }
            var foreign = headers
            foreign[HTTPField.Name("Origin")!] = "https://evil.example"
            try await client.execute(
                uri: "/console/events/retry", method: .post, headers: foreign, body: ByteBuffer(string: "event_id=evt_1&livemode=false&csrf=\(csrf)")
            ) { response in
                #expect(response.status == .forbidden)
            }
        }
    }

    @Test("Wrong tokens are throttled: the sixth within a minute answers 429 with Retry-After, even with the right token")
    func throttled() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            for _ in 0..<5 {
                try await client.execute(uri: "/console/sign-in", method: .post, headers: Self.form, body: ByteBuffer(string: "token=con_guess_0123456789abcdef")) { response in
                    #expect(response.status == .unauthorized)
                    #expect(String(buffer: response.body).contains("not an operator token"))
                }
            }
            try await client.execute(uri: "/console/sign-in", method: .post, headers: Self.form, body: ByteBuffer(string: "token=\(operatorToken)")) { response in
                #expect(response.status == .tooManyRequests)
                let wait = try #require(response.headers[.retryAfter].flatMap { Int($0) })
                #expect((1...60).contains(wait))
                #expect(response.headers[.setCookie] == nil)
            }
        }
    }

    @Test("The overview shows the metrics API's MRR as money, and hostile values stay text")
    func overviewAndEscaping() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var dependencies = makeDependencies(ledger)
        dependencies.consoleTokens = [ConsoleToken(label: "ops", token: operatorToken)]
        dependencies.metricsFacts = try MetricsScenario.facts
        dependencies.plans = try MetricsScenario.catalog
        dependencies.now = { Date(timeIntervalSince1970: TimeInterval(MetricsScenario.d(40))) }
        let reader = RevenueMetricsReader(facts: try MetricsScenario.facts, configuration: .init(scope: .test, catalog: try MetricsScenario.catalog))
        let expected = try await reader.overview(at: MetricsScenario.d(40)).figures.mrr
        try await makeApplication(dependencies).test(.router) { client in
            let cookie = try await Self.signIn(client)
            let page = try await client.execute(uri: "/console/overview", method: .get, headers: [.cookie: cookie]) { String(buffer: $0.body) }
            #expect(!expected.isEmpty)
            for (currency, split) in expected {
                #expect(page.contains("MRR (\(currency.uppercased()))"))
                #expect(page.contains(ConsoleFormat.money(split.total, currency)), "\(currency)")
            }
            #expect(page.contains("<svg class=\"chart\""), "charts drawn by the server")
            #expect(page.contains("Figures as of 00:00:00 UTC."), "the figures say when they were computed")
            #expect(page.contains("id=\"movement-"), "the movement's numbers in a table")
            let hostile = "<script>alert(1)</script>"
            let search = try await client.execute(
                uri: "/console/customers?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E", method: .get, headers: [.cookie: cookie]) { String(buffer: $0.body) }
            #expect(!search.contains(hostile))
            #expect(search.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        }
    }
}
