import APITransport
import AppStoreAPI
import AppStoreFake
import BillingCore
import BillingServer
import BillingStore
import BillingTestSupport
import Crypto
import Foundation
import GRDB
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// The backend of a responder test's store.
enum ResponderBackend: String, CaseIterable, Sendable {
    case sqlite, postgres
}

/// A responder test's world: AppStoreFake on loopback with billingd's key, a store of one backend,
/// and the responder over them, on a clock the test moves.
struct ConsumptionWorld {
    static let product = "com.example.pro.monthly"
    static let catalog = try! PlanCatalog(tiers: [
        PlanTier(id: "free", name: "Free", rank: 0),
        PlanTier(
            id: "pro", name: "Pro", rank: 10, appStoreProducts: [product, "com.example.pass.month"],
            appStorePeriods: ["com.example.pass.month": .oneMonth], appStoreSampleContentProvided: true),
    ])

    /// Unix ms, moved by the test; what the responder calls now.
    final class Clock: Sendable {
        private let value: Mutex<Int64>
        init(_ start: Int64) { value = Mutex(start) }
        var now: Int64 { value.withLock { $0 } }
        func advance(by milliseconds: Int64) { value.withLock { $0 += milliseconds } }
    }

    let apple: FakeAppleHarness
    let store: any LedgerStore
    let clock: Clock

    var fake: AppStoreFake { apple.fake }

    static var quiet: Logger {
        var logger = Logger(label: "test.consumption")
        logger.logLevel = .critical
        return logger
    }

    /// Runs `body` in a world of `backend`; the PostgreSQL side needs BILLINGD_TEST_DATABASE_URL.
    static func with(_ backend: ResponderBackend, _ body: (ConsumptionWorld) async throws -> Void) async throws {
        let apple = try await FakeAppleHarness()
        do {
            switch backend {
            case .sqlite:
                try await body(ConsumptionWorld(apple: apple, store: apple.ledger.store, clock: Clock(apple.fake.now)))
            case .postgres:
                try await PostgresTestDatabase.withStore { store in
                    try await body(ConsumptionWorld(apple: apple, store: store, clock: Clock(apple.fake.now)))
                }
            }
        } catch {
            await apple.stop()
            throw error
        }
        await apple.stop()
    }

    var now: Int64 { clock.now }

    func advance(by milliseconds: Int64) { clock.advance(by: milliseconds) }

    /// A responder answering the Sandbox through `client` (the harness's, retrying, by default).
    func responder(
        refund: AppStoreRefundPolicy = .none, client: AppStoreClient? = nil, configure: (inout ConsumptionResponder.Configuration) -> Void = { _ in }
    ) -> ConsumptionResponder {
        var configuration = ConsumptionResponder.Configuration(policy: ConsumptionAnswerPolicy(refund: refund), catalog: Self.catalog)
        let clock = self.clock
        configuration.now = { clock.now }
        configure(&configuration)
        return ConsumptionResponder(
            store: store.appStoreConsumption, usage: store.usage, clients: [.sandbox: client ?? apple.client], configuration: configuration,
            logger: Self.quiet)
    }

    /// The harness's client without retries of its own, so that the responder's retries show.
    func clientWithoutRetries() -> AppStoreClient {
        AppStoreClient(
            configuration: AppStoreClientConfiguration(
                issuerID: FakeAppleHarness.issuerID, keyID: FakeAppleHarness.keyID, privateKey: apple.key, bundleID: AppStoreTestbed.bundleID,
                environment: .sandbox, baseURL: fake.baseURL, maxRetries: 0),
            verifier: apple.verifier, transport: CurlTransport(maxConnections: 2))
    }

    /// A purchase of `user` (through their appAccountToken, so the ledger ties it to them).
    func subscribe(_ user: String, product: String = product) async throws -> AppStoreFake.Purchase {
        try await fake.subscribe(productID: product, appAccountToken: try await store.appStore.accountToken(for: user))
    }

    /// Has the fake send `CONSUMPTION_REQUEST` for a transaction, and stores it as the webhook does
    /// (applied in the commit that stores it), `times` times; returns its UUID.
    @discardableResult
    func requestRefund(of transactionID: String, times: Int = 1) async throws -> String {
        let uuid = try await fake.requestConsumption(transactionID: transactionID)
        let notification = try #require(await fake.notificationHistory.first { $0.notificationUUID == uuid })
        let body = Array(try JSONSerialization.data(withJSONObject: ["signedPayload": notification.signedPayload]))
        let applier = store.applier(.init())
        for _ in 0..<times {
            let delivery = InboxDelivery.appStore(try AppStoreNotification(storedBody: body), body: body, receivedAt: now)
            _ = try await applier.ingest([applier.prepare(delivery)], now: now)
        }
        return uuid
    }

    func request(_ uuid: String) async throws -> AppStoreConsumptionRequest {
        try #require(try await store.appStoreConsumption.requests(status: nil, limit: 1000).first { $0.notificationUUID == uuid })
    }

    func consent(_ user: String, _ consented: Bool = true) async throws {
        _ = try await store.appStoreConsumption.setConsent(of: user, consented: consented, now: now / 1000)
    }

    var puts: [AppStoreFake.RecordedRequest] {
        get async { await fake.requests(matching: .path("/inApps/v2/transactions/consumption", method: "PUT")) }
    }
}

@Suite("Answering Apple's refund requests: the responder against AppStoreFake")
struct ConsumptionResponderTests {
    typealias World = ConsumptionWorld

    @Test("Without the user's consent nothing is sent: the request is no_consent", arguments: ResponderBackend.allCases)
    func noConsent(_ backend: ResponderBackend) async throws {
        try await World.with(backend) { world in
            let purchase = try await world.subscribe("user_1")
            try await world.consent("user_2")
            let uuid = try await world.requestRefund(of: purchase.transactionID)
            let pass = try await world.responder().answerDue()
            #expect(pass.noConsent == 1 && pass.sent == 0)
            #expect(await world.puts.isEmpty, "nothing reached Apple")
            let request = try await world.request(uuid)
            #expect(request.status == .noConsent && request.user == "user_1" && request.attempts == 0 && request.body == nil)

            // Consent withdrawn is no consent either.
            try await world.consent("user_1", false)
            let again = try await world.requestRefund(of: purchase.transactionID)
            _ = try await world.responder().answerDue()
            #expect(try await world.request(again).status == .noConsent)
            #expect(await world.puts.isEmpty)
        }
    }

    @Test("With consent, exactly one PUT with the documented body; answered, it is sent, kept with Apple's 202, and in the timeline", arguments: ResponderBackend.allCases)
    func answered(_ backend: ResponderBackend) async throws {
        try await World.with(backend) { world in
            let purchase = try await world.subscribe("user_1")
            try await world.consent("user_1")
            let uuid = try await world.requestRefund(of: purchase.transactionID)
            let responder = world.responder(refund: .decline)
            let pass = try await responder.answerDue()
            #expect(pass.sent == 1 && pass.claimed == 1)

            let puts = await world.puts
            #expect(puts.count == 1)
            #expect(puts.first?.path == "/inApps/v2/transactions/consumption/\(purchase.transactionID)")
            let expected = #"{"customerConsented":true,"deliveryStatus":"DELIVERED","refundPreference":"DECLINE","sampleContentProvided":true}"#
            #expect(puts.first.map { String(decoding: $0.body, as: UTF8.self) } == expected)
            #expect(await world.fake.consumptionAnswers.count == 1, "Apple took it")

            let request = try await world.request(uuid)
            #expect(request.status == .sent && request.appleStatus == 202 && request.attempts == 1 && request.sentAt == world.now)
            #expect(request.body.map { String(decoding: $0, as: UTF8.self) } == expected)
            #expect(request.lastError == nil && request.nextAttemptAt == nil)

            // Nothing more to do.
            #expect(try await responder.answerDue().claimed == 0)
            #expect(await world.puts.count == 1)

            let timeline = try await world.store.timeline.timeline(of: "user_1", in: .test, limit: 50, after: nil, now: world.now / 1000)
            let item = try #require(timeline.items.first { $0.kind == .appStoreConsumptionRequest })
            #expect(item.ref == uuid)
            #expect(item.summary.hasSuffix("DELIVERED, refund preference DECLINE, sample content provided"), "\(item.summary)")
        }
    }

    @Test("The same notification delivered twice, and two replicas answering at once: each request is answered once", arguments: ResponderBackend.allCases)
    func answeredOnce(_ backend: ResponderBackend) async throws {
        try await World.with(backend) { world in
            var uuids: [String] = []
            for index in 0..<4 {
                let purchase = try await world.subscribe("user_\(index)")
                try await world.consent("user_\(index)")
                uuids.append(try await world.requestRefund(of: purchase.transactionID, times: 2))
            }
            #expect(try await world.store.appStoreConsumption.requests(status: nil, limit: 100).count == 4, "one request per notification")
            let replicas = [world.responder(configure: { $0.batchSize = 1 }), world.responder(configure: { $0.batchSize = 1 })]
            let passes = try await withThrowingTaskGroup(of: ConsumptionResponder.Pass.self) { group in
                for replica in replicas { group.addTask { try await replica.answerDue() } }
                var passes: [ConsumptionResponder.Pass] = []
                for try await pass in group { passes.append(pass) }
                return passes
            }
            #expect(passes.map(\.sent).reduce(0, +) == 4)
            let puts = await world.puts
            #expect(puts.count == 4 && Set(puts.map(\.path)).count == 4, "\(puts)")
            for uuid in uuids { #expect(try await world.request(uuid).status == .sent) }
        }
    }

    @Test("A 503 is retried: by the client within the call, and by the responder with backoff when the call gives up")
    func retried() async throws {
        try await World.with(.sqlite) { world in
            try await world.consent("user_1")
            let first = try await world.requestRefund(of: try await world.subscribe("user_1").transactionID)
            await world.fake.inject(.status(503), times: 1, matching: .path("/inApps/v2/transactions/consumption", method: "PUT"))
            #expect(try await world.responder().answerDue().sent == 1)
            #expect(await world.puts.count == 2, "the client's own retry")
            #expect(try await world.request(first).attempts == 1)

            let second = try await world.requestRefund(of: try await world.subscribe("user_1", product: "com.example.pro.yearly").transactionID)
            await world.fake.inject(.status(503), times: 1, matching: .path("/inApps/v2/transactions/consumption", method: "PUT"))
            let responder = world.responder(client: world.clientWithoutRetries())
            let failedPass = try await responder.answerDue()
            #expect(failedPass.retried == 1 && failedPass.sent == 0)
            var request = try await world.request(second)
            #expect(request.status == .pending && request.attempts == 1 && request.appleStatus == 503)
            #expect(request.lastError?.contains("HTTP 503") == true, "\(request.lastError ?? "")")
            let retryAt = try #require(request.nextAttemptAt)
            #expect((world.now + 22_500...world.now + 37_500).contains(retryAt), "the first retry 30 s (±25 %) later")
            #expect(try await responder.answerDue().claimed == 0, "not before its time")

            world.advance(by: 40_000)
            #expect(try await responder.answerDue().sent == 1)
            request = try await world.request(second)
            #expect(request.status == .sent && request.attempts == 2 && request.appleStatus == 202)
            #expect(await world.fake.consumptionAnswers.map(\.transactionID).count == 2)
        }
    }

    @Test("Apple's 400 fails the request with Apple's error, and it is not sent again")
    func refused() async throws {
        try await World.with(.sqlite) { world in
            try await world.consent("user_1")
            let uuid = try await world.requestRefund(of: try await world.subscribe("user_1").transactionID)
            await world.fake.inject(.error(.invalidCustomerConsented), times: 1, matching: .path("/inApps/v2/transactions/consumption", method: "PUT"))
            let responder = world.responder()
            #expect(try await responder.answerDue().failed == 1)
            let request = try await world.request(uuid)
            #expect(request.status == .failed && request.appleStatus == 400 && request.nextAttemptAt == nil)
            #expect(request.lastError?.contains("4000035") == true, "\(request.lastError ?? "")")
            world.advance(by: 3_600_000)
            #expect(try await responder.answerDue().claimed == 0)
            #expect(await world.puts.count == 1)
        }
    }

    @Test("Past Apple's 12 hours nothing is sent: the request expires", arguments: ResponderBackend.allCases)
    func expired(_ backend: ResponderBackend) async throws {
        try await World.with(backend) { world in
            try await world.consent("user_1")
            let uuid = try await world.requestRefund(of: try await world.subscribe("user_1").transactionID)
            // The fake signed the request a moment after the world's clock started.
            world.advance(by: 12 * 3_600_000 + 60_000)
            let pass = try await world.responder().answerDue()
            #expect(pass.expired == 1 && pass.sent == 0)
            #expect(try await world.request(uuid).status == .expired)
            #expect(await world.puts.isEmpty)
        }
    }

    @Test("Each APPSTORE_REFUND_PREFERENCE reaches Apple; no consumption percentage for an auto-renewable subscription, the time used of a non-renewing one", arguments: AppStoreRefundPolicy.fixed)
    func bodyRules(_ setting: AppStoreRefundPolicy) async throws {
        try await World.with(.sqlite) { world in
            try await world.consent("user_1")
            await world.fake.define(AppStoreFake.Product(id: "com.example.pass.month", kind: .nonRenewing, price: 4990))
            await world.fake.define(AppStoreFake.Product(id: "com.example.coins", kind: .consumable, price: 990))
            let token = try await world.store.appStore.accountToken(for: "user_1")
            let subscription = try await world.subscribe("user_1")
            let pass = try await world.fake.purchase(productID: "com.example.pass.month", appAccountToken: token, at: world.now - 86_400_000)
            let coins = try await world.fake.purchase(productID: "com.example.coins", appAccountToken: token)
            for id in [subscription.transactionID, pass.transactionID, coins.transactionID] { try await world.requestRefund(of: id) }

            #expect(try await world.responder(refund: setting).answerDue().sent == 3, "Apple took every answer")
            let answers = Dictionary(uniqueKeysWithValues: await world.fake.consumptionAnswers.map { ($0.transactionID, $0) })
            for answer in answers.values { #expect(answer.refundPreference == setting.preference(shareUsed: nil)?.rawValue) }
            #expect(answers[subscription.transactionID]?.consumptionPercentage == nil)
            #expect(answers[subscription.transactionID]?.sampleContentProvided == true, "the catalog's sample_content_provided")
            #expect(answers[coins.transactionID]?.consumptionPercentage == nil, "a consumable's use is unknown to billingd")
            #expect(answers[coins.transactionID]?.sampleContentProvided == false, "a product the catalog does not map")
            // A day of the catalog's month (30.44 days in Production).
            let share = try #require(answers[pass.transactionID]?.consumptionPercentage)
            #expect((3_200...3_300).contains(share), "\(share)")
        }
    }

    @Test("by_usage with a consumption_meter: the share of the tier's limit used during each purchase decides the preference, and is the percentage sent for a consumable", arguments: ResponderBackend.allCases)
    func byUsage(_ backend: ResponderBackend) async throws {
        let exports = UsageMeter(id: "exports", kind: .counter, limit: "exports")
        let catalog = try PlanCatalog(
            tiers: [
                PlanTier(id: "free", name: "Free", rank: 0, limits: [PlanLimit(key: "exports", value: .count(0))]),
                PlanTier(
                    id: "pro", name: "Pro", rank: 10, appStoreProducts: [World.product, "com.example.credits", "com.example.badge"],
                    limits: [PlanLimit(key: "exports", value: .count(200))],
                    appStoreConsumptionMeters: [World.product: "exports", "com.example.credits": "exports"]),
            ],
            meters: [exports])
        try await World.with(backend) { world in
            try await world.consent("user_1")
            await world.fake.define(AppStoreFake.Product(id: "com.example.credits", kind: .consumable, price: 990))
            await world.fake.define(AppStoreFake.Product(id: "com.example.badge", kind: .nonConsumable, price: 190))
            let token = try await world.store.appStore.accountToken(for: "user_1")
            let subscription = try await world.subscribe("user_1")
            let credits = try await world.fake.purchase(productID: "com.example.credits", appAccountToken: token)
            let badge = try await world.fake.purchase(productID: "com.example.badge", appAccountToken: token)
            // 90 of the tier's 200 exports during the purchases (45 %), and 500 a day before them, which do not count;
            // the answer comes a few seconds after the last purchase.
            let latest = [subscription, credits, badge].map(\.purchaseDate).max()!
            world.advance(by: max(0, latest - world.now) + 5_000)
            let second = latest / 1000 + 1
            for (quantity, at, key) in [(Int64(500), second - 86_400, "before"), (40, second, "during-1"), (50, second, "during-2")] {
                let input = UsageRecordInput(
                    scope: .test, user: "user_1", meter: exports, quantity: quantity, timestamp: at, idempotencyKey: key,
                    period: .calendarMonth(containing: at), limit: .count(200))
                _ = try await world.store.usage.apply([.record(input)], now: at)
            }
            // Another user's use is not this buyer's.
            _ = try await world.store.usage.apply([.record(UsageRecordInput(
                scope: .test, user: "user_2", meter: exports, quantity: 150, timestamp: second, idempotencyKey: "other",
                period: .calendarMonth(containing: second), limit: .count(200)))], now: second)
            for id in [subscription.transactionID, credits.transactionID, badge.transactionID] { try await world.requestRefund(of: id) }

            let thresholds = try #require(RefundUsageThresholds(grantFullBelow: 10_000, declineFrom: 40_000))
            let responder = world.responder(refund: .byUsage(thresholds)) { $0.catalog = catalog }
            #expect(try await responder.answerDue().sent == 3, "Apple took every answer")
            let answers = Dictionary(uniqueKeysWithValues: await world.fake.consumptionAnswers.map { ($0.transactionID, $0) })
            let renewing = try #require(answers[subscription.transactionID])
            #expect(renewing.refundPreference == "DECLINE" && renewing.consumptionPercentage == nil, "45 % used; Apple computes a subscription's share")
            let consumable = try #require(answers[credits.transactionID])
            #expect(consumable.refundPreference == "DECLINE" && consumable.consumptionPercentage == 45_000)
            // No meter and no period: the share is unknown, and Apple decides.
            let unmetered = try #require(answers[badge.transactionID])
            #expect(unmetered.refundPreference == nil && unmetered.consumptionPercentage == nil)
        }
    }

    @Test("A purchase the user's entitlement history shows never entitled them is answered UNDELIVERED_OTHER, with 0 consumed where Apple takes a share")
    func undelivered() async throws {
        try await World.with(.sqlite) { world in
            try await world.consent("user_1")
            await world.fake.define(AppStoreFake.Product(id: "com.example.pass.month", kind: .nonRenewing, price: 4990))
            let token = try await world.store.appStore.accountToken(for: "user_1")
            let pass = try await world.fake.purchase(productID: "com.example.pass.month", appAccountToken: token)
            // The access the ledger's changes left the user with: only ever through the web.
            try await world.apple.ledger.database.writer.write { db in
                try db.execute(sql: """
                    INSERT INTO entitlementChange (account, livemode, "user", at, tier, entitled, source, validUntil, why, ref)
                    VALUES ('', 0, 'user_1', 1, 'pro', 1, 'stripe', NULL, 'subscribed', 'sub_web')
                    """)
            }
            try await world.requestRefund(of: pass.transactionID)
            #expect(try await world.responder().answerDue().sent == 1)
            let answer = try #require(await world.fake.consumptionAnswers.first)
            #expect(answer.deliveryStatus == "UNDELIVERED_OTHER" && answer.consumptionPercentage == 0)
        }
    }

    @Test("The attempt and its body are recorded before the call: a crash during it leaves a request that says a call may have been made")
    func recordedBeforeCall() async throws {
        try await World.with(.sqlite) { world in
            try await world.consent("user_1")
            let uuid = try await world.requestRefund(of: try await world.subscribe("user_1").transactionID)
            await world.fake.inject(.delay(.seconds(2)), times: 1, matching: .path("/inApps/v2/transactions/consumption", method: "PUT"))
            let responder = world.responder()
            let answering = Task { try await responder.answerDue() }
            var during: AppStoreConsumptionRequest?
            for _ in 0..<150 {
                let request = try await world.request(uuid)
                if request.attempts == 1 {
                    during = request
                    break
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            let seen = try #require(during)
            #expect(await world.fake.consumptionAnswers.isEmpty, "Apple has not answered yet")
            #expect(seen.status == .pending && seen.body != nil && seen.lastAttemptAt == world.now && seen.user == "user_1")
            #expect((seen.nextAttemptAt ?? 0) >= world.now + 600_000, "held for the lease while the call runs")
            #expect(try await answering.value.sent == 1)
        }
    }

    @Test("A graceful shutdown ends the responder at once, cancelling a call in flight; its request is due again for the next start")
    func stopsPromptly() async throws {
        try await World.with(.sqlite) { world in
            try await world.consent("user_1")
            let uuid = try await world.requestRefund(of: try await world.subscribe("user_1").transactionID)
            // The fake finishes its delayed answer before it stops: long enough to tell, short enough to wait for.
            await world.fake.inject(.delay(.seconds(15)), times: 1, matching: .path("/inApps/v2/transactions/consumption", method: "PUT"))
            let responder = world.responder { $0.pollInterval = .seconds(3600) }
            let group = ServiceGroup(configuration: .init(services: [responder], logger: World.quiet))
            let running = Task { try await group.run() }
            for _ in 0..<300 where await world.puts.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await world.puts.count == 1, "the call is in flight")
            await group.triggerGracefulShutdown()
            try await running.value
            // Had it waited for the call, Apple's 202 would have made the request `sent`. (Whether
            // the fake has recorded its delayed answer by now says only how busy the machine is:
            // it finishes a call its client left.)
            let request = try await world.request(uuid)
            #expect(request.status == .pending && request.attempts == 1 && request.nextAttemptAt == world.now, "released, not held for the lease")
        }
    }

    @Test("Without a call to make the responder's wait ends at once on a graceful shutdown")
    func idleStop() async throws {
        try await World.with(.sqlite) { world in
            // Its next look is an hour away: a stop that waited for it would not end within the minute.
            let responder = world.responder { $0.pollInterval = .seconds(3600) }
            let group = ServiceGroup(configuration: .init(services: [responder], logger: World.quiet))
            let ended = Mutex(false)
            let running = Task {
                defer { ended.withLock { $0 = true } }
                try await group.run()
            }
            try await Task.sleep(for: .milliseconds(200))
            await group.triggerGracefulShutdown()
            let deadline = ContinuousClock.now + .seconds(60)
            while !ended.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(ended.withLock { $0 }, "the responder still waits for its hour-long poll a minute after the shutdown")
            if ended.withLock({ $0 }) { try await running.value }
        }
    }
}
