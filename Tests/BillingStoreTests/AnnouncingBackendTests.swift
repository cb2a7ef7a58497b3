import BillingCore
import BillingStore
import Foundation
import Synchronization
import Testing

/// The outbox and the App Store roles through ``LedgerStore`` alone, on both backends: the same
/// deliveries must announce the same events, queue them in the same order per user, and leave
/// the same App Store state, whichever store holds the ledger.
@Suite("Announcing and the App Store on both backends", .serialized)
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

    @Test("A period that ends with no notification is announced when it lapses, once, on SQLite and PostgreSQL")
    func lapsedOnBoth() async throws {
        let sqlite = try await lapseScenario(.sqlite)
        #expect(sqlite == [
            "day 29: 0 user(s) [] next day 30",
            "day 30: 1 user(s) [\"subscription.expired\", \"entitlement.updated\"] next day never",
            "day 31: 0 user(s) [] next day never",
        ])
        #expect(try await lapseScenario(.postgres) == sqlite)
    }

    @Test("The same deliveries announce the same events, sent one at a time per user, on SQLite and PostgreSQL")
    func sameOnBoth() async throws {
        let sqlite = try await scenario(.sqlite)
        let postgres = try await scenario(.postgres)
        #expect(sqlite.owner == "user_7", "the appAccountToken ties the purchase to its user")
        #expect(sqlite.stale == ["700 expired_while_active"], "active past its expiry with no renewal is worth asking Apple about")
        #expect(sqlite.deadRetried == 1)
        #expect(sqlite.inspected == ["app_store_subscription", "700,701", "user_7", "2"], "inspect shows the purchase whole")
        #expect(postgres == sqlite)
    }
}
