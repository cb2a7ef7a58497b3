import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

@Suite("Durable inbox, on both backends")
struct InboxQueueTests {
    func delivery(_ id: String, account: String? = nil, livemode: Bool = false) -> InboxDelivery {
        InboxDelivery(
            envelope: EventEnvelope(
                id: id, type: "invoice.paid", apiVersion: "2026-10-28.clover", created: 100, livemode: livemode,
                account: account, objectID: "in_\(id)", objectType: "invoice"),
            body: Array("{\"id\":\"\(id)\",\"account\":\"\(account ?? "")\",\"livemode\":\(livemode)}".utf8), receivedAt: 1,
            source: .webhook, secretIndex: 0)
    }

    @Test("The same event id is stored once; other accounts and modes are other keys", arguments: StoreBackend.allCases)
    func uniqueness(_ backend: StoreBackend) async throws {
        try await withInbox(backend) { store in
            let inbox = store.inbox
            let outcomes = try await inbox.insert([
                delivery("evt_1"), delivery("evt_1"), delivery("evt_1", account: "acct_1"), delivery("evt_1", livemode: true),
            ])
            #expect(outcomes[1] == .duplicate)
            #expect(outcomes.filter { $0 != .duplicate }.count == 3)
            #expect(try await inbox.insert([delivery("evt_1")]) == [.duplicate])
            #expect(try await inbox.count() == 3)
            #expect(try await inbox.contains(eventID: "evt_1", account: "acct_1", livemode: false))
            #expect(try await !inbox.contains(eventID: "evt_1", account: "acct_1", livemode: true))
        }
    }

    @Test(
        "Reading and re-queueing an event is scoped by account and mode: the same id elsewhere is another event",
        arguments: StoreBackend.allCases)
    func scopedByAccountAndMode(_ backend: StoreBackend) async throws {
        try await withInbox(backend) { store in
            let inbox = store.inbox
            let places: [(String?, Bool)] = [(nil, false), (nil, true), ("acct_1", false)]
            _ = try await inbox.insert(places.map { delivery("evt_1", account: $0.0, livemode: $0.1) })
            // Each body holds no object, so one try leaves each dead.
            #expect(try await store.failEveryPending() == 3)

            #expect(try await inbox.retry(eventID: "evt_1", account: nil, livemode: true))
            let pending = try await inbox.list(.init(statuses: [.pending]))
            #expect(pending.map(\.livemode) == [true])
            #expect(pending.map(\.account) == [nil])
            #expect(try await inbox.list(.init(statuses: [.dead])).count == 2)
            #expect(try await !inbox.retry(eventID: "evt_1", account: "acct_2", livemode: false), "no such event in acct_2")

            for (account, livemode) in places {
                let body = try #require(try await inbox.body(eventID: "evt_1", account: account, livemode: livemode))
                #expect(body == delivery("evt_1", account: account, livemode: livemode).body)
            }
            #expect(try await inbox.body(eventID: "evt_1", account: "acct_1", livemode: true) == nil)
            #expect(try await inbox.retryAllFailed() == 2)
        }
    }

    @Test("A body comes back byte for byte: key order, spacing, escapes and bytes that are not UTF-8", arguments: StoreBackend.allCases)
    func bodiesAreExact(_ backend: StoreBackend) async throws {
        try await withInbox(backend) { store in
            let base = delivery("evt_raw")
            let body = Array("{ \"z\":1,\"a\" : \"\\u00e9 é\",\n\"a\":2 }\t".utf8) + [0x00, 0xff, 0xfe]
            _ = try await store.inbox.insert([
                InboxDelivery(envelope: base.envelope, body: body, receivedAt: 1, source: .webhook, secretIndex: nil)
            ])
            #expect(try await store.inbox.body(eventID: "evt_raw", account: nil, livemode: false) == body)
        }
    }

    @Test("Listing filters by status, type, object, event id and position; counts and depth follow the statuses", arguments: StoreBackend.allCases)
    func listingAndCounts(_ backend: StoreBackend) async throws {
        try await withInbox(backend) { store in
            let inbox = store.inbox
            let first = try await inbox.insert((1...3).map { delivery("evt_\($0)") })
            #expect(try await store.failEveryPending() == 3)
            let second = try await inbox.insert([
                delivery("evt_4"), delivery("evt_5", account: "acct_1"),
                InboxDelivery(
                    envelope: EventEnvelope(
                        id: "evt_6", type: "customer.created", apiVersion: nil, created: 200, livemode: true, account: nil,
                        objectID: "cus_6", objectType: "customer"),
                    body: Array("{}".utf8), receivedAt: 7, source: .api, secretIndex: nil, subtype: "INITIAL_BUY"),
            ])
            let seqs = (first + second).compactMap { outcome -> Int64? in
                if case .stored(let seq) = outcome { return seq } else { return nil }
            }
            #expect(seqs.count == 6)
            #expect(seqs == seqs.sorted(), "positions follow arrival order")

            let all = try await inbox.list(.init())
            #expect(all.map(\.eventID) == ["evt_1", "evt_2", "evt_3", "evt_4", "evt_5", "evt_6"])
            #expect(all.map(\.seq) == seqs)
            let sixth = try #require(all.last)
            #expect(sixth.account == nil && sixth.livemode && sixth.type == "customer.created" && sixth.apiVersion == nil)
            #expect(sixth.objectID == "cus_6" && sixth.objectType == "customer" && sixth.subtype == "INITIAL_BUY")
            #expect(sixth.source == .api && sixth.receivedAt == 7 && sixth.created == 200 && sixth.status == .pending)
            #expect(all[0].status == .dead && all[0].attempts == 1 && all[0].lastError != nil)
            #expect(all[4].account == "acct_1")

            #expect(try await inbox.list(.init(statuses: [.dead])).map(\.eventID) == ["evt_1", "evt_2", "evt_3"])
            #expect(try await inbox.list(.init(statuses: [.pending, .dead], limit: 2)).map(\.eventID) == ["evt_1", "evt_2"])
            #expect(try await inbox.list(.init(type: "customer.created")).map(\.eventID) == ["evt_6"])
            #expect(try await inbox.list(.init(objectID: "in_evt_2")).map(\.eventID) == ["evt_2"])
            #expect(try await inbox.list(.init(eventID: "evt_5")).map(\.account) == ["acct_1"])
            #expect(try await inbox.list(.init(afterSeq: seqs[3])).map(\.eventID) == ["evt_5", "evt_6"])
            #expect(try await inbox.list(.init(statuses: [.applied])).isEmpty)

            let counts = try await inbox.countsByStatus()
            #expect(counts == [.pending: 3, .dead: 3, .applied: 0, .ignored: 0, .failed: 0])
            let depth = try await inbox.depth()
            #expect(depth.counts == [.pending: 3, .failed: 0, .dead: 3])
            #expect(depth.oldestPendingReceivedAt == 1)
        }
    }

    @Test("Group commit: concurrent submissions share transactions and all get their outcome", arguments: StoreBackend.allCases)
    func groupCommit(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let commits = CommitCounter()
            let committer = GroupCommitter(
                applier: ledger.applier, didCommit: { ingested in commits.add(ingested.outcomes.count { $0 != .duplicate }) })
            let outcomes = try await withThrowingTaskGroup(of: InboxInsertOutcome.self) { group in
                for index in 0..<500 {
                    group.addTask { try await committer.submit(self.delivery("evt_\(index % 400)")) }
                }
                var all: [InboxInsertOutcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.count == 500)
            #expect(outcomes.filter { $0 == .duplicate }.count == 100)
            #expect(try await ledger.inbox.count() == 400)
            #expect(commits.total == 400)
            #expect(commits.calls < 500, "deliveries shared commits")
        }
    }
}

final class CommitCounter: Sendable {
    private let state = Mutex((calls: 0, total: 0))
    func add(_ stored: Int) { state.withLock { $0.calls += 1; $0.total += stored } }
    var calls: Int { state.withLock { $0.calls } }
    var total: Int { state.withLock { $0.total } }
}
