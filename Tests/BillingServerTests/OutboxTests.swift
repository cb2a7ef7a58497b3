import APITransport
import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import BillingTestSupport
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// The app's backend on loopback: verifies each webhook by the Standard Webhooks rules (its own
/// code, not billingd's signer) with any of its secrets, and records what it accepted.
final class AppWebhookReceiver: Sendable {
    enum Mode: Sendable { case accept, fail(Int), gone }
    struct Received: Sendable {
        let id: String
        let type: String
        let user: String?
        let json: [String: any Sendable]
        /// The positions of the receiver's secrets that verified it.
        let verifiedBy: [Int]
    }

    let secrets: [String]
    private let state = Mutex<(mode: Mode, received: [Received], rejected: Int, failEvery: Int, requests: Int)>((.accept, [], 0, 0, 0))

    init(secrets: [String]) { self.secrets = secrets }

    var received: [Received] { state.withLock { $0.received } }
    var rejected: Int { state.withLock { $0.rejected } }
    /// Requests that verified, whatever they were answered.
    var requests: Int { state.withLock { $0.requests } }
    func set(_ mode: Mode) { state.withLock { $0.mode = mode } }
    /// Answers 503 to every `n`th request (0: never), so that retries interleave with new events.
    func failEvery(_ n: Int) { state.withLock { $0.failEvery = n } }

    /// Standard Webhooks verification: the timestamp within 5 minutes, and one of the `v1,`
    /// signatures the HMAC-SHA256 of `id.timestamp.body` under a secret (base64 after `whsec_`).
    static func verify(headers: HTTPFields, body: [UInt8], secrets: [String]) -> [Int] {
        guard let id = headers[HTTPField.Name("webhook-id")!], let timestamp = headers[HTTPField.Name("webhook-timestamp")!],
            let signatures = headers[HTTPField.Name("webhook-signature")!], let seconds = Int64(timestamp),
            abs(Int64(Date().timeIntervalSince1970) - seconds) <= 300
        else { return [] }
        let content = Array("\(id).\(timestamp).".utf8) + body
        let candidates = signatures.split(separator: " ").compactMap { part -> Data? in
            let pieces = part.split(separator: ",", maxSplits: 1)
            guard pieces.count == 2, pieces[0] == "v1" else { return nil }
            return Data(base64Encoded: String(pieces[1]))
        }
        return secrets.indices.filter { index in
            let key = SymmetricKey(data: Data(base64Encoded: String(secrets[index].dropFirst("whsec_".count)))!)
            return candidates.contains { HMAC<SHA256>.isValidAuthenticationCode($0, authenticating: content, using: key) }
        }
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.post("hook") { request, _ -> Response in
            let body = Array(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            let verifiedBy = Self.verify(headers: request.headers, body: body, secrets: self.secrets)
            let status: HTTPResponse.Status = self.state.withLock { state in
                state.requests += 1
                if verifiedBy.isEmpty {
                    state.rejected += 1
                    return .badRequest
                }
                switch state.mode {
                case .fail(let code): return HTTPResponse.Status(code: code)
                case .gone: return .gone
                case .accept: break
                }
                if state.failEvery > 0, state.requests % state.failEvery == 0 { return .serviceUnavailable }
                let json = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]) ?? [:]
                state.received.append(Received(
                    id: request.headers[HTTPField.Name("webhook-id")!] ?? "", type: json["type"] as? String ?? "",
                    user: json["user"] as? String, json: json.mapValues { "\($0)" as any Sendable }, verifiedBy: verifiedBy))
                return .noContent
            }
            return Response(status: status)
        }
        return router
    }

    /// Runs the receiver for the duration of `body`, which gets its webhook URL.
    func run(_ body: (String) async throws -> Void) async throws {
        try await withLoopbackServer(router(), label: "receiver") { port in try await body("http://127.0.0.1:\(port)/hook") }
    }
}

/// The time at which the harness's policy resolves views, moved by App Store tests.
final class OutboxClock: Sendable {
    private let seconds = Mutex<Int64>(OutboxHarness.now)
    var now: Int64 { seconds.withLock { $0 } }
    func set(_ value: Int64) { seconds.withLock { $0 = value } }
}

/// A ledger whose applier announces, and a sender to the receiver.
struct OutboxHarness {
    static let now: Int64 = 1_770_000_000
    let clock = OutboxClock()
    let ledger: TemporaryLedger
    let policy: OutboxPolicy
    let sender: OutboxSender
    private var step = 0

    /// - Parameters:
    ///   - endpoints: every endpoint events go to; `endpoint` alone when nil.
    ///   - transport: the sender's; libcurl with connections per endpoint, as serve's, when nil.
    ///   - configure: changes to the sender's configuration.
    init(
        ledger: TemporaryLedger? = nil, endpoint: String = "", endpoints: [String]? = nil, secrets: [String],
        catalog: String = "free-pro-enterprise", transport: (any HTTPTransport)? = nil,
        configure: (inout OutboxSender.Configuration) -> Void = { _ in }
    ) throws {
        self.ledger = try ledger ?? TemporaryLedger()
        let clock = self.clock
        policy = OutboxPolicy.serviceViews(catalog: try fixtureCatalog(catalog), endpoints: endpoints ?? [endpoint], now: { clock.now })
        var configuration = OutboxSender.Configuration(signer: try StandardWebhookSigner(secrets: secrets))
        configuration.firstRetryDelay = .milliseconds(1)
        configuration.maximumRetryDelay = .milliseconds(5)
        configuration.concurrency = 8
        configure(&configuration)
        var logger = Logger(label: "outbox")
        logger.logLevel = .critical
        if let transport {
            sender = OutboxSender(
                store: self.ledger.store.outbox, transport: transport, configuration: configuration, metrics: BillingMetrics(), logger: logger)
        } else {
            sender = OutboxSender(store: self.ledger.store.outbox, configuration: configuration, metrics: BillingMetrics(), logger: logger)
        }
    }

    /// The ledger as serve sees it: its transactions announce.
    var store: any LedgerStore { ledger.store.announcing(policy) }
    var applier: SQLiteApplier { SQLiteApplier(database: ledger.database.announcing(policy), configuration: .init(firstRetryDelay: .zero)) }

    /// Applies events as one webhook each, through the group commit path, each its own transaction.
    mutating func deliver(_ events: [(type: String, object: [String: Any])]) async throws {
        for event in events {
            step += 1
            var builder = UserLedgerBuilder(eventPrefix: "evt_outbox_\(step)_")
            builder.add(event.type, event.object, created: 1_769_940_000 + Int64(step) * 10)
            let applier = self.applier
            let prepared = try builder.bodies.map { body in
                applier.prepare(InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0))
            }
            // Committed now (an event's age counts toward its retry window); views resolved at the harness's clock.
            let result = try await applier.ingest(prepared, now: Int64(Date().timeIntervalSince1970 * 1000))
            #expect(result.queued == 0, "the delivery applies at ingest")
        }
    }

    /// Applies App Store notification bodies, each in its own group commit, with views resolved
    /// at `now` (Unix ms) of each.
    func deliverAppStore(_ notifications: [(body: [UInt8], now: Int64)]) async throws {
        let applier = self.applier
        for notification in notifications {
            clock.set(notification.now / 1000)
            let parsed = try AppStoreNotification(storedBody: notification.body)
            let prepared = applier.prepare(InboxDelivery.appStore(parsed, body: notification.body, receivedAt: notification.now))
            let result = try await applier.ingest([prepared], now: Int64(Date().timeIntervalSince1970 * 1000))
            #expect(result.queued == 0, "the notification applies at ingest")
        }
    }

    /// Sends until nothing is pending or failed (each pass waits for retries that came due).
    func sendAll() async throws {
        for _ in 0..<2000 {
            try await sender.sendDue()
            let depth = try await ledger.store.outbox.depth()
            if (depth.counts[.pending] ?? 0) + (depth.counts[.failed] ?? 0) == 0 { return }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

@Suite("Outbound webhooks to the app's backend", .serialized)
struct OutboxTests {
    let secrets = [StandardWebhookSigner.generateSecret(), StandardWebhookSigner.generateSecret()]

    @Test("a Stripe subscription's life reaches the app as signed events, in order, verified with either secret of a rotation")
    func stripeLifecycle() async throws {
        let receiver = AppWebhookReceiver(secrets: secrets)
        try await receiver.run { url in
            // billingd signs with both secrets while the app rotates.
            var harness = try OutboxHarness(endpoint: url, secrets: secrets)
            defer { harness.ledger.remove() }
            typealias F = UserFixtures
            let renewed: (Int64, Int64) = (1_772_359_200, 1_774_778_400)
            try await harness.deliver([
                ("customer.created", F.customer("cus_A", user: "user_a")),
                ("customer.subscription.created", F.subscription("sub_A", customer: "cus_A", status: "active")),
                ("customer.subscription.updated", F.subscription("sub_A", customer: "cus_A", status: "active", members: ["cancel_at_period_end": true])),
                ("customer.subscription.updated", F.subscription("sub_A", customer: "cus_A", status: "active")),
                ("customer.subscription.updated", F.subscription("sub_A", customer: "cus_A", status: "active", periodStart: renewed.0, periodEnd: renewed.1)),
                ("customer.subscription.updated", F.subscription("sub_A", customer: "cus_A", status: "past_due", periodStart: renewed.0, periodEnd: renewed.1)),
                ("customer.subscription.updated", F.subscription("sub_A", customer: "cus_A", status: "active", periodStart: renewed.0, periodEnd: renewed.1)),
                ("customer.subscription.updated", F.subscription(
                    "sub_A", customer: "cus_A", status: "active", lookupKey: "enterprise_monthly", price: "price_EntMonthly",
                    product: "prod_Ent", periodStart: renewed.0, periodEnd: renewed.1)),
                // The last payment refunded in part, then the subscription canceled.
                ("invoice.paid", F.invoice("in_A", customer: "cus_A", status: "paid", created: renewed.0, subscription: "sub_A")),
                ("charge.refunded", F.refundedCharge("ch_A", customer: "cus_A", invoice: "in_A", refunded: 972)),
                ("customer.subscription.deleted", F.subscription(
                    "sub_A", customer: "cus_A", status: "canceled", lookupKey: "enterprise_monthly", price: "price_EntMonthly",
                    product: "prod_Ent", periodStart: renewed.0, periodEnd: renewed.1,
                    members: ["ended_at": 1_769_999_000, "canceled_at": 1_769_999_000])),
            ])
            try await harness.sendAll()
            let types = receiver.received.map(\.type)
            #expect(types == [
                "subscription.started", "entitlement.updated",
                "subscription.cancellation_scheduled",
                "subscription.uncanceled",
                "subscription.renewed",
                "subscription.billing_issue",
                "subscription.recovered",
                "subscription.plan_changed", "entitlement.updated",
                "subscription.refunded",
                "subscription.expired", "entitlement.updated",
            ])
            let refunded = try #require(receiver.received.first { $0.type == "subscription.refunded" })
            #expect(refunded.json["source"] as? String == "stripe")
            #expect((refunded.json["refund"] as? String)?.contains("ch_A") == true, "the payload names the refunded charge")
            #expect(receiver.rejected == 0)
            #expect(receiver.received.allSatisfy { $0.verifiedBy == [0, 1] }, "each message carries a signature per secret")
            #expect(Set(receiver.received.map(\.id)).count == receiver.received.count, "each event has its own webhook-id")
            #expect(receiver.received.allSatisfy { $0.user == "user_a" })
            let started = try #require(receiver.received.first)
            #expect(started.json["source"] as? String == "stripe")
            #expect((started.json["data"] as? String)?.contains("subscription") == true, "the payload holds the user's views")
            let outbox = try await harness.ledger.store.outbox.list(status: nil, limit: 100)
            #expect(outbox.allSatisfy { $0.status == .delivered })
        }
    }

    @Test("an App Store subscription's life reaches the app: renewal, billing issue, recovery, auto-renew off, refund")
    func appStoreLifecycle() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        try await receiver.run { url in
            let harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            defer { harness.ledger.remove() }
            let token = try await harness.store.appStore.accountToken(for: "user_ios")
            let (t0, day, hour) = (AppStoreNotifications.t0, AppStoreNotifications.day, Int64(3_600_000))
            typealias N = AppStoreNotifications
            try await harness.deliverAppStore([
                (N.body("SUBSCRIBED", "INITIAL_BUY", transaction: "1000", purchase: t0, expires: t0 + 30 * day, signed: t0, token: token), t0 + hour),
                (N.body("DID_RENEW", transaction: "1001", purchase: t0 + 30 * day, expires: t0 + 60 * day, signed: t0 + 30 * day, token: token),
                 t0 + 30 * day + hour),
                (N.body("DID_FAIL_TO_RENEW", "GRACE_PERIOD", transaction: "1001", purchase: t0 + 30 * day, expires: t0 + 60 * day,
                        signed: t0 + 60 * day + hour, token: token, renewalChanges: ["gracePeriodExpiresDate": Int(t0 + 66 * day)]),
                 t0 + 60 * day + 2 * hour),
                (N.body("DID_RENEW", "BILLING_RECOVERY", transaction: "1002", purchase: t0 + 62 * day, expires: t0 + 92 * day,
                        signed: t0 + 62 * day, token: token), t0 + 62 * day + hour),
                (N.body("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", transaction: "1002", purchase: t0 + 62 * day,
                        expires: t0 + 92 * day, signed: t0 + 63 * day, token: token), t0 + 63 * day + hour),
            ])
            // Another user's purchase, refunded.
            let other = try await harness.store.appStore.accountToken(for: "user_ios_refunded")
            try await harness.deliverAppStore([
                (N.body("SUBSCRIBED", "INITIAL_BUY", original: "3000", transaction: "3000", purchase: t0, expires: t0 + 30 * day, signed: t0,
                        token: other), t0 + hour),
                (N.body("REFUND", original: "3000", transaction: "3000", purchase: t0, expires: t0 + 30 * day, signed: t0 + 5 * day,
                        token: other, transactionChanges: ["revocationDate": Int(t0 + 5 * day), "revocationReason": 0]), t0 + 5 * day + hour),
            ])
            try await harness.sendAll()
            #expect(receiver.received.filter { $0.user == "user_ios" }.map(\.type) == [
                "subscription.started", "entitlement.updated",
                "subscription.renewed",
                "subscription.billing_issue",
                "subscription.recovered", "subscription.renewed",
                "subscription.cancellation_scheduled",
            ])
            #expect(receiver.received.filter { $0.user == "user_ios_refunded" }.map(\.type) == [
                "subscription.started", "entitlement.updated", "subscription.refunded", "entitlement.updated",
            ])
            #expect(receiver.received.allSatisfy { $0.json["source"] as? String == "app_store" })
        }
    }

    @Test("what time alone changes is announced when it falls due: a scheduled cancellation reached, a grace period over")
    func timeAloneChanges() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        try await receiver.run { url in
            var harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            defer { harness.ledger.remove() }
            typealias F = UserFixtures
            let periodEnd: Int64 = 1_772_359_200
            // Pro's grace is 7 days, counted from the period's start when no invoice says when it fell due.
            let graceEnd: Int64 = 1_769_940_000 + 7 * 86_400
            try await harness.deliver([
                ("customer.created", F.customer("cus_C", user: "user_c")),
                ("customer.subscription.created", F.subscription(
                    "sub_C", customer: "cus_C", status: "active", periodEnd: periodEnd, members: ["cancel_at_period_end": true])),
                ("customer.created", F.customer("cus_G", user: "user_g")),
                ("customer.subscription.created", F.subscription("sub_G", customer: "cus_G", status: "past_due")),
            ])
            try await harness.sendAll()
            let announced = receiver.received.count
            let outbox = harness.store.outbox
            // Events are stamped with the wall clock (their retry window counts from it); views
            // are resolved at the harness's clock.
            let now = { Int64(Date().timeIntervalSince1970 * 1000) }
            #expect(try await outbox.nextReview() == graceEnd * 1000, "the grace period ends first")
            #expect(try await outbox.announceLapsed(now: now(), limit: 100) == 0, "nothing is due before then")

            harness.clock.set(graceEnd)
            #expect(try await outbox.announceLapsed(now: now(), limit: 100) == 1)
            try await harness.sendAll()
            #expect(receiver.received.dropFirst(announced).map { "\($0.user ?? "") \($0.type)" } == ["user_g entitlement.updated"])
            #expect(try await outbox.nextReview() == periodEnd * 1000)

            harness.clock.set(periodEnd + 60)
            #expect(try await outbox.announceLapsed(now: now(), limit: 100) == 1)
            try await harness.sendAll()
            #expect(receiver.received.dropFirst(announced + 1).map { "\($0.user ?? "") \($0.type)" } == [
                "user_c subscription.expired", "user_c entitlement.updated",
            ])
            #expect(try await outbox.nextReview() == nil, "nothing more changes by time alone")
            #expect(try await outbox.announceLapsed(now: now(), limit: 100) == 0)
            let expired = try #require(try await outbox.list(status: .delivered, limit: 2).last)
            #expect(expired.event.type == "subscription.expired")
            let payload = try JSONSerialization.jsonObject(with: Data(expired.event.payload)) as? [String: Any]
            let entitlements = (payload?["data"] as? [String: Any])?["entitlements"] as? [String: Any]
            #expect(entitlements?["entitled"] as? Bool == false, "the payload is the view after the change")
        }
    }

    @Test("a meter reaching its limit is announced once per period")
    func usageLimitReached() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        try await receiver.run { url in
            let harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]], catalog: "usage")
            defer { harness.ledger.remove() }
            var dependencies = makeDependencies(harness.ledger)
            dependencies.store = harness.store
            dependencies.apiTokens = [userAPIToken]
            dependencies.plans = try fixtureCatalog("usage")
            dependencies.now = { Date(timeIntervalSince1970: TimeInterval(OutboxHarness.now)) }
            try await makeApplication(dependencies).test(.router) { client in
                for index in 1...12 {
                    _ = try await client.execute(
                        uri: "/v1/users/user_u/usage/radars/consume", method: .post, headers: jsonHeaders,
                        body: ByteBuffer(string: #"{"quantity": 1, "idempotency_key": "radar-\#(index)"}"#))
                }
                let recorded = try await client.execute(
                    uri: "/v1/users/user_u/usage/radars/events", method: .post, headers: jsonHeaders,
                    body: ByteBuffer(string: #"{"quantity": 2, "idempotency_key": "import-1"}"#))
                #expect(recorded.status == .ok)
            }
            try await harness.sendAll()
            #expect(receiver.received.map(\.type) == ["usage.limit_reached"])
            let event = try #require(receiver.received.first)
            #expect(event.user == "user_u")
            let queued = try #require(try await harness.store.outbox.list(status: .delivered, limit: 1).first)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(queued.event.payload)) as? [String: Any])
            let usage = try #require((json["data"] as? [String: Any])?["usage"] as? [String: Any])
            #expect(usage["meter"] as? String == "radars")
            #expect(usage["used"] as? Int == 10)
            #expect(usage["limit"] as? Int == 10)
        }
    }

    @Test("the payload is the user's subscription and entitlements views with what changed")
    func payloadShape() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        try await receiver.run { url in
            var harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            defer { harness.ledger.remove() }
            try await harness.deliver([
                ("customer.created", UserFixtures.customer("cus_P", user: "user_p")),
                ("customer.subscription.created", UserFixtures.subscription("sub_P", customer: "cus_P", status: "active")),
            ])
            let queued = try await harness.ledger.store.outbox.list(status: .pending, limit: 10)
            let first = try #require(queued.last)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(first.event.payload)) as? [String: Any])
            #expect(json["type"] as? String == "subscription.started")
            #expect(json["id"] as? String == first.event.id)
            #expect(json["user"] as? String == "user_p")
            #expect(json["livemode"] as? Bool == false)
            let data = try #require(json["data"] as? [String: Any])
            let subscription = try #require(data["subscription"] as? [String: Any])
            let entitlements = try #require(data["entitlements"] as? [String: Any])
            #expect(subscription["plan"] as? String == "pro")
            #expect(subscription["subscription_id"] as? String == "sub_P")
            #expect(entitlements["entitled"] as? Bool == true)
            let changes = try #require(json["changes"] as? [String: Any])
            #expect((changes["fields"] as? [String])?.contains("plan") == true)
            try await harness.sendAll()
            #expect(receiver.received.count == 2)
        }
    }

    @Test("each user's events arrive in order while many users change at once and the receiver fails now and then")
    func orderPerUser() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        receiver.failEvery(3)
        try await receiver.run { url in
            var harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            defer { harness.ledger.remove() }
            var events: [(type: String, object: [String: Any])] = []
            for user in 0..<30 {
                events.append(("customer.created", UserFixtures.customer("cus_\(user)", user: "user_\(user)")))
                events.append(("customer.subscription.created", UserFixtures.subscription("sub_\(user)", customer: "cus_\(user)", status: "active")))
            }
            for user in 0..<30 {
                events.append(("customer.subscription.updated", UserFixtures.subscription(
                    "sub_\(user)", customer: "cus_\(user)", status: "active", members: ["cancel_at_period_end": true])))
            }
            for user in 0..<30 {
                events.append(("customer.subscription.updated", UserFixtures.subscription("sub_\(user)", customer: "cus_\(user)", status: "active")))
            }
            try await harness.deliver(events)
            try await harness.sendAll()
            for user in 0..<30 {
                let types = receiver.received.filter { $0.user == "user_\(user)" }.map(\.type)
                #expect(types == ["subscription.started", "entitlement.updated", "subscription.cancellation_scheduled", "subscription.uncanceled"])
            }
        }
    }

    @Test("events wait while the receiver is down and all arrive, in order, once it is back")
    func receiverDownThenUp() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        receiver.set(.fail(503))
        try await receiver.run { url in
            var harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            defer { harness.ledger.remove() }
            try await harness.deliver([
                ("customer.created", UserFixtures.customer("cus_D", user: "user_d")),
                ("customer.subscription.created", UserFixtures.subscription("sub_D", customer: "cus_D", status: "active")),
                ("customer.subscription.updated", UserFixtures.subscription("sub_D", customer: "cus_D", status: "active", members: ["cancel_at_period_end": true])),
            ])
            for _ in 0..<5 {
                try await harness.sender.sendDue()
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(receiver.received.isEmpty)
            let failed = try await harness.ledger.store.outbox.list(status: .failed, limit: 10)
            #expect(failed.count == 1, "only the user's first event is tried while it fails")
            #expect(failed.first?.lastError == "HTTP 503")
            receiver.set(.accept)
            try await harness.sendAll()
            #expect(receiver.received.map(\.type) == ["subscription.started", "entitlement.updated", "subscription.cancellation_scheduled"])
        }
    }

    @Test("410 Gone disables the endpoint and keeps its events until it is enabled again")
    func goneDisables() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        receiver.set(.gone)
        try await receiver.run { url in
            var harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            defer { harness.ledger.remove() }
            try await harness.deliver([
                ("customer.created", UserFixtures.customer("cus_G", user: "user_g")),
                ("customer.subscription.created", UserFixtures.subscription("sub_G", customer: "cus_G", status: "active")),
            ])
            try await harness.sender.sendDue()
            let store = harness.ledger.store.outbox
            #expect(try await store.disabledEndpoints().keys.contains(url))
            receiver.set(.accept)
            try await harness.sender.sendDue()
            #expect(receiver.received.isEmpty, "nothing goes to a disabled endpoint")
            #expect(try await store.list(status: .pending, limit: 10).count == 2)
            #expect(try await store.enableEndpoint(url))
            try await harness.sendAll()
            #expect(receiver.received.map(\.type) == ["subscription.started", "entitlement.updated"])
        }
    }

    @Test("an event committed with its ledger change is sent once after a restart that came before the send")
    func restartBeforeSend() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        try await receiver.run { url in
            var first = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            try await first.deliver([
                ("customer.created", UserFixtures.customer("cus_K", user: "user_k")),
                ("customer.subscription.created", UserFixtures.subscription("sub_K", customer: "cus_K", status: "active")),
            ])
            // The process ends here, before any send; the database is opened again.
            try first.ledger.database.close()
            let reopened = try TemporaryLedger(reopening: first.ledger)
            defer { reopened.remove() }
            let second = try OutboxHarness(ledger: reopened, endpoint: url, secrets: [secrets[0]])
            try await second.sendAll()
            try await second.sender.sendDue()
            #expect(receiver.received.map(\.type) == ["subscription.started", "entitlement.updated"])
        }
    }

    @Test("replaying the ledger sends nothing again")
    func replaySendsNothing() async throws {
        let receiver = AppWebhookReceiver(secrets: [secrets[0]])
        try await receiver.run { url in
            var harness = try OutboxHarness(endpoint: url, secrets: [secrets[0]])
            defer { harness.ledger.remove() }
            try await harness.deliver([
                ("customer.created", UserFixtures.customer("cus_R", user: "user_r")),
                ("customer.subscription.created", UserFixtures.subscription("sub_R", customer: "cus_R", status: "active")),
                ("customer.subscription.deleted", UserFixtures.subscription(
                    "sub_R", customer: "cus_R", status: "canceled", members: ["ended_at": 1_769_999_000])),
            ])
            try await harness.sendAll()
            let before = receiver.received.count
            // Even on a store whose transactions announce, replay announces nothing.
            let store = harness.store
            _ = try await store.maintenance.replay(applier: store.applier(.init(batchSize: 1000)), progress: { _ in })
            try await harness.sendAll()
            #expect(receiver.received.count == before)
            #expect(try await store.outbox.list(status: nil, limit: 100).count == before)
            // A later change is still announced against what the app was told.
            try await harness.deliver([
                ("customer.subscription.created", UserFixtures.subscription("sub_R2", customer: "cus_R", status: "active")),
            ])
            try await harness.sendAll()
            #expect(receiver.received.dropFirst(before).map(\.type) == ["subscription.started", "entitlement.updated"])
        }
    }
}

/// App Store Server Notifications as the inbox stores them, from `AppStoreSampleNotification`
/// with explicit dates; the JWS are unsigned (the ledger reads data verified before it was stored).
enum AppStoreNotifications {
    static let day: Int64 = 86_400_000
    static let t0: Int64 = 1_760_000_000_000

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func body(
        _ type: String, _ subtype: String? = nil, original: String = "1000", transaction: String,
        product: String = "com.example.pro.monthly", purchase: Int64, expires: Int64, signed: Int64, token: String,
        transactionChanges: [String: any Sendable] = [:], renewalChanges: [String: any Sendable] = [:]
    ) -> [UInt8] {
        var sample = AppStoreSampleNotification(
            type: type, subtype: subtype, productID: product, originalTransactionID: original, transactionID: transaction,
            bundleID: "com.example.app", environment: .sandbox, appAccountToken: token, now: signed)
        sample.notificationUUID = "\(type)-\(subtype ?? "")-\(original)-\(transaction)-\(signed)"
        sample.transaction["purchaseDate"] = Int(purchase)
        sample.transaction["originalPurchaseDate"] = Int(t0)
        sample.transaction["expiresDate"] = Int(expires)
        for (key, value) in transactionChanges { sample.transaction[key] = value }
        if sample.renewalInfo != nil {
            sample.renewalInfo?["renewalDate"] = Int(expires)
            for (key, value) in renewalChanges { sample.renewalInfo?[key] = value }
        }
        let jws = sample.signedPayload { payload in
            base64URL(Array(#"{"alg":"ES256"}"#.utf8)) + "." + base64URL(payload) + ".c2ln"
        }
        return Array(try! JSONSerialization.data(withJSONObject: ["signedPayload": jws]))
    }
}

@Suite("serve sends outbound webhooks", .serialized)
struct OutboxDaemonTests {
    @Test("a signed Stripe webhook to serve reaches the app's endpoint, and /metrics counts the delivery")
    func serveDelivers() async throws {
        let secret = StandardWebhookSigner.generateSecret()
        let receiver = AppWebhookReceiver(secrets: [secret])
        try await receiver.run { url in
            let ledger = try TemporaryLedger()
            defer { ledger.remove() }
            let settings = try Settings.load(
                environment: [
                    "BILLINGD_PORT": "0", "STRIPE_WEBHOOK_SECRET": testSecret,
                    "BILLINGD_PLANS": UserFixtures.url("plans/free-pro-enterprise.yaml").path,
                    "BILLINGD_APP_WEBHOOK_URL": url, "BILLINGD_APP_WEBHOOK_SECRET": secret,
                ], configFile: nil)
            var logger = Logger(label: "test.outbox.daemon")
            logger.logLevel = .critical
            let (ports, listening) = AsyncStream.makeStream(of: Int.self)
            let daemon = try await BillingDaemon(
                settings: settings, store: ledger.store, options: .init(gracefulShutdownSignals: [], onListening: { listening.yield($0) }, cancellationLimit: nil),
                logger: logger)
            #expect(daemon.startup["app_webhooks"] == "1 endpoint(s)")
            let running = Task {
                defer { listening.finish() }
                try await daemon.run()
            }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let transport = CurlTransport(maxConnections: 2)
            var builder = UserLedgerBuilder(eventPrefix: "evt_daemon_")
            builder.add("customer.created", UserFixtures.customer("cus_S", user: "user_s"))
            builder.add("customer.subscription.created", UserFixtures.subscription("sub_S", customer: "cus_S", status: "active"))
            for body in builder.bodies {
                let response = try await transport.perform(HTTPTransportRequest(
                    method: .post, url: "http://127.0.0.1:\(port)/webhooks/stripe",
                    headers: [("Stripe-Signature", SignatureVerifier.header(body: body, secret: testSecret, timestamp: Int64(Date().timeIntervalSince1970))),
                              ("Content-Type", "application/json")],
                    body: body))
                #expect(response.status == 200)
            }
            // The sender runs beside the server: wait for it (bounded), then look.
            for _ in 0..<500 where receiver.received.count < 2 {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(receiver.received.map(\.type) == ["subscription.started", "entitlement.updated"])
            // The sender counts a delivery once the receiver's answer is back, a moment after the
            // receiver recorded it: look again (bounded) until the count has caught up.
            var text = ""
            for _ in 0..<250 {
                let metrics = try await transport.perform(HTTPTransportRequest(method: .get, url: "http://127.0.0.1:\(port)/metrics"))
                text = String(decoding: metrics.body, as: UTF8.self)
                if text.contains(#"billingd_outbox_deliveries_total{outcome="delivered"} 2"#) { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(text.contains(#"billingd_outbox_deliveries_total{outcome="delivered"} 2"#), "\(text)")
            await daemon.shutdown()
            try await running.value
        }
    }
}

@Suite("kill -9 of serve with events in its outbox", .serialized)
struct OutboxCrashTests {
    /// The outbox as `billingd outbox --json` lists it.
    static func listed(_ databasePath: String) async throws -> [[String: Any]] {
        let result = try await billingd(["outbox", "--json", "--limit", "10000"], environment: ["BILLINGD_DATABASE": databasePath])
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
    }

    @Test("events committed with their ledger changes, still undelivered when serve is killed, are each delivered once after the restart, in order per user")
    func killNineBeforeDelivery() async throws {
        let secret = StandardWebhookSigner.generateSecret()
        let receiver = AppWebhookReceiver(secrets: [secret])
        // Refused at first, so that nothing is delivered before the kill.
        receiver.set(.fail(503))
        try await receiver.run { url in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-outbox-kill-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let databasePath = directory.appendingPathComponent("ledger.sqlite3").path
            let environment = [
                "BILLINGD_PLANS": UserFixtures.url("plans/free-pro-enterprise.yaml").path,
                "BILLINGD_APP_WEBHOOK_URL": url, "BILLINGD_APP_WEBHOOK_SECRET": secret,
            ]
            let users = 20
            var builder = UserLedgerBuilder(eventPrefix: "evt_outbox_kill_")
            for user in 0..<users {
                builder.add("customer.created", UserFixtures.customer("cus_K\(user)", user: "user_k\(user)"))
                builder.add("customer.subscription.created", UserFixtures.subscription("sub_K\(user)", customer: "cus_K\(user)", status: "active"))
            }

            let daemon = try await DaemonProcess.start(databasePath: databasePath, extraEnvironment: environment)
            for body in builder.bodies {
                #expect(try await HTTP.deliver(body, port: daemon.port, timeout: .seconds(60)) == 200)
            }
            // The sender has tried (and been refused): the kill comes after the commits, before any delivery.
            for _ in 0..<600 where receiver.requests == 0 { try await Task.sleep(for: .milliseconds(50)) }
            let runningAtKill = daemon.process.isRunning
            await daemon.kill(signal: SIGKILL)
            #expect(runningAtKill, "serve was running when it was killed")
            #expect(receiver.requests > 0, "the sender tried before the kill")
            #expect(receiver.received.isEmpty)

            let committed = try await Self.listed(databasePath)
            let committedIDs = Set(committed.compactMap { $0["id"] as? String })
            #expect(committed.count == users * 2, "each user's change left two events: \(committed.count)")
            #expect(committed.allSatisfy { ["pending", "failed"].contains($0["status"] as? String) })

            receiver.set(.accept)
            let again = try await DaemonProcess.start(databasePath: databasePath, extraEnvironment: environment)
            defer { again.stop() }
            // A refused event is retried after its backoff (5 s, then 10 s): bound the wait, never its speed.
            var delivered = 0
            for _ in 0..<600 {
                delivered = try await Self.listed(databasePath).filter { $0["status"] as? String == "delivered" }.count
                if delivered == committed.count { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(delivered == committed.count, "every committed event was delivered after the restart")
            let received = receiver.received
            #expect(received.count == committed.count, "each once: \(received.count) received")
            #expect(Set(received.map(\.id)) == committedIDs, "with the ids committed before the kill")
            for user in 0..<users {
                #expect(
                    received.filter { $0.user == "user_k\(user)" }.map(\.type) == ["subscription.started", "entitlement.updated"],
                    "user_k\(user)'s events in order")
            }
        }
    }
}

@Suite("billingd outbox, the commands")
struct OutboxCommandTests {
    @Test("retry queues a dead event again (one, or all dead), and enable resumes a disabled endpoint; each says what it did", .needsBillingdBinary)
    func retryAndEnable() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let outbox = ledger.store.outbox
        let endpoint = "https://app.example.com/billing-hooks"
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for id in ["msg_one", "msg_two"] {
            let queued = try await outbox.enqueue(
                OutboxDraft(id: id, type: "test", scope: .test, user: "user_\(id)", createdAt: now, payload: Array("{}".utf8)),
                endpoints: [endpoint], now: now)
            try await outbox.record([OutboxAttempt(seq: queued[0].seq, outcome: .dead(error: "HTTP 500"), at: now)])
        }
        try await outbox.disableEndpoint(endpoint, at: now, reason: "410 Gone")
        let settings = ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path]

        let one = try await billingd(["outbox", "retry", "msg_one"], environment: settings)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stdout.contains("Queued msg_one again for 1 endpoint(s)"), "\(one.stdout)")
        let all = try await billingd(["outbox", "retry", "--all-dead"], environment: settings)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("Queued 1 dead event(s) again"), "\(all.stdout)")
        #expect(try await outbox.list(status: .dead, limit: 10).isEmpty)
        // Due now that the commands ran (they queue at their own clock's now).
        let later = Int64(Date().timeIntervalSince1970 * 1000) + 60_000
        #expect(try await outbox.due(now: later, limit: 10).isEmpty, "the endpoint is still disabled")

        let enable = try await billingd(["outbox", "enable", endpoint], environment: settings)
        #expect(enable.status == 0, "\(enable.stderr)")
        #expect(enable.stdout.contains("Enabled"), "\(enable.stdout)")
        #expect(Set(try await outbox.due(now: later, limit: 10).map(\.event.id)) == ["msg_one", "msg_two"])
        let again = try await billingd(["outbox", "enable", endpoint], environment: settings)
        #expect(again.status == 66, "\(again.stderr)")
        #expect(again.stderr.contains("is not disabled"), "\(again.stderr)")
    }

    @Test(
        "send-test names each endpoint with the credentials in its URL masked, and exits 69 when one does not accept",
        .needsBillingdBinary)
    func sendTestMasksCredentials() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        // Port 9 (discard) on loopback: nothing listens, so the post fails fast.
        let url = "http://hook:hunter2hunter2@127.0.0.1:9/billing?token=tok_live_abcdef123456&v=1"
        let result = try await billingd(
            ["outbox", "send-test"],
            environment: [
                "BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path,
                "BILLINGD_APP_WEBHOOK_URL": url, "BILLINGD_APP_WEBHOOK_SECRET": StandardWebhookSigner.generateSecret(),
                "BILLINGD_APP_WEBHOOK_CONNECT_TIMEOUT": "1s",
            ])
        #expect(result.status == 69, "\(result.stderr)")
        let output = result.stdout + result.stderr
        #expect(output.contains("127.0.0.1:9/billing"), "the endpoint is named: \(output)")
        #expect(!output.contains("hunter2hunter2") && !output.contains("tok_live_abcdef123456"), "\(output)")
        #expect(output.contains("v=1"), "a short query value is no secret: \(output)")
    }
}
