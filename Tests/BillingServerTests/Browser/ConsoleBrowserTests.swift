import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import Testing

private let operatorToken = "con_ops_browser_0123456789abcdef"
private let appToken = "tok_app_browser_0123456789abcdef"
private let day: Int64 = 86_400

/// `billingd serve` (the built binary) with the console on, over a ledger that holds a Pro
/// subscriber paying through Stripe (alice), a delivery that failed (bob's subscription: the
/// ledger refused its write) and two reconcile runs; and Chromium signed in or not.
private struct ConsoleUnderTest {
    let browser: Browser
    let port: Int
    let databasePath: String

    var base: String { "http://127.0.0.1:\(port)" }

    static let failedEvent = "evt_browser_bob_subscription"
    static let screenshots = UserFixtures.root.appendingPathComponent(".build/console-shots")

    /// Seeds a ledger, starts the daemon and a browser, runs `body`, and always stops both.
    static func run(_ body: (ConsoleUnderTest) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-console-browser-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let databasePath = directory.appendingPathComponent("ledger.sqlite3").path
        try await seed(databasePath)
        let daemon = try await DaemonProcess.start(
            databasePath: databasePath,
            extraEnvironment: [
                "BILLINGD_CONSOLE_TOKENS": "ops:\(operatorToken)", "BILLINGD_API_TOKENS": "app:\(appToken)",
                "BILLINGD_PLANS": UserFixtures.url("plans/free-pro-enterprise.yaml").path,
            ],
            standardError: directory.appendingPathComponent("billingd.log").path)
        do {
            try await Browser.with { browser in try await body(ConsoleUnderTest(browser: browser, port: daemon.port, databasePath: databasePath)) }
        } catch {
            await daemon.kill(signal: SIGTERM)
            throw error
        }
        await daemon.kill(signal: SIGTERM)
    }

    /// alice pays $29 a month for Pro; bob's customer is known but his subscription's delivery
    /// failed when the ledger refused the write, and waits an hour for its next try.
    static func seed(_ path: String) async throws {
        let now = Int64(Date().timeIntervalSince1970)
        let database = try SQLiteDatabase.open(path: path)
        defer { try? database.close() }
        var events = UserLedgerBuilder(eventPrefix: "evt_browser_")
        events.add("customer.created", UserFixtures.customer("cus_alice", user: "alice", created: now - 40 * day), created: now - 40 * day)
        events.add(
            "customer.subscription.created",
            UserFixtures.subscription(
                "sub_alice", customer: "cus_alice", status: "active", product: "prod_ProFeedReader", unitAmount: 2900,
                periodStart: now - 10 * day, periodEnd: now + 20 * day, members: ["created": now - 40 * day, "start_date": now - 40 * day]),
            created: now - 40 * day)
        var invoice = UserFixtures.invoice("in_alice", customer: "cus_alice", status: "paid", created: now - 10 * day, subscription: "sub_alice", total: 2900)
        (invoice["total"], invoice["subtotal"]) = (2900, 2900)
        events.add("invoice.paid", invoice, created: now - 10 * day)
        events.add("customer.created", UserFixtures.customer("cus_bob", user: "bob", created: now - 2 * day), created: now - 2 * day)
        var bodies = events.bodies
        var bob = UserFixtures.subscription(
            "sub_bob", customer: "cus_bob", status: "active", product: "prod_ProFeedReader", unitAmount: 2900, periodStart: now - day,
            periodEnd: now + 29 * day)
        bob["livemode"] = false
        let envelope: [String: Any] = [
            "id": failedEvent, "object": "event", "api_version": StripeAPIVersion.pinned, "created": now - day, "livemode": false,
            "pending_webhooks": 1, "type": "customer.subscription.created", "data": ["object": bob],
            "request": ["id": NSNull(), "idempotency_key": NSNull()],
        ]
        bodies.append(Array(try JSONSerialization.data(withJSONObject: envelope, options: [.sortedKeys])))
        let deliveries = try bodies.map { body in
            InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: (now - day) * 1000, source: .webhook, secretIndex: 0)
        }
        _ = try await SQLiteInbox(database: database).insert(deliveries)
        // The ledger refuses bob's subscription once (as a full disk would): a trigger on the
        // applier's connection, gone when it closes.
        try await database.writer.write { db in
            try db.execute(sql: """
                CREATE TEMP TRIGGER refuse_sub_bob BEFORE INSERT ON subscription WHEN NEW.id = 'sub_bob'
                BEGIN SELECT RAISE(ABORT, 'disk full (simulated by the test)'); END
                """)
        }
        let pass = try await SQLiteApplier(database: database, configuration: .init(maximumAttempts: 5, firstRetryDelay: .seconds(3600))).drain()
        #expect(pass.failed == 1 && pass.dead == 0, "bob's subscription failed once and waits for its next try")
        try await database.writer.write { db in try db.execute(sql: "DROP TRIGGER temp.refuse_sub_bob") }
        let runs = SQLiteLedgerStore(database: database).reconcileRuns
        let completed = try await runs.start(mode: "full", holder: "browser-test", dryRun: true, now: now - 3600)
        try await runs.finish(completed, outcome: .completed, totals: .init(objects: 7), error: nil, report: nil, now: now - 3590)
        let failed = try await runs.start(mode: "full", holder: "browser-test", dryRun: false, now: now - 1800)
        try await runs.finish(failed, outcome: .failed, totals: .init(), error: "Stripe answered 401: check STRIPE_API_KEY", report: nil, now: now - 1799)
    }

    // MARK: Steps

    func open(_ path: String) async throws {
        try await browser.go(base + path)
    }

    func signIn() async throws {
        try await open("/console/sign-in")
        try await browser.type(operatorToken, into: "#token")
        try await browser.click("#sign-in")
        try await browser.wait("the overview after signing in") { try await browser.currentURL().hasSuffix("/console/overview") }
    }

    /// The text of the whole page.
    func pageText() async throws -> String {
        try await browser.text("body")
    }

    /// Expects no error and no warning in the browser's console since the last look (a CSP
    /// violation is one), but the failed loads of the pages answered with `statuses`.
    func expectCleanLog(allowing statuses: [Int] = [], _ step: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let problems = try await browser.log().filter { entry in
            guard entry.level == "SEVERE" || entry.level == "WARNING" else { return false }
            return !(entry.source == "network" && statuses.contains { entry.message.contains("status of \($0)") })
        }
        #expect(problems.isEmpty, "the browser's console after \(step): \(problems)", sourceLocation: sourceLocation)
    }

    /// Saves the page as PNG at a desktop and a phone width under `.build/console-shots/`, and
    /// expects the page not to scroll sideways on the phone.
    func screenshots(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try FileManager.default.createDirectory(at: Self.screenshots, withIntermediateDirectories: true)
        for (device, width) in [("desktop", 1280), ("phone", 390)] {
            try await browser.resize(width: width, height: 844)
            let fits = try await browser.execute("return document.documentElement.scrollWidth <= window.innerWidth;") as? Bool
            #expect(fits == true, "\(name) scrolls sideways at \(width) px", sourceLocation: sourceLocation)
            let png = try await browser.screenshot(width: width)
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG", sourceLocation: sourceLocation)
            try png.write(to: Self.screenshots.appendingPathComponent("\(name)-\(device).png"))
        }
        try await browser.resize(width: 1280, height: 900)
    }

    /// `GET /v1/users/{user}/subscription` with the app's token.
    func subscription(_ user: String) async throws -> [String: Any] {
        let (status, data) = try await HTTP.request("\(base)/v1/users/\(user)/subscription", method: "GET", headers: ["Authorization": "Bearer \(appToken)"])
        #expect(status == 200)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// `GET /v1/users/{user}/grants` with the app's token.
    func grants(_ user: String) async throws -> [[String: Any]] {
        let (status, data) = try await HTTP.request("\(base)/v1/users/\(user)/grants", method: "GET", headers: ["Authorization": "Bearer \(appToken)"])
        #expect(status == 200)
        return try #require((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["data"] as? [[String: Any]])
    }
}

@Suite("The console in headless Chromium, against billingd serve", .serialized, .needsBillingdBinary, .needsChromium)
struct ConsoleBrowserTests {
    @Test("A wrong token is refused; signed in, every page renders its figures, fits a phone, and logs no console error")
    func pages() async throws {
        try await ConsoleUnderTest.run { console in
            let browser = console.browser
            try await console.open("/console")
            try await browser.wait("the sign-in") { try await browser.currentURL().hasSuffix("/console/sign-in") }
            #expect(try await browser.title() == "Sign in · billingd")
            try await console.expectCleanLog("the sign-in page")
            try await console.screenshots("sign-in")

            try await browser.type("con_wrong_0123456789abcdef", into: "#token")
            try await browser.click("#sign-in")
            try await browser.wait("the refusal") { !(try await browser.findAll("#sign-in-error")).isEmpty }
            #expect(try await browser.text("#sign-in-error").contains("not an operator token"))
            #expect(try await browser.cookie("billingd_console") == nil, "no session for a wrong token")
            try await console.expectCleanLog(allowing: [401], "a wrong token")
            try await browser.type(appToken, into: "#token")
            try await browser.click("#sign-in")
            try await browser.wait("the second refusal") { try await browser.text("#sign-in-error").contains("not an operator token") }
            #expect(try await browser.currentURL().hasSuffix("/console/sign-in"), "the app's token does not open the console")
            try await console.expectCleanLog(allowing: [401], "the app's token")

            try await console.signIn()
            #expect(try await browser.cookie("billingd_console")?.hasPrefix("v1.") == true)
            let overview = try await console.pageText()
            #expect(overview.contains("MRR (USD)"), "\(overview.prefix(600))")
            #expect(overview.contains("$29.00"), "alice's Pro subscription is the MRR: \(overview.prefix(600))")
            #expect(try await browser.findAll("svg.chart").count == 1, "the MRR line; no empty movement chart")
            // alice has paid the same since 40 days ago: her MRR did not move in the last 30 days.
            #expect(try await browser.text("#no-movement-usd") == "No movement.", "\(overview.prefix(900))")
            let asOf = try await browser.text("#as-of")
            #expect(asOf.range(of: #"^Figures as of (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC\."#, options: .regularExpression) != nil, "\(asOf)")
            try await console.expectCleanLog("the overview")
            try await console.screenshots("overview")

            try await browser.click("nav a[href=\"/console/customers\"]")
            try await browser.wait("the customers page") { try await browser.currentURL().hasSuffix("/console/customers") }
            try await console.screenshots("customers")
            try await browser.type("ada@example.com", into: "#q")
            try await browser.click("#search")
            try await browser.wait("the search's matches") { !(try await browser.findAll("#matches")).isEmpty }
            let matches = try await browser.text("#matches")
            #expect(matches.contains("alice") && matches.contains("bob"), "both customers have the fixture's e-mail: \(matches)")
            try await console.screenshots("customers-search")
            try await browser.type("sub_alice", into: "#q")
            try await browser.click("#search")
            try await browser.wait("alice's page") { !(try await browser.findAll("#tier")).isEmpty }
            #expect(try await browser.text("h1") == "Customer alice")
            #expect(try await browser.text("#tier") == "Pro")
            #expect(try await browser.text("#subscription-table").contains("sub_alice"))
            #expect(try await browser.text("#invoice-table").contains("$29.00"))
            #expect(try await browser.text("#grants").contains("No grant."))
            try await console.expectCleanLog("a customer's page")
            try await console.screenshots("customer")

            try await browser.click("nav a[href=\"/console/events\"]")
            try await browser.wait("the events page") { try await browser.currentURL().hasSuffix("/console/events") }
            #expect(try await browser.text("#count-failed").contains("1"))
            let inbox = try await browser.text("#inbox")
            #expect(inbox.contains(ConsoleUnderTest.failedEvent) && inbox.contains("disk full (simulated by the test)"), "\(inbox)")
            #expect(!inbox.contains("while executing") && !inbox.contains("INSERT"), "the error in one line, the statement it quotes folded away: \(inbox)")
            let idStyle = try await browser.execute("return getComputedStyle(document.querySelector('#inbox code')).whiteSpace;") as? String
            #expect(idStyle == "nowrap", "an event id never breaks per character; the table scrolls instead")
            try await console.expectCleanLog("the events page")
            try await console.screenshots("events")

            try await browser.click("nav a[href=\"/console/reconcile\"]")
            try await browser.wait("the reconcile page") { try await browser.currentURL().hasSuffix("/console/reconcile") }
            let runs = try await browser.text("#runs")
            #expect(runs.contains("completed") && runs.contains("full (dry run)") && runs.contains("7"), "\(runs)")
            #expect(runs.contains("Stripe answered 401: check STRIPE_API_KEY"), "\(runs)")
            try await console.expectCleanLog("the reconcile page")
            try await console.screenshots("reconcile")

            try await browser.click("#sign-out")
            try await browser.wait("the sign-in after signing out") { try await browser.currentURL().hasSuffix("/console/sign-in") }
            try await console.open("/console/overview")
            try await browser.wait("the sign-in again") { try await browser.currentURL().hasSuffix("/console/sign-in") }
            try await console.expectCleanLog("signing out")
        }
    }

    @Test("A grant made on the customer page shows there and in GET /v1/users/{user}/subscription; a missing reason and a past end date are refused readably; revoke ends it")
    func grantFromTheCustomerPage() async throws {
        try await ConsoleUnderTest.run { console in
            let browser = console.browser
            try await console.signIn()
            try await console.open("/console/customers?user=alice")
            #expect(try await browser.text("#tier") == "Pro")

            // A reason of spaces passes the browser's `required`; billingd refuses it.
            try await browser.select("enterprise", in: "#grant-tier")
            try await browser.type("   ", into: "#grant-reason")
            try await browser.click("#grant")
            try await browser.wait("the refusal of an empty reason") { !(try await browser.findAll("#grant-error")).isEmpty }
            let refusal = try await browser.text("#grant-error")
            #expect(refusal.contains("\"reason\"") && refusal.contains("support ticket 4411"), "\(refusal)")
            try await console.expectCleanLog(allowing: [400], "a grant without a reason")

            try await browser.select("date", in: "#grant-length")
            try await browser.execute("document.getElementById('grant-expires-on').value = '2020-01-31';")
            try await browser.type("support ticket 4411", into: "#grant-reason")
            try await browser.click("#grant")
            try await browser.wait("the refusal of a past date") { try await browser.text("#grant-error").contains("has passed") }
            #expect(try await browser.text("#grant-error") == "The end date 2020-01-31 has passed: choose today or a later day.")
            #expect(try await browser.execute("return document.getElementById('grant-reason').value;") as? String == "support ticket 4411", "what was typed is kept")
            #expect(try await browser.execute("return document.getElementById('grant-tier').value;") as? String == "enterprise")
            #expect(try await console.grants("alice").isEmpty, "nothing was granted")
            try await console.expectCleanLog(allowing: [400], "a grant ending in the past")

            try await browser.select("P7D", in: "#grant-length")
            try await browser.execute("document.getElementById('grant-expires-on').value = '';")
            try await browser.click("#grant")
            try await browser.wait("the grant") { try await browser.currentURL().contains("notice=granted") }
            #expect(try await browser.text(".notice").contains("Access granted"))
            #expect(try await browser.text("#tier") == "Enterprise", "the highest tier wins: the grant's Enterprise over Stripe's Pro")
            let table = try await browser.text("#grant-table")
            for expected in ["Enterprise", "active", "support ticket 4411", "console:ops"] { #expect(table.contains(expected), "\(expected) in \(table)") }
            let given = try #require(try await console.grants("alice").first)
            let id = try #require(given["id"] as? String)
            #expect(table.contains(id))
            #expect(given["created_by"] as? String == "console:ops")
            let now = Int64(Date().timeIntervalSince1970)
            #expect(((given["expires_at"] as? Int64) ?? 0) - now <= 7 * day && ((given["expires_at"] as? Int64) ?? 0) - now > 7 * day - 300)
            let subscription = try await console.subscription("alice")
            #expect(subscription["plan"] as? String == "enterprise")
            #expect(subscription["source"] as? String == "grant")
            #expect(subscription["grant_id"] as? String == id)
            try await console.expectCleanLog("a grant")
            try await console.screenshots("customer-grant")

            try await browser.click(".revoke-grant[data-grant=\"\(id)\"]")
            try await browser.wait("the revoke") { try await browser.currentURL().contains("notice=revoked") }
            #expect(try await browser.text("#tier") == "Pro")
            let revoked = try await browser.text("#grant-table")
            #expect(revoked.contains("revoked") && revoked.contains("by console:ops"), "\(revoked)")
            #expect(try await browser.findAll(".revoke-grant").isEmpty, "a revoked grant has no revoke button")
            #expect(try await console.subscription("alice")["source"] as? String == "stripe")
            #expect(try await console.grants("alice").first?["revoked_by"] as? String == "console:ops")
            try await console.expectCleanLog("a revoke")
        }
    }

    @Test("A retry from the events page re-applies the failed delivery: the user gets the subscription it carried")
    func retryFromTheEventsPage() async throws {
        try await ConsoleUnderTest.run { console in
            let browser = console.browser
            try await console.signIn()
            #expect(try await console.subscription("bob")["plan"] as? String == "free", "bob's subscription is not in the ledger")
            try await console.open("/console/events")
            try await browser.click(".retry-event[data-event=\"\(ConsoleUnderTest.failedEvent)\"]")
            try await browser.wait("the retry") { try await browser.currentURL().contains("notice=retried") }
            #expect(try await browser.text(".notice").contains("Queued again"))
            try await browser.wait("the applier to apply it", seconds: 20) {
                try await console.open("/console/events")
                let failed = try await browser.text("#count-failed")
                let retries = try await browser.findAll(".retry-event")
                return failed.contains("0") && retries.isEmpty
            }
            #expect(try await console.pageText().contains("Every delivery is applied."))
            let subscription = try await console.subscription("bob")
            #expect(subscription["plan"] as? String == "pro", "\(subscription)")
            #expect(subscription["source"] as? String == "stripe")
            try await console.open("/console/customers?user=bob")
            #expect(try await browser.text("#subscription-table").contains("sub_bob"))
            try await console.expectCleanLog("a retry")
        }
    }

    @Test("A state-changing POST without the CSRF token is refused: a form stripped of it, and a direct POST with the session cookie")
    func csrfRefused() async throws {
        try await ConsoleUnderTest.run { console in
            let browser = console.browser
            try await console.signIn()
            try await console.open("/console/customers?user=alice")
            try await browser.execute("document.querySelector('#grant-form input[name=csrf]').remove();")
            try await browser.type("no token", into: "#grant-reason")
            try await browser.click("#grant")
            try await browser.wait("the refusal") { try await browser.title().hasPrefix("Forbidden") }
            #expect(try await console.pageText().contains("CSRF token is missing or wrong"))
            try await console.expectCleanLog(allowing: [403], "a form without its CSRF token")

            let cookie = try #require(try await browser.cookie("billingd_console"))
            let headers = ["Cookie": "billingd_console=\(cookie)", "Content-Type": "application/x-www-form-urlencoded"]
            for (path, form) in [
                ("/console/customers/grants", "user=alice&tier=pro&length=P7D&reason=direct"), ("/console/events/retry", "event_id=\(ConsoleUnderTest.failedEvent)&livemode=false"),
            ] {
                let (status, _) = try await HTTP.request(console.base + path, method: "POST", headers: headers, body: Array(form.utf8))
                #expect(status == 403, "\(path)")
            }
            #expect(try await console.grants("alice").isEmpty, "nothing was granted")
            // The same session with the page's token is accepted: the cookie alone was not enough.
            try await console.open("/console/customers?user=alice")
            let csrf = try #require(try await browser.execute("return document.querySelector('#grant-form input[name=csrf]').value;") as? String)
            // (The client follows the 303 to the customer page.)
            let (status, page) = try await HTTP.request(
                console.base + "/console/customers/grants", method: "POST", headers: headers,
                body: Array("user=alice&tier=pro&length=P7D&reason=direct&csrf=\(csrf)".utf8))
            #expect(status == 200)
            #expect(String(decoding: page, as: UTF8.self).contains("Access granted"))
            #expect(try await console.grants("alice").count == 1)
        }
    }
}
