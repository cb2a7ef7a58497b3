import BillingCore
import BillingStore
import Foundation
import Synchronization
import Testing

/// The outbox and the App Store roles through ``LedgerStore`` alone, on both backends: the same
/// deliveries must announce the same events, queue them in the same order per user, and leave
/// the same App Store state, whichever store holds the ledger.
@Suite("Announcing and the App Store, on both backends", .serialized)
struct AnnouncingBackendTests {
    typealias F = AppStoreFactory
    static let endpoint = "https://app.example.com/billing-hooks"

    /// What one backend made of the scenario, to compare with the other's.
    struct Outcome: Equatable {
        var announced: [String] = []
        var sentInOrder: [String] = []
        var stale: [String] = []
        var owner: String?
        var deadRetried = 0
        /// `billingd inspect 700`: the purchase's kind, its transactions' ids and its owner.
        var inspected: [String] = []
    }

    /// A user subscribes with their appAccountToken, renews, fails to renew and expires; the app's
    /// backend is sent each change, in order, one at a time.
    func scenario(_ backend: StoreBackend) async throws -> Outcome {
        var outcome = Outcome()
        try await withLedger(backend) { ledger in
            let policy = OutboxPolicy(
                catalog: .freeOnly, endpoints: [Self.endpoint], render: { billing, _ in Array(#"{"user":"\#(billing.user)"}"#.utf8) },
                now: { (F.t0 + 20 * F.day) / 1000 })
            let store = ledger.store.announcing(policy)
            let token = try await store.appStore.accountToken(for: "user_7")
            #expect(try await store.appStore.accountToken(for: "user_7") == token, "the token is stable")
            let bodies = [
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "700", transaction: "700", purchase: F.t0, expires: F.t0 + 30 * F.day,
                    signed: F.t0, token: token),
                F.notification("DID_RENEW", original: "700", transaction: "701", purchase: F.t0 + 30 * F.day, expires: F.t0 + 60 * F.day,
                    signed: F.t0 + 30 * F.day, token: token),
            ]
            _ = try await store.inbox.insert(try bodies.map(F.delivery))
            let pass = try await store.applier(.init(firstRetryDelay: .zero)).drain()
            #expect(pass.applied == 2)
            // What an unverified receipt may restore: the user's own purchases, in that environment only.
            #expect(try await store.appStore.originalTransactionIDs(["700", "800"], ownedBy: "user_7", environment: "Sandbox") == ["700"])
            #expect(try await store.appStore.originalTransactionIDs(["700"], ownedBy: "user_8", environment: "Sandbox").isEmpty)
            #expect(try await store.appStore.originalTransactionIDs(["700"], ownedBy: "user_7", environment: "Production").isEmpty)

            let queued = try await store.outbox.list(status: .pending, limit: 100).reversed()
            outcome.announced = queued.map { "\($0.event.user) \($0.event.type) \($0.endpoint)" }
            #expect(!queued.isEmpty, "a purchase is announced")
            #expect(queued.allSatisfy { $0.event.user == "user_7" && $0.event.scope == .test })

            // One at a time per user: the next waits for the previous to be delivered.
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for _ in queued {
                let due = try await store.outbox.due(now: now, limit: 10)
                #expect(due.count == 1, "only the user's oldest undelivered event is due")
                guard let first = due.first else { break }
                outcome.sentInOrder.append(first.event.type)
                try await store.outbox.record([OutboxAttempt(seq: first.seq, outcome: .delivered, at: now)])
            }
            #expect(try await store.outbox.due(now: now, limit: 10).isEmpty)
            #expect(try await store.outbox.depth().counts[.delivered] == queued.count)

            // A dead event comes back with retry; a 410 disables the endpoint until enabled.
            let test = try await store.outbox.enqueue(
                OutboxDraft(id: "msg_test", type: "test", scope: .test, user: "user_7", createdAt: now, payload: Array("{}".utf8)),
                endpoints: [Self.endpoint], now: now)
            try await store.outbox.record([OutboxAttempt(seq: test[0].seq, outcome: .dead(error: "HTTP 500"), at: now)])
            outcome.deadRetried = try await store.outbox.retryAllDead(now: now)
            try await store.outbox.disableEndpoint(Self.endpoint, at: now, reason: "410 Gone")
            #expect(try await store.outbox.due(now: now, limit: 10).isEmpty, "a disabled endpoint is sent nothing")
            #expect(try await store.outbox.enableEndpoint(Self.endpoint))
            #expect(try await store.outbox.due(now: now, limit: 10).map(\.event.id) == ["msg_test"])

            let view = try #require(try await store.maintenance.inspect(id: "700"))
            let object = try #require(view["object"] as? [String: any Sendable])
            let transactions = (object["transactions"] as? [[String: any Sendable]] ?? []).compactMap { $0["transaction_id"] as? String }
            let owner = (object["owner"] as? [String: any Sendable])?["app_user_id"] as? String
            outcome.inspected = ["\(object["kind"] ?? "")", transactions.sorted().joined(separator: ","), owner ?? "", "\((view["events"] as? [Any])?.count ?? 0)"]

            let record = try #require(try await store.appStore.subscription(environment: "Sandbox", originalTransactionID: "700"))
            outcome.owner = record.owner
            outcome.stale = try await store.appStoreReconciliation.staleSubscriptions(
                environment: "Sandbox", now: F.t0 + 90 * F.day, after: nil, limit: 10
            ).map { "\($0.originalTransactionID) \($0.reason.rawValue)" }
        }
        return outcome
    }

    /// A clock the policy resolves views at, moved by the test.
    final class Clock: Sendable {
        private let milliseconds = Mutex<Int64>(0)
        var seconds: Int64 { milliseconds.withLock { $0 } / 1000 }
        func set(_ value: Int64) { milliseconds.withLock { $0 = value } }
    }

    /// A purchase whose period ends with no notification (Apple's late, or the sandbox's never
    /// sent): what each look at the lapsed views announced, and when the next was due.
    func lapseScenario(_ backend: StoreBackend) async throws -> [String] {
        var looks: [String] = []
        try await withLedger(backend) { ledger in
            let clock = Clock()
            let policy = OutboxPolicy(
                catalog: .freeOnly, endpoints: [Self.endpoint], render: { billing, _ in Array(#"{"user":"\#(billing.user)"}"#.utf8) },
                now: { clock.seconds })
            let store = ledger.store.announcing(policy)
            let token = try await store.appStore.accountToken(for: "user_8")
            clock.set(F.t0 + F.day)
            _ = try await store.inbox.insert([try F.delivery(F.notification(
                "SUBSCRIBED", "INITIAL_BUY", original: "800", transaction: "800", purchase: F.t0, expires: F.t0 + 30 * F.day,
                signed: F.t0, token: token))])
            #expect(try await store.applier(.init(firstRetryDelay: .zero)).drain().applied == 1)
            let wall = Int64(Date().timeIntervalSince1970 * 1000)
            func look(at time: Int64) async throws {
                clock.set(time)
                let before = try await store.outbox.list(status: nil, limit: 100).count
                let users = try await store.outbox.announceLapsed(now: wall, limit: 10)
                let queued = try await store.outbox.list(status: nil, limit: 100).dropLast(before).reversed().map(\.event.type)
                let next = try await store.outbox.nextReview().map { String(($0 - F.t0) / F.day) } ?? "never"
                looks.append("day \((time - F.t0) / F.day): \(users) user(s) \(queued) next day \(next)")
            }
            try await look(at: F.t0 + 29 * F.day)
            try await look(at: F.t0 + 30 * F.day + 60_000)
            try await look(at: F.t0 + 31 * F.day)
        }
        return looks
    }

    /// The app's user pays a subscription's invoice and a one-off invoice, and Stripe refunds both
    /// charges and a third that paid no invoice: what is queued, in order, and the refunds' payloads.
    func refundScenario(_ backend: StoreBackend) async throws -> [String] {
        var queued: [String] = []
        try await withLedger(backend) { ledger in
            let policy = OutboxPolicy(
                catalog: .freeOnly, endpoints: [Self.endpoint], render: { billing, _ in Array(#"{"user":"\#(billing.user)"}"#.utf8) },
                now: { 1_770_000_000 })
            let store = ledger.store.announcing(policy)
            typealias E = EventFactory
            let invoice = E.object("invoice")
            var oneOff = invoice
            oneOff["id"] = "in_once"
            oneOff["parent"] = NSNull()
            let charge = E.object("charge_refunded_2023-08-16")
            var oneOffCharge = charge
            (oneOffCharge["id"], oneOffCharge["invoice"], oneOffCharge["amount_refunded"], oneOffCharge["refunded"]) = ("ch_once", "in_once", 500, false)
            var directCharge = charge
            (directCharge["id"], directCharge["invoice"]) = ("ch_direct", NSNull())
            let events: [(String, [String: Any])] = [
                ("customer.created", E.object("customer")), ("customer.subscription.created", E.object("subscription")),
                ("invoice.paid", invoice), ("invoice.paid", oneOff),
                ("charge.refunded", charge), ("charge.refunded", oneOffCharge), ("charge.refunded", directCharge),
            ]
            let bodies = events.enumerated().map { index, event in
                E.event(id: "evt_refund_\(index)", type: event.0, created: 1_769_940_000 + Int64(index), object: event.1)
            }
            // One delivery per transaction, in order, as Stripe sends them.
            let applier = store.applier(.init(firstRetryDelay: .zero))
            for body in bodies {
                _ = try await store.inbox.insert([try E.delivery(body)])
                #expect(try await applier.drain().applied == 1)
            }
            for message in try await store.outbox.list(status: nil, limit: 100).reversed() {
                var line = "\(message.event.user) \(message.event.type)"
                let payload = try JSONSerialization.jsonObject(with: Data(message.event.payload)) as? [String: Any]
                if let refund = payload?["refund"] as? [String: Any] {
                    let fields = ["charge", "invoice", "subscription", "customer", "amount", "amount_refunded", "currency"]
                    line += " " + fields.map { "\($0)=\(refund[$0] ?? "none")" }.joined(separator: " ")
                    line += " fully_refunded=\(refund["fully_refunded"] as? Bool as Any) source=\(payload?["source"] ?? "none")"
                    line += " view_of=\((payload?["data"] as? [String: Any])?["user"] ?? "none")"
                }
                queued.append(line)
            }
        }
        return queued
    }

    /// Two endpoints, one disabled with a backlog: what `due` hands out, and the oldest waiting.
    func endpointsScenario(_ backend: StoreBackend) async throws -> [String] {
        var seen: [String] = []
        try await withLedger(backend) { ledger in
            let outbox = ledger.store.outbox
            let (gone, live) = ("https://gone.example.com/hooks", "https://live.example.com/hooks")
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            // The first queued, delivered early: the oldest waiting is the next one.
            let early = try await outbox.enqueue(
                OutboxDraft(id: "msg_0", type: "test", scope: .test, user: "user_early", createdAt: now - 5000, payload: Array("{}".utf8)),
                endpoints: [live], now: now)
            try await outbox.record([OutboxAttempt(seq: early[0].seq, outcome: .delivered, at: now)])
            for n in 1...6 {
                _ = try await outbox.enqueue(
                    OutboxDraft(id: "msg_\(n)", type: "test", scope: .test, user: "user_\(n % 3)", createdAt: now - 1000 + Int64(n),
                        payload: Array("{}".utf8)),
                    endpoints: [gone, live], now: now)
            }
            try await outbox.disableEndpoint(gone, at: now, reason: "410 Gone")
            let onlyLive = try await outbox.due(now: now, limit: 100)
            seen.append("disabled: " + onlyLive.map { "\($0.event.id)@\($0.endpoint.prefix(12))" }.joined(separator: " "))
            #expect(try await outbox.depth().oldestUndeliveredAt == now - 999, "the first event queued and not delivered is the oldest waiting")
            try await outbox.record(onlyLive.map { OutboxAttempt(seq: $0.seq, outcome: .delivered, at: now) })
            #expect(try await outbox.enableEndpoint(gone))
            let shared = try await outbox.due(now: now, limit: 4)
            seen.append("shares of 4: " + shared.map { "\($0.event.id)@\($0.endpoint.prefix(12))" }.joined(separator: " "))
        }
        return seen
    }

    @Test("A disabled endpoint's backlog holds back no other endpoint, and each endpoint gets its share of a pass", arguments: StoreBackend.allCases)
    func endpoints(_ backend: StoreBackend) async throws {
        let seen = try await endpointsScenario(backend)
        #expect(seen == [
            "disabled: msg_1@https://live msg_2@https://live msg_3@https://live",
            "shares of 4: msg_1@https://gone msg_2@https://gone msg_4@https://live msg_5@https://live",
        ], "one event per user (users 1, 2, 0), the oldest first")
    }

    @Test("An endpoint the sender excludes (its lane still runs) is neither handed out nor taken: its events are due at once for the next lane", arguments: StoreBackend.allCases)
    func excludedEndpoint(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let outbox = ledger.store.outbox
            let (busy, idle) = ("https://busy.example.com/hooks", "https://idle.example.com/hooks")
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for n in 1...4 {
                _ = try await outbox.enqueue(
                    OutboxDraft(id: "msg_\(n)", type: "test", scope: .test, user: "user_\(n)", createdAt: now - 1000 + Int64(n),
                        payload: Array("{}".utf8)),
                    endpoints: [busy, idle], now: now)
            }
            let whileBusy = try await outbox.due(now: now, limit: 100, excluding: [busy])
            #expect(Set(whileBusy.map(\.endpoint)) == [idle], "only the endpoints a lane can start for now")
            #expect(whileBusy.map(\.event.id) == ["msg_1", "msg_2", "msg_3", "msg_4"])
            // On PostgreSQL `due` leases what it returns (two minutes): the excluded endpoint's
            // events must not have been, or they would wait out that lease.
            let next = try await outbox.due(now: now, limit: 100, excluding: [idle])
            #expect(next.map { "\($0.event.id)@\($0.endpoint.prefix(12))" } == [
                "msg_1@https://busy", "msg_2@https://busy", "msg_3@https://busy", "msg_4@https://busy",
            ], "the busy endpoint's events are due at once when its next lane starts")
        }
    }

    @Test("A refund of a Stripe subscription's payment is announced once, after the views, with the refund", arguments: StoreBackend.allCases)
    func stripeRefund(_ backend: StoreBackend) async throws {
        let queued = try await refundScenario(backend)
        #expect(queued.count == 3, "\(queued)")
        #expect(queued.prefix(2) == ["user_42 subscription.started", "user_42 entitlement.updated"])
        #expect(queued.last == """
            user_42 subscription.refunded charge=ch_3Sx4kNHd3QfR8sTa1q0Zx9Ww invoice=in_1Sx4kMHd3QfR8sTa0r7GJ2uQ \
            subscription=sub_1Sx4kLHd3QfR8sTaV9pWm2cE customer=cus_TqW7mZ2xLp9Kna amount=1944 amount_refunded=1944 currency=usd \
            fully_refunded=Optional(true) source=stripe view_of=user_42
            """, "a one-off invoice's refund and a charge of no invoice are only recorded")
    }

    @Test("A period that ends with no notification is announced when it lapses, once", arguments: StoreBackend.allCases)
    func lapsed(_ backend: StoreBackend) async throws {
        #expect(try await lapseScenario(backend) == [
            "day 29: 0 user(s) [] next day 30",
            "day 30: 1 user(s) [\"subscription.expired\", \"entitlement.updated\"] next day never",
            "day 31: 0 user(s) [] next day never",
        ])
    }

    @Test("The same deliveries announce the same events, sent one at a time per user, on every backend as on SQLite", arguments: StoreBackend.allCases)
    func announcesAsOnSQLite(_ backend: StoreBackend) async throws {
        let outcome = try await scenario(backend)
        #expect(outcome.owner == "user_7", "the appAccountToken ties the purchase to its user")
        #expect(outcome.stale == ["700 expired_while_active"], "active past its expiry with no renewal is worth asking Apple about")
        #expect(outcome.deadRetried == 1)
        #expect(outcome.inspected == ["app_store_subscription", "700,701", "user_7", "2"], "inspect shows the purchase whole")
        #expect(!outcome.announced.isEmpty && outcome.sentInOrder.count == outcome.announced.count)
        if backend != .sqlite {
            #expect(outcome == (try await scenario(.sqlite)), "the announced events and their order are SQLite's")
        }
    }
}
