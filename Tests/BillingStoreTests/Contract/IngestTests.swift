import BillingCore
import BillingStore
import Foundation
import GRDB
import Synchronization
import Testing

@Suite("Group commit applies each new delivery in the transaction that stores it")
struct IngestTests {
    func subscriptionEvent(_ id: String, created: Int64, status: String) -> [UInt8] {
        var object = EventFactory.object("subscription")
        object["status"] = status
        return EventFactory.event(id: id, type: "customer.subscription.updated", created: created, object: object)
    }

    @Test("An acknowledged delivery is already in the ledger and its inbox row is done; a duplicate changes nothing", arguments: StoreBackend.allCases)
    func appliedOnCommit(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let committer = GroupCommitter(applier: ledger.applier)
            let body = subscriptionEvent("evt_new", created: 10, status: "active")
            #expect(try await committer.submit(EventFactory.delivery(body)) != .duplicate)

            let subscriptionID = EventFactory.object("subscription")["id"] as! String
            #expect(try await ledger.value("subscription", subscriptionID, "status") == "active")
            let event = try #require(try await ledger.inbox.list(.init()).first)
            #expect(event.status == .applied)
            #expect(event.effect == ApplyEffect.applied.rawValue)
            #expect(event.attempts == 1)
            #expect(try await ledger.applier.drain().processed == 0, "nothing was left for the applier")

            #expect(try await committer.submit(EventFactory.delivery(body)) == .duplicate)
            #expect(try await ledger.inbox.count() == 1)
        }
    }

    @Test("Out of order within one group: the ledger keeps the newest snapshot, the older is recorded stale", arguments: StoreBackend.allCases)
    func orderInsideAGroup(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let newer = subscriptionEvent("evt_2", created: 20, status: "past_due")
            let older = subscriptionEvent("evt_1", created: 10, status: "active")
            // One group, the newer first.
            let result = try await ledger.applier.ingest(
                [ledger.applier.prepare(try EventFactory.delivery(newer)), ledger.applier.prepare(try EventFactory.delivery(older))],
                now: 1)
            #expect(result.pass.applied == 1 && result.pass.stale == 1)
            let subscriptionID = EventFactory.object("subscription")["id"] as! String
            #expect(try await ledger.value("subscription", subscriptionID, "status") == "past_due")
            let effects = try await ledger.inbox.list(.init()).map { "\($0.eventID):\($0.effect ?? "-")" }.sorted()
            #expect(effects == ["evt_1:stale", "evt_2:applied"])
        }
    }

    @Test("A delivery that does not decode is stored pending for the applier, which retries it with backoff", arguments: StoreBackend.allCases)
    func undecodableIsQueued(backend: StoreBackend) async throws {
        try await withLedger(backend) { (ledger: LedgerUnderTest) async throws in
            let counter = QueuedCounter()
            let committer = GroupCommitter(applier: ledger.applier, didCommit: { counter.add($0.queued) })
            let body = Array(#"{"id":"evt_bad","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1","currency":7}}}"#.utf8)
            #expect(try await committer.submit(EventFactory.delivery(body)) != .duplicate)
            #expect(counter.total == 1)
            #expect(try await ledger.inbox.list(.init()).map(\.status) == [.pending])
            #expect(try await ledger.applier.drain().failed == 1)
        }
    }

    /// A trigger that refuses every insert into `subscription`, standing in for a ledger write
    /// that fails (a full disk, a constraint); each dialect spells triggers its own way.
    static func refuseSubscriptionInserts(_ ledger: LedgerUnderTest) async throws {
        switch ledger.backend {
        case .sqlite:
            try await ledger.execute("CREATE TEMP TRIGGER refuse BEFORE INSERT ON main.subscription BEGIN SELECT RAISE(ABORT, 'refused'); END")
        case .postgres:
            try await ledger.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$")
            try await ledger.execute("CREATE TRIGGER refuse BEFORE INSERT ON subscription FOR EACH ROW EXECUTE FUNCTION refuse()")
        }
    }

    @Test("If a ledger write fails, the whole group is stored pending and nothing of it is half-applied", arguments: StoreBackend.allCases)
    func ledgerFailureFallsBack(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await Self.refuseSubscriptionInserts(ledger)
            let committer = GroupCommitter(applier: ledger.applier)
            let body = subscriptionEvent("evt_refused", created: 10, status: "active")
            #expect(try await committer.submit(EventFactory.delivery(body)) != .duplicate)
            #expect(try await ledger.inbox.list(.init()).map(\.status) == [.pending])
            #expect(try await ledger.rows("SELECT id FROM subscription").isEmpty)
        }
    }
}

final class QueuedCounter: Sendable {
    private let value = Mutex(0)
    func add(_ count: Int) { value.withLock { $0 += count } }
    var total: Int { value.withLock { $0 } }
}
