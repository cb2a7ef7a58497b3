import BillingTestSupport
import BillingCommands
import BillingCore
import BillingServer
import BillingStore
import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import StripeAPI
import StripeFake
import Testing

/// A StripeFake on loopback, a fresh ledger, and a Reconciler whose libcurl client talks to the fake.
struct ReconcileHarness {
    static let apiKey = "sk_test_fake_0123456789"
    let fake: StripeFake
    let ledger: TemporaryLedger
    let client: StripeClient
    let log: CapturedLog

    static func start(maxRetries: Int = 2, apiKey: String = Self.apiKey) async throws -> ReconcileHarness {
        let fake = try await StripeFake.start(.init(apiKey: Self.apiKey))
        var configuration = StripeClientConfiguration(apiKey: apiKey, baseURL: fake.baseURL, apiVersion: StripeAPIVersion.pinned)
        configuration.requestsPerSecond = 2_000
        configuration.maxRetries = maxRetries
        configuration.maxRetryDelay = .seconds(2)
        let log = CapturedLog()
        let client = StripeClient(configuration: configuration, logger: log.logger(format: .text))
        return ReconcileHarness(fake: fake, ledger: try TemporaryLedger(), client: client, log: log)
    }

    func reconciler(holder: String = "test:1") -> Reconciler {
        Reconciler(
            store: ledger.store, client: client, livemode: false, logger: log.logger(format: .text),
            inbox: SQLiteInbox(database: ledger.database),
            applier: SQLiteApplier(database: ledger.database, configuration: .init(firstRetryDelay: .zero)), holder: holder)
    }

    func run(_ kinds: [ReconcileKind] = ReconcileKind.allCases, dryRun: Bool = false) async throws -> ReconcileReport {
        var options = Reconciler.Options()
        options.kinds = kinds
        options.dryRun = dryRun
        options.applyRecoveredEvents = true
        return try await reconciler().run(options)
    }

    func count(_ table: String, _ condition: String = "1") async throws -> Int {
        try await ledger.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table) WHERE \(condition)") ?? 0 }
    }

    func stop() async {
        await fake.stop()
        ledger.remove()
    }
}

@Suite("Reconcile against StripeFake", .serialized)
struct ReconcileTests {
    static let listKinds: [ReconcileKind] = [.products, .prices, .customers, .subscriptions, .invoices]

    @Test("An empty ledger is filled from Stripe's lists, and a second run finds no drift")
    func fillsThenMatches() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        await harness.fake.seed(customers: 30, subscriptions: 40, invoices: 60, prices: 4, products: 2)

        let first = try await harness.run(Self.listKinds)
        #expect(first.outcome == "completed")
        #expect(first.byKind["customer"]?.missingLocally == 30)
        #expect(first.byKind["subscription"]?.missingLocally == 40)
        #expect(first.byKind["invoice"]?.missingLocally == 60)
        #expect(first.byKind["price"]?.missingLocally == 4)
        #expect(first.byKind["product"]?.missingLocally == 2)
        #expect(first.totalRepaired == 136)
        #expect(try await harness.count("customer") == 30)
        #expect(try await harness.count("subscriptionItem") >= 40)
        #expect(try await harness.count("invoiceLine") >= 60)

        let second = try await harness.run(Self.listKinds)
        #expect(second.totalObjects == 136)
        #expect(second.totalDrift == 0, "a round trip through the ledger must not look like drift: \(second.summary)")
    }

    @Test("Each drift kind is found, --dry-run changes nothing, and a real run repairs it")
    func everyDriftKind() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        await harness.fake.seed(customers: 10, subscriptions: 10, invoices: 10, prices: 2, products: 1)
        _ = try await harness.run(Self.listKinds)

        let customers = await harness.fake.ids(of: .customer)
        let subscriptions = await harness.fake.ids(of: .subscription)
        let invoices = await harness.fake.ids(of: .invoice)
        // Field differs: an e-mail changed with no event.
        try await harness.fake.mutate(.customer, customers[0]) { $0 = $0.setting("email", "changed@example.com") }
        // Gone in Stripe: removed with no event and no stub.
        await harness.fake.remove(.invoice, invoices[0])
        // Missing locally: a subscription created with no event delivered.
        var copy = try #require(await harness.fake.object(.subscription, subscriptions[0]))
        copy = copy.setting("id", "sub_missing0000000001")
        try await harness.fake.insert(copy, as: .subscription)

        let before = try await harness.ledger.database.writer.read { db in try String.fetchAll(db, sql: "SELECT vEventID FROM customer ORDER BY id") }
        let dry = try await harness.run(Self.listKinds, dryRun: true)
        #expect(dry.byKind["customer"]?.fieldDiffers == 1)
        #expect(dry.byKind["customer"]?.fields["email"] == 1)
        #expect(dry.byKind["invoice"]?.goneInStripe == 1)
        #expect(dry.byKind["subscription"]?.missingLocally == 1)
        #expect(dry.totalRepaired == 0)
        let after = try await harness.ledger.database.writer.read { db in try String.fetchAll(db, sql: "SELECT vEventID FROM customer ORDER BY id") }
        #expect(before == after)
        #expect(try await harness.count("invoice", "vDeleted = 1") == 0)
        #expect(try await harness.count("subscription", "id = 'sub_missing0000000001'") == 0)

        let real = try await harness.run(Self.listKinds)
        #expect(real.totalDrift == 3)
        #expect(real.totalRepaired == 3)
        let example = try #require(real.byKind["customer"]?.examples.first)
        #expect(example.id == customers[0])
        #expect(example.fields == ["email"])
        let email = try await harness.ledger.database.writer.read { db in
            try String.fetchOne(db, sql: "SELECT email FROM customer WHERE id = ?", arguments: [customers[0]])
        }
        #expect(email == "changed@example.com")
        #expect(try await harness.count("invoice", "vDeleted = 1 AND id = '\(invoices[0])'") == 1)
        #expect(try await harness.count("subscription", "id = 'sub_missing0000000001'") == 1)

        let clean = try await harness.run(Self.listKinds)
        #expect(clean.totalDrift == 0, "\(clean.summary)")
    }

    @Test("Lists are paged through to the end: 2,500 customers in 25 pages")
    func pagination() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        await harness.fake.seed(customers: 2_500)
        let report = try await harness.run([.customers])
        #expect(report.byKind["customer"]?.listed == 2_500)
        #expect(try await harness.count("customer") == 2_500)
        let pages = await harness.fake.requestCount(matching: .path("/v1/customers", method: "GET"))
        #expect(pages >= 25)
        let requests = await harness.fake.requests(matching: .path("/v1/customers", method: "GET"))
        #expect(requests.dropFirst().allSatisfy { $0.query?.contains("starting_after=") == true })
    }

    @Test("A missed event is recovered through /v1/events, applied once, and its late webhook is a duplicate")
    func missedEventRecovered() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        // No webhook endpoint: every event the fake emits is missed.
        let customer = await harness.fake.createCustomer(email: "late@example.com", metadata: ["app_user_id": "user_late"])
        let product = await harness.fake.createProduct(name: "Pro")
        let price = try await harness.fake.createPrice(product: product, unitAmount: 2_900, lookupKey: "pro_monthly")
        let created = try await harness.fake.createSubscription(customer: customer, price: price)
        let emitted = await harness.fake.events()

        let report = try await harness.run([.events])
        #expect(report.events?.listed == emitted.count)
        #expect(report.events?.recovered == emitted.count)
        #expect(try await harness.count("subscription", "id = '\(created.subscription)' AND status = 'active'") == 1)
        #expect(try await harness.count("inboxEvent", "source = 'api'") == emitted.count)

        // The webhook Stripe retries arrives afterwards: acknowledged, stored once, applied once.
        let event = try #require(emitted.last)
        let body = event.serialized()
        let dependencies = makeDependencies(harness.ledger)
        let app = makeApplication(dependencies)
        try await app.test(.router) { client in
            let response = try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
            #expect(response.status == .ok)
            #expect(response.json["duplicate"] as? Bool == true)
        }
        #expect(try await harness.count("inboxEvent") == emitted.count)

        // A second sweep finds nothing new.
        let again = try await harness.run([.events])
        #expect(again.events?.recovered == 0)
    }

    @Test("A cursor older than 25 days is warned about")
    func staleCursor() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        let now = Int64(Date().timeIntervalSince1970)
        try await SQLiteReconcileRuns(database: harness.ledger.database)
            .advanceEventCursor(account: "", livemode: false, created: now - 26 * 86_400, walkedAt: now - 26 * 86_400)
        let report = try await harness.run([.events])
        let warning = try #require(report.events?.warning)
        #expect(warning.contains("26 days old"))
        #expect(harness.log.text.contains("26 days old"))
    }

    @Test("Payment methods detached and entitlements granted without events are repaired per customer")
    func perCustomerKinds() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        let customer = await harness.fake.createCustomer(email: "pm@example.com")
        let kept = try await harness.fake.attachPaymentMethod(customer: customer)
        let detached = try await harness.fake.attachPaymentMethod(customer: customer)
        try await harness.fake.setActiveEntitlements(customer: customer, lookupKeys: ["projects_unlimited", "priority_support"])
        _ = try await harness.run([.events])
        #expect(try await harness.count("paymentMethod", "customer = '\(customer)' AND vTerminal = 0") == 2)

        try await harness.fake.mutate(.paymentMethod, detached) { $0 = $0.setting("customer", .null) }
        let report = try await harness.run([.customers, .paymentMethods, .entitlements])
        #expect(report.byKind["paymentMethod"]?.goneInStripe == 0)
        #expect(report.byKind["paymentMethod"]?.fieldDiffers == 1)
        #expect(try await harness.count("paymentMethod", "id = '\(detached)' AND vTerminal = 1 AND customer IS NULL") == 1)
        #expect(try await harness.count("paymentMethod", "id = '\(kept)' AND vTerminal = 0") == 1)
        #expect(try await harness.count("activeEntitlement", "customer = '\(customer)'") == 2)
        #expect(report.byKind["entitlementSummary"]?.drift == 0)
    }

    @Test("A second run is refused while another holds the lease; nothing is recorded")
    func overlappingRunsRefused() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        try await SQLiteReconcileRuns(database: harness.ledger.database)
            .acquire(Reconciler.leaseName, holder: "cron:999", ttl: 120, now: Int64(Date().timeIntervalSince1970))
        await #expect(throws: LeaseHeld.self) {
            _ = try await harness.run([.customers])
        }
        #expect(try await harness.count("reconcileRun") == 0)
        #expect(await harness.fake.requestCount() == 0)
    }

    @Test("429 with Retry-After is waited out and the run completes")
    func rateLimited() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        await harness.fake.seed(customers: 150)
        await harness.fake.inject(.status(429, retryAfter: 1), times: 2, matching: .path("/v1/customers"))
        let started = ContinuousClock.now
        let report = try await harness.run([.customers])
        #expect(report.byKind["customer"]?.listed == 150)
        #expect(ContinuousClock.now - started >= .seconds(2), "Retry-After: 1 twice must be honoured")
        #expect(await harness.fake.requestCount(matching: .path("/v1/customers")) == 4)
    }

    @Test("Stripe down past the retries: the run fails, is recorded, and says why without the key")
    func apiDown() async throws {
        let harness = try await ReconcileHarness.start(maxRetries: 1)
        defer { Task { await harness.stop() } }
        await harness.fake.inject(.status(500), times: 10, matching: .path("/v1/customers"))
        let failure = try await #require(throws: Reconciler.Failure.self) {
            _ = try await harness.run([.customers])
        }
        #expect(failure.report.outcome == "failed")
        #expect("\(failure.underlying)".contains("req_"))
        let runs = try await SQLiteReconcileRuns(database: harness.ledger.database).latest(mode: "full")
        #expect(runs.finished?.outcome == .failed)
        #expect(runs.completed == nil)
        #expect(!"\(failure)".contains(ReconcileHarness.apiKey))
        #expect(!harness.log.text.contains(ReconcileHarness.apiKey))
    }

    @Test("A wrong API key fails the run with Stripe's message; the key is in no log line or error")
    func badKey() async throws {
        let wrongKey = "sk_test_wrongKeyABCDEFGHIJ0123456789"
        let harness = try await ReconcileHarness.start(apiKey: wrongKey)
        defer { Task { await harness.stop() } }
        let failure = try await #require(throws: Reconciler.Failure.self) {
            _ = try await harness.run([.customers])
        }
        let error = try #require(failure.underlying as? StripeError)
        #expect(error.kind == .authentication)
        #expect(await harness.fake.requestCount() == 1, "a 401 is not retried")
        #expect(!"\(failure)".contains(wrongKey))
        #expect(!harness.log.text.contains(wrongKey))
        #expect(!harness.log.text.contains("wrongKeyABCDEFGHIJ"))
    }
}

extension JSONValue {
    /// A copy of this object with one member set.
    func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(var members) = self else { return self }
        members[key] = value
        return .object(members)
    }
}

/// `billingd reconcile` as cron runs it: the real binary, its exit status and its JSON.
@Suite("billingd reconcile, the command", .serialized)
struct ReconcileCommandTests {
    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    func reconcile(_ arguments: [String], database: String, fake: StripeFake, apiKey: String = ReconcileHarness.apiKey) async throws -> Result {
        try await billingd(["reconcile"] + arguments, database: database, fake: fake, apiKey: apiKey)
    }

    /// Runs `billingd ARGUMENTS` on the SQLite ledger at `database`, or on the PostgreSQL one at
    /// `databaseURL` when given.
    func billingd(
        _ arguments: [String], database: String, databaseURL: String? = nil, fake: StripeFake, apiKey: String = ReconcileHarness.apiKey
    ) async throws -> Result {
        var settings = [
            "BILLINGD_DATABASE": database, "STRIPE_API_KEY": apiKey, "STRIPE_API_BASE": fake.baseURL, "STRIPE_RATE_LIMIT": "1000",
            "STRIPE_MAX_RETRIES": "1", "BILLINGD_LOG_LEVEL": "trace",
        ]
        if let databaseURL { settings["BILLINGD_DATABASE_URL"] = databaseURL }
        let environment = ChildProcess.environment(clearingBillingdSettings: false, settings)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-reconcile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("stdout").path
        let err = directory.appendingPathComponent("stderr").path
        let process = try ChildProcess.start(DaemonProcess.binaryPath, arguments, environment: environment, standardOutput: out, standardError: err)
        // Waits off the cooperative pool: the in-process fake answers the child on it.
        let termination = try await process.wait(
            failingAfter: .seconds(600), describing: "billingd \(arguments.joined(separator: " "))", standardError: err)
        return Result(
            status: termination.status, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    @Test("Exit 0 with a JSON report when the run completes, drift or not; 75 while another run holds the lease")
    func completesAndRefusesOverlap() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        await harness.fake.seed(customers: 20, subscriptions: 20, invoices: 20, prices: 2, products: 1)
        let database = try #require(harness.ledger.database.path)

        let first = try await reconcile(["--json", "--kinds", "customers,subscriptions,invoices"], database: database, fake: harness.fake)
        #expect(first.status == 0, "\(first.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
        #expect(report["outcome"] as? String == "completed")
        let byKind = try #require(report["by_kind"] as? [String: [String: Any]])
        #expect(byKind["customer"]?["missing_locally"] as? Int == 20)
        #expect(!first.stderr.contains(ReconcileHarness.apiKey), "the key must not be logged, even at trace level")

        try await SQLiteReconcileRuns(database: harness.ledger.database)
            .acquire(Reconciler.leaseName, holder: "cron:4242", ttl: 120, now: Int64(Date().timeIntervalSince1970))
        let second = try await reconcile(["--kinds", "customers"], database: database, fake: harness.fake)
        #expect(second.status == 75)
        #expect(second.stderr.contains("cron:4242"))
    }

    @Test("Two reconciles started at once on one PostgreSQL ledger, as cron on two hosts would: one runs, the other exits 75 naming it")
    func concurrentOnPostgres() async throws {
        let fake = try await StripeFake.start(.init(apiKey: ReconcileHarness.apiKey))
        defer { Task { await fake.stop() } }
        await fake.seed(customers: 20, subscriptions: 0, invoices: 0, prices: 1, products: 1)
        // The run that holds the lease waits 3 s on its first call to Stripe, while the other
        // tries the lease; a second run getting past the lease would be held as well, and exit 0.
        await fake.inject(.delay(.seconds(3)), times: 2)
        try await PostgresTestDatabase.withFreshDatabase { configuration in
            let url = try PostgresTestDatabase.url(of: configuration)
            let unused = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-unused-\(UUID().uuidString).sqlite3").path
            async let first = billingd(["reconcile", "--json", "--kinds", "customers"], database: unused, databaseURL: url, fake: fake)
            async let second = billingd(["reconcile", "--json", "--kinds", "customers"], database: unused, databaseURL: url, fake: fake)
            let results = try await [first, second]
            #expect(results.map(\.status).sorted() == [0, 75], "\(results.map(\.stderr))")
            let ran = try #require(results.first { $0.status == 0 })
            let report = try #require(try JSONSerialization.jsonObject(with: Data(ran.stdout.utf8)) as? [String: Any])
            #expect(report["outcome"] as? String == "completed")
            let byKind = try #require(report["by_kind"] as? [String: [String: Any]])
            #expect(byKind["customer"]?["missing_locally"] as? Int == 20, "the run filled the PostgreSQL ledger")
            let refused = try #require(results.first { $0.status == 75 })
            #expect(refused.stderr.contains("billingd reconcile: ") && refused.stderr.contains("Nothing was done."), "\(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: unused), "no SQLite ledger is made beside the PostgreSQL one")
        }
    }

    @Test("Exit 1 with Stripe's reason when the key is refused; the key is never printed")
    func refusedKey() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        let wrongKey = "sk_test_revokedKey0123456789ABCDEF"
        let result = try await reconcile(["--kinds", "customers"], database: try #require(harness.ledger.database.path), fake: harness.fake, apiKey: wrongKey)
        #expect(result.status == 1)
        #expect(result.stderr.contains("req_"), "the message carries Stripe's request id: \(result.stderr)")
        #expect(!result.stderr.contains(wrongKey))
        #expect(!result.stdout.contains(wrongKey))
        #expect(!result.stderr.contains("revokedKey0123456789"))
    }

    @Test("export invoices --reconcile-first exports what Stripe has even when no webhook arrived")
    func exportReconcilesFirst() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        await harness.fake.seed(customers: 5, subscriptions: 5, invoices: 12, prices: 1, products: 1)
        let database = try #require(harness.ledger.database.path)
        let plain = try await billingd(["export", "invoices", "--test", "--format", "jsonl"], database: database, fake: harness.fake)
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.stdout.isEmpty)

        let reconciled = try await billingd(["export", "invoices", "--test", "--format", "jsonl", "--reconcile-first"], database: database, fake: harness.fake)
        #expect(reconciled.status == 0, "\(reconciled.stderr)")
        let invoices = await harness.fake.ids(of: .invoice)
        let exported = reconciled.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["invoice_id"] as? String
        }
        #expect(Set(exported) == Set(invoices))
        #expect(reconciled.stderr.contains("reconcile run"))

        // A key of the other mode is refused before anything is read.
        let live = try await billingd(["export", "invoices", "--reconcile-first"], database: database, fake: harness.fake)
        #expect(live.status == 64)
        #expect(live.stderr.contains("test-mode key"))
    }

    @Test("Bad arguments exit 64 with a message naming the option")
    func badArguments() async throws {
        let harness = try await ReconcileHarness.start()
        defer { Task { await harness.stop() } }
        let result = try await reconcile(["--kinds", "customers,coupons"], database: try #require(harness.ledger.database.path), fake: harness.fake)
        #expect(result.status == 64)
        #expect(result.stderr.contains("coupons"))
    }
}
