import AsyncHTTPClient
import BillingCore
import BillingLocal
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import StripeAPI
import StripeFake
import Testing

/// `serve`'s daemon run in process, as `billingd serve` builds it from its settings: the real
/// server on a free port, the applier, the reconcile scheduler and their wake-ups.
@Suite("serve's daemon in process", .serialized)
struct DaemonTests {
    static let apiKey = "sk_test_fake_0123456789"
    static let token = "tok_daemon_0123456789abcdef"

    var quiet: Logger {
        var logger = Logger(label: "test.daemon")
        logger.logLevel = .critical
        return logger
    }

    /// The daemon started, and the port it listens on; fails (instead of waiting for good) when
    /// the daemon stops before it listens.
    func start(
        _ daemon: BillingDaemon, ports: AsyncStream<Int>, listening: AsyncStream<Int>.Continuation
    ) async throws -> (Task<Void, any Error>, Int) {
        let running = Task {
            defer { listening.finish() }
            try await daemon.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await running.value
            throw CancellationError()
        }
        return (running, port)
    }

    /// `serve --local` without a Stripe key, with the service API on and the free-pro-team plans.
    func startLocal(_ ledger: TemporaryLedger, plans catalog: String = "free-pro-team.yaml") async throws -> (BillingDaemon, Task<Void, any Error>, Int) {
        let plans = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/plans/\(catalog)").path
        let settings = try Settings.load(
            environment: ["BILLINGD_PORT": "0", "BILLINGD_API_TOKENS": Self.token, "BILLINGD_PLANS": plans], configFile: nil)
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let daemon = try await BillingDaemon(
            settings: settings, store: ledger.store,
            options: .init(local: LocalMode(), gracefulShutdownSignals: [], onListening: { listening.yield($0) }, cancellationLimit: nil), logger: quiet)
        let (running, port) = try await start(daemon, ports: ports, listening: listening)
        return (daemon, running, port)
    }

    /// A signed `customer.created` as Stripe sends it, expected to be acknowledged; its body.
    @discardableResult
    func deliverCustomerCreated(_ eventID: String, to base: String) async throws -> [UInt8] {
        let body = SampleEvent.body(
            type: "customer.created", eventID: eventID, created: Int64(Date().timeIntervalSince1970),
            apiVersion: StripeAPIVersion.pinned, livemode: false, account: nil)
        var post = HTTPClientRequest(url: "\(base)/webhooks/stripe")
        post.method = .POST
        for field in signedHeaders(body) { post.headers.add(name: field.name.rawName, value: field.value) }
        post.body = .bytes(ByteBuffer(bytes: body))
        #expect(try await HTTPClient.shared.execute(post, timeout: .seconds(60)).status.code == 200)
        return body
    }

    func get(_ url: String, token: String? = nil, timeout: TimeAmount = .seconds(60)) async throws -> (status: UInt, json: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response = try await HTTPClient.shared.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
        return (response.status.code, json)
    }

    @Test("Built from settings alone, the daemon acknowledges a signed delivery over HTTP already applied, its sweep recovers a missed subscription the service API then answers, and shutdown stops every service")
    func servesSweepsAndStops() async throws {
        let fake = try await StripeFake.start(.init(apiKey: Self.apiKey))
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        // Created while no webhook endpoint listens: only the daemon's sweep can find it.
        let customer = await fake.createCustomer(email: "swept@example.com", metadata: ["app_user_id": "user_swept"])
        let product = await fake.createProduct(name: "Pro")
        let price = try await fake.createPrice(product: product, unitAmount: 2_900, lookupKey: "pro_monthly")
        let swept = try await fake.createSubscription(customer: customer, price: price)

        let settings = try Settings.load(
            environment: [
                "BILLINGD_PORT": "0", "STRIPE_WEBHOOK_SECRET": testSecret, "STRIPE_API_KEY": Self.apiKey,
                "STRIPE_API_BASE": fake.baseURL, "BILLINGD_API_TOKENS": Self.token, "BILLINGD_EVENTS_SWEEP_INTERVAL": "30s",
                "BILLINGD_RECONCILE_INTERVAL": "off", "BILLINGD_USAGE_REPORT_INTERVAL": "off",
            ], configFile: nil)
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let daemon = try await BillingDaemon(
            settings: settings, store: ledger.store,
            options: .init(gracefulShutdownSignals: [], schedulerInitialDelay: .zero, onListening: { listening.yield($0) }, cancellationLimit: nil),
            logger: quiet)
        let (running, port) = try await start(daemon, ports: ports, listening: listening)
        let base = "http://127.0.0.1:\(port)"

        // A live delivery Stripe sends (of a customer the fake does not hold, so the sweep cannot
        // store it first): acknowledged once stored and applied in the same commit.
        let body = try await deliverCustomerCreated("evt_daemon_live", to: base)
        let stored = try await ledger.store.inbox.list(.init(eventID: try EventEnvelope(decoding: body).id))
        #expect(stored.map(\.status) == [.applied])

        // The sweep lists the fake's events, stores them and wakes the applier: the user the
        // webhooks never told billingd about is subscribed.
        var status: String?
        for _ in 0..<200 where status != "active" {
            let answer = try await get("\(base)/v1/users/user_swept/subscription", token: Self.token)
            status = answer.json["status"] as? String
            if status != "active" { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(status == "active", "the swept subscription \(swept.subscription) reaches the service API")
        let sweep = try await ledger.store.reconcileRuns.latest(mode: "events").completed
        #expect((sweep?.recoveredEvents ?? 0) >= 1, "the events after the delivered one are recovered")
        #expect(try await ledger.store.inbox.count() == (await fake.events().count) + 1, "the sweep stores each of the fake's events once")

        await daemon.shutdown()
        try await running.value
        // Refused now (the client keeps retrying a refused connection until its timeout).
        await #expect(throws: (any Error).self) { try await get("\(base)/healthz", timeout: .seconds(1)) }
        await fake.stop()
    }

    @Test("The start-up line names the PostgreSQL database without its password when BILLINGD_DATABASE_URL is set, else the SQLite file")
    func startupNamesTheDatabase() throws {
        let postgres = try Settings.load(
            environment: ["BILLINGD_DATABASE_URL": "postgres://billingd:s3cret@db.example.com:5432/ledger?sslmode=require"], configFile: nil)
        let named = BillingDaemon.startupSummary(
            postgres, secrets: 1, local: false, catalog: nil, stripe: false, appStore: false, appStoreAPI: [])["database"]
        #expect(named == "postgres://billingd:***@db.example.com:5432/ledger?sslmode=require")
        let sqlite = try Settings.load(environment: ["BILLINGD_DATABASE": "/var/lib/billingd/ledger.sqlite3"], configFile: nil)
        #expect(
            BillingDaemon.startupSummary(sqlite, secrets: 1, local: false, catalog: nil, stripe: false, appStore: false, appStoreAPI: [])["database"]
                == "/var/lib/billingd/ledger.sqlite3")
    }

    @Test("As serve builds it, the daemon closes the store last, once its other services have stopped; what it acknowledged is in the ledger")
    func closesStoreLast() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let settings = try Settings.load(environment: ["BILLINGD_PORT": "0", "STRIPE_WEBHOOK_SECRET": testSecret], configFile: nil)
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let daemon = try await BillingDaemon(
            settings: settings, store: ledger.store,
            options: .init(gracefulShutdownSignals: [], onListening: { listening.yield($0) }, closesStore: true, cancellationLimit: nil), logger: quiet)
        let (running, port) = try await start(daemon, ports: ports, listening: listening)
        try await deliverCustomerCreated("evt_before_close", to: "http://127.0.0.1:\(port)")
        #expect(try await ledger.store.inbox.count() == 1, "open while the daemon runs")

        await daemon.shutdown()
        try await running.value
        await #expect(throws: (any Error).self, "closed once the group has stopped") { try await ledger.store.inbox.count() }
        let reopened = try TemporaryLedger(reopening: ledger)
        #expect(try await reopened.store.inbox.list(.init()).map(\.eventID) == ["evt_before_close"])
        try reopened.database.close()
    }

    @Test("Outside local mode, a daemon without a webhook secret is refused with the setting to set; local mode generates one and keeps it")
    func webhookSecretRequiredOrLocal() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let settings = try Settings.load(environment: ["BILLINGD_PORT": "0"], configFile: nil)
        do {
            _ = try await BillingDaemon(settings: settings, store: ledger.store, logger: quiet)
            Issue.record("a daemon without STRIPE_WEBHOOK_SECRET was built")
        } catch let error as SettingsError {
            #expect(error.description.hasPrefix("STRIPE_WEBHOOK_SECRET is not set."))
            #expect(error.description.contains("billingd serve --local"))
        }
        #expect(try await LocalMode.secret(in: ledger.store, creating: false) == nil)

        var secrets: [String] = []
        for _ in 0..<2 {
            let (ports, listening) = AsyncStream.makeStream(of: Int.self)
            let local = try await BillingDaemon(
                settings: settings, store: ledger.store,
                options: .init(local: LocalMode(), gracefulShutdownSignals: [], onListening: { listening.yield($0) }, cancellationLimit: nil), logger: quiet)
            #expect(local.startup["webhook_secrets"] == "local (generated)")
            let (running, _) = try await start(local, ports: ports, listening: listening)
            await local.shutdown()
            try await running.value
            secrets.append(try #require(try await LocalMode.secret(in: ledger.store, creating: false)))
        }
        #expect(secrets[0].hasPrefix("whsec_local_"))
        #expect(secrets[1] == secrets[0], "a second start keeps the first secret")
    }

    @Test("Local mode without STRIPE_API_KEY: Checkout, Portal and cancel work against the built-in Stripe fake, and paying a Checkout URL subscribes the user through its webhooks (issue 17 item 4)")
    func localStripeFake() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let (daemon, running, port) = try await startLocal(ledger)
        #expect(daemon.startup["stripe_api"]?.hasPrefix("local fake at http://127.0.0.1:") == true, "\(daemon.startup)")
        let base = "http://127.0.0.1:\(port)"
        // A browser does not follow the redirect to the app's success page here.
        let browser = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))

        func post(_ path: String, _ json: String) async throws -> (status: UInt, json: [String: Any]) {
            var request = HTTPClientRequest(url: base + path)
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(Self.token)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 1 << 20)
            return (response.status.code, (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:])
        }
        func open(_ url: String) async throws -> (status: UInt, location: String?) {
            let response = try await browser.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
            _ = try await response.body.collect(upTo: 1 << 20)
            return (response.status.code, response.headers.first(name: "Location"))
        }

        let checkout = try await post(
            "/v1/checkout-sessions",
            #"{"user": "user_local", "plan": "pro", "success_url": "https://app.example.com/done?s={CHECKOUT_SESSION_ID}", "cancel_url": "https://app.example.com/pricing"}"#)
        #expect(checkout.status == 201, "\(checkout.json)")
        let url = try #require(checkout.json["url"] as? String)
        #expect(url.hasPrefix("http://127.0.0.1:"), "a Checkout URL on the fake, not stripe.com: \(url)")
        let paid = try await open(url)
        #expect(paid.status == 303)
        let session = try #require(checkout.json["id"] as? String)
        #expect(paid.location == "https://app.example.com/done?s=\(session)")

        // The fake's events come back signed to /webhooks/stripe: the user is on Pro.
        var plan: String?
        for _ in 0..<200 where plan != "pro" {
            plan = try await get("\(base)/v1/users/user_local/subscription", token: Self.token).json["plan"] as? String
            if plan != "pro" { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(plan == "pro")

        let portal = try await post("/v1/portal-sessions", #"{"user": "user_local", "return_url": "https://app.example.com/account"}"#)
        #expect(portal.status == 201, "\(portal.json)")
        let portalURL = try #require(portal.json["url"] as? String)
        let back = try await open(portalURL)
        #expect(back.status == 303)
        #expect(back.location == "https://app.example.com/account")

        let cancel = try await post("/v1/users/user_local/subscription/cancel", "")
        #expect(cancel.status == 200, "\(cancel.json)")
        var scheduled = false
        for _ in 0..<200 where !scheduled {
            scheduled = try await get("\(base)/v1/users/user_local/subscription", token: Self.token).json["cancel_at_period_end"] as? Bool == true
            if !scheduled { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(scheduled, "the cancellation reaches the ledger through the fake's webhook")

        try await browser.shutdown()
        await daemon.shutdown()
        try await running.value
    }

    @Test(
        "In local mode, trigger has serve's Stripe fake hold the customer it sends, so the portal and Checkout work for a triggered user (issue 17 item 4)",
        .needsBillingdBinary)
    func triggerHeldByLocalFake() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let (daemon, running, port) = try await startLocal(ledger)
        let base = "http://127.0.0.1:\(port)"

        let triggered = try await billingd(
            ["trigger", "customer.created", "--set", "id=cus_triggered", "--set", "metadata.app_user_id=user_triggered", "--url", "\(base)/webhooks/stripe"],
            environment: ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path])
        #expect(triggered.status == 0, "\(triggered.stderr)")
        #expect(triggered.stderr.contains("cus_triggered is held by serve's local Stripe fake"), "\(triggered.stderr)")

        var request = HTTPClientRequest(url: "\(base)/v1/portal-sessions")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(Self.token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: #"{"user": "user_triggered", "return_url": "https://app.example.com/account"}"#))
        let portal = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let answer = String(buffer: try await portal.body.collect(upTo: 1 << 20))
        #expect(portal.status.code == 201, "the fake knows the triggered customer: \(answer)")

        await daemon.shutdown()
        try await running.value
    }

    @Test(
        "In local mode, serve's App Store fake acts out `appstore trigger` and sends the notifications; the service API follows, `appstore history` reaches the fake, and a trigger the state forbids says what would work (issue 17 item 4)",
        .needsBillingdBinary)
    func appStoreThroughLocalFake() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let (daemon, running, port) = try await startLocal(ledger, plans: "usage.yaml")
        let base = "http://127.0.0.1:\(port)"
        let environment = ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path, "BILLINGD_PORT": "\(port)"]
        func trigger(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await billingd(["appstore", "trigger"] + arguments + ["--product", "com.example.pro.monthly"], environment: environment)
        }
        /// The subscription view once the applier has caught up with what the trigger stored.
        func subscription(_ user: String, until done: ([String: Any]) -> Bool) async throws -> [String: Any] {
            var json: [String: Any] = [:]
            for _ in 0..<100 {
                json = try await get("\(base)/v1/users/\(user)/subscription", token: Self.token).json
                if done(json) { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            return json
        }

        let bought = try await trigger(["SUBSCRIBED", "--user", "user_ios"])
        #expect(bought.status == 0, "\(bought.stderr)")
        #expect(bought.stdout.contains("SUBSCRIBED/INITIAL_BUY") && bought.stdout.contains("sent by serve's local App Store fake"), "\(bought.stdout)")
        let original = try #require(bought.stdout.firstMatch(of: /original transaction (\d{16})/)?.1).description
        let pro = try await subscription("user_ios") { $0["plan"] as? String == "pro" }
        #expect(pro["plan"] as? String == "pro" && pro["source"] as? String == "app_store", "\(pro)")
        #expect(pro["subscription_id"] as? String == original, "\(pro)")

        // The purchase as the device holds it, forwarded by the app as the README shows: idempotent.
        let jws = try #require(bought.stdout.split(separator: "\n").last.map(String.init))
        #expect(jws.hasPrefix("eyJ") && jws.split(separator: ".").count == 3, "\(bought.stdout)")
        var forward = HTTPClientRequest(url: "\(base)/v1/users/user_ios/appstore/transactions")
        forward.method = .POST
        forward.headers.add(name: "Authorization", value: "Bearer \(Self.token)")
        forward.headers.add(name: "Content-Type", value: "application/json")
        forward.body = .bytes(ByteBuffer(string: #"{"signed_transaction": "\#(jws)"}"#))
        let forwarded = try await HTTPClient.shared.execute(forward, timeout: .seconds(30))
        let forwardedBody = String(buffer: try await forwarded.body.collect(upTo: 1 << 20))
        #expect(forwarded.status.code == 200 && forwardedBody.contains(#""plan":"pro""#), "\(forwardedBody)")

        // `inspect` finds the purchase by its original transaction id, with its owner and events.
        let inspected = try await billingd(["inspect", original], environment: environment)
        #expect(inspected.status == 0, "\(inspected.stderr)")
        let view = try #require(try JSONSerialization.jsonObject(with: Data(inspected.stdout.utf8)) as? [String: Any])
        let object = try #require(view["object"] as? [String: Any])
        #expect(object["kind"] as? String == "app_store_subscription" && object["product_id"] as? String == "com.example.pro.monthly")
        #expect((object["owner"] as? [String: Any])?["app_user_id"] as? String == "user_ios", "\(object)")
        #expect((object["transactions"] as? [[String: Any]])?.count == 1)
        #expect((view["events"] as? [[String: Any]])?.first?["type"] as? String == "SUBSCRIBED")

        // The fake holds the purchase: the Server API's history of it comes from the fake.
        let history = try await billingd(["appstore", "history", original], environment: environment)
        #expect(history.status == 0, "\(history.stderr)")
        #expect(history.stdout.contains("1 transactions in Sandbox") && history.stdout.contains(original), "\(history.stdout)")

        let failed = try await trigger(["DID_FAIL_TO_RENEW", "--subtype", "GRACE_PERIOD", "--user", "user_ios"])
        #expect(failed.status == 0 && failed.stdout.contains("DID_FAIL_TO_RENEW/GRACE_PERIOD"), "\(failed.stdout) \(failed.stderr)")
        let grace = try await subscription("user_ios") { $0["billing_issue"] as? Bool == true }
        #expect(grace["billing_issue"] as? Bool == true && grace["plan"] as? String == "pro", "\(grace)")

        // A plain renewal cannot happen while payment fails: refused with what would work.
        let refused = try await trigger(["DID_RENEW", "--user", "user_ios"])
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(refused.stderr.contains("--subtype BILLING_RECOVERY"), "\(refused.stderr)")

        let refunded = try await trigger(["REFUND", "--user", "user_ios"])
        #expect(refunded.status == 0 && refunded.stdout.contains("REFUND"), "\(refunded.stderr)")
        let free = try await subscription("user_ios") { $0["plan"] as? String == "free" }
        #expect(free["plan"] as? String == "free", "\(free)")

        // Expiry after billing retry walks the subscription through every notification on the way.
        _ = try await trigger(["SUBSCRIBED", "--user", "user_retry"])
        let expired = try await trigger(["EXPIRED", "--subtype", "BILLING_RETRY", "--user", "user_retry"])
        #expect(expired.status == 0, "\(expired.stderr)")
        let sent = expired.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(sent == ["DID_FAIL_TO_RENEW", "EXPIRED/BILLING_RETRY"], "\(expired.stdout)")

        await daemon.shutdown()
        try await running.value

        // serve is gone: the trigger says so, signs the notification itself, and finds no one to post to.
        let stopped = try await trigger(["SUBSCRIBED", "--user", "user_late"])
        #expect(stopped.status == 69, "\(stopped.stdout)")
        #expect(stopped.stderr.contains("local App Store fake") && stopped.stderr.contains("did not answer"), "\(stopped.stderr)")
    }

    @Test(
        "In local mode a refund request triggered through serve's App Store fake is answered through it once the user consented, and `appstore consumption list` shows the answer",
        .needsBillingdBinary)
    func refundRequestThroughLocalFake() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let (daemon, running, port) = try await startLocal(ledger, plans: "free-pro-enterprise.yaml")
        #expect(daemon.startup["refund_requests"] == "answered (Sandbox; refund preference none)", "\(daemon.startup)")
        let base = "http://127.0.0.1:\(port)"
        let environment = ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path, "BILLINGD_PORT": "\(port)"]
        let bought = try await billingd(
            ["appstore", "trigger", "SUBSCRIBED", "--user", "user_refund", "--product", "com.example.pro.monthly"], environment: environment)
        #expect(bought.status == 0, "\(bought.stderr)")

        var consent = HTTPClientRequest(url: "\(base)/v1/users/user_refund/appstore/consumption-consent")
        consent.method = .PUT
        consent.headers.add(name: "Authorization", value: "Bearer \(Self.token)")
        consent.headers.add(name: "Content-Type", value: "application/json")
        consent.body = .bytes(ByteBuffer(string: #"{"consented": true}"#))
        let consented = try await HTTPClient.shared.execute(consent, timeout: .seconds(30))
        #expect(consented.status.code == 200)
        _ = try await consented.body.collect(upTo: 1 << 16)

        let asked = try await billingd(
            ["appstore", "trigger", "CONSUMPTION_REQUEST", "--user", "user_refund", "--product", "com.example.pro.monthly"], environment: environment)
        #expect(asked.status == 0, "\(asked.stderr)")
        #expect(asked.stdout.contains("CONSUMPTION_REQUEST") && asked.stdout.contains("billingd appstore consumption list"), "\(asked.stdout)")

        // The responder looks every 5 seconds.
        var row: [String: Any] = [:]
        for _ in 0..<60 where row["status"] as? String != "sent" {
            let listed = try await billingd(["appstore", "consumption", "list", "--json"], environment: environment)
            #expect(listed.status == 0, "\(listed.stderr)")
            row = (try? JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])?.first ?? [:]
            if row["status"] as? String != "sent" { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(row["status"] as? String == "sent" && row["user"] as? String == "user_refund" && row["apple_status"] as? Int == 202, "\(row)")
        let body = try #require(row["body"] as? [String: Any])
        #expect(body["customerConsented"] as? Bool == true && body["deliveryStatus"] as? String == "DELIVERED")
        #expect(body["sampleContentProvided"] as? Bool == true && body["consumptionPercentage"] == nil && body["refundPreference"] == nil, "\(body)")

        await daemon.shutdown()
        try await running.value
    }
}
