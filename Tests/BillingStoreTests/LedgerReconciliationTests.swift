import BillingCore
import BillingStore
import Foundation
import GRDB
import Testing

/// The ledger side of reconcile: comparing fetched objects field by field, repairing through the
/// version guard, and finding objects Stripe no longer lists.
@Suite("Reconciling fetched objects with the ledger")
struct LedgerReconciliationTests {
    static let customerID = "cus_TqW7mZ2xLp9Kna"
    static let eventTime: Int64 = 1_780_000_000

    /// A customer snapshot as reconcile builds it from an API read at `fetchedAt`.
    func fetched(_ object: [String: Any], kind: LedgerObjectKind = .customer, at fetchedAt: Int64) throws -> LedgerSnapshot {
        let json = Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        return try LedgerSnapshot.decode(
            kind: kind, deletion: false, eventType: nil, eventID: "fetch:req_\(fetchedAt)", eventCreated: fetchedAt, objectJSON: json[...])
    }

    func ledgerWithCustomer() async throws -> TestLedger {
        let ledger = try TestLedger()
        try await ledger.deliver([EventFactory.event(id: "evt_1", type: "customer.created", created: Self.eventTime, object: EventFactory.object("customer"))])
        return ledger
    }

    @Test("An identical object matches; nothing is written")
    func matches() async throws {
        let ledger = try await ledgerWithCustomer()
        let reconciliation = LedgerReconciliation(database: ledger.database)
        let result = try await reconciliation.reconcile(
            [try fetched(EventFactory.object("customer"), at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false, trackSeen: false)
        #expect(result.matched == 1)
        #expect(result.drifts.isEmpty)
        let row = try #require(try await ledger.row("customer", id: Self.customerID))
        #expect(row["vEventID"] as String == "evt_1", "a match must not rewrite the row")
    }

    @Test("A changed field is reported by name and repaired")
    func fieldDiffers() async throws {
        let ledger = try await ledgerWithCustomer()
        var object = EventFactory.object("customer")
        object["email"] = "ada@new.example.com"
        object["metadata"] = ["app_user_id": "user_43"]
        let result = try await LedgerReconciliation(database: ledger.database).reconcile(
            [try fetched(object, at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false, trackSeen: false)
        let drift = try #require(result.drifts.first)
        #expect(drift.drift == .fieldDiffers)
        #expect(Set(drift.fields) == ["email", "appUserID"])
        #expect(drift.outcome == .repaired)
        let row = try #require(try await ledger.row("customer", id: Self.customerID))
        #expect(row["email"] as String? == "ada@new.example.com")
        #expect(row["vCreated"] as Int64 == Self.eventTime + 60)
    }

    @Test("--dry-run reports the same drift and changes nothing")
    func dryRun() async throws {
        let ledger = try await ledgerWithCustomer()
        let before = try await ledger.dump()
        var object = EventFactory.object("customer")
        object["name"] = "Ada King"
        var other = EventFactory.object("customer")
        other["id"] = "cus_Missing000001"
        let result = try await LedgerReconciliation(database: ledger.database).reconcile(
            [try fetched(object, at: Self.eventTime + 60), try fetched(other, at: Self.eventTime + 60)],
            account: "", livemode: false, dryRun: true, trackSeen: false)
        #expect(result.drifts.map(\.drift) == [.fieldDiffers, .missingLocally])
        #expect(result.drifts.allSatisfy { $0.outcome == .dryRun })
        #expect(try await ledger.dump() == before)
    }

    @Test("An object only Stripe has is missing locally, and inserted")
    func missingLocally() async throws {
        let ledger = try TestLedger()
        let result = try await LedgerReconciliation(database: ledger.database).reconcile(
            [try fetched(EventFactory.object("customer"), at: Self.eventTime)], account: "", livemode: false, dryRun: false, trackSeen: false)
        #expect(result.drifts.map(\.drift) == [.missingLocally])
        #expect(try await ledger.row("customer", id: Self.customerID) != nil)
    }

    @Test("A read older than the ledger's event is kept out: the version guard holds")
    func keptNewer() async throws {
        let ledger = try await ledgerWithCustomer()
        var object = EventFactory.object("customer")
        object["email"] = "stale@example.com"
        let result = try await LedgerReconciliation(database: ledger.database).reconcile(
            [try fetched(object, at: Self.eventTime - 10)], account: "", livemode: false, dryRun: false, trackSeen: false)
        #expect(result.drifts.map(\.outcome) == [.keptNewer])
        let row = try #require(try await ledger.row("customer", id: Self.customerID))
        #expect(row["email"] as String? == "ada@example.com")
    }

    @Test("A tombstone is never revived by a read")
    func tombstoneHolds() async throws {
        let ledger = try await ledgerWithCustomer()
        try await ledger.deliver([EventFactory.event(id: "evt_2", type: "customer.deleted", created: Self.eventTime + 5, object: EventFactory.object("customer"))])
        let result = try await LedgerReconciliation(database: ledger.database).reconcile(
            [try fetched(EventFactory.object("customer"), at: Self.eventTime + 100)], account: "", livemode: false, dryRun: false, trackSeen: false)
        #expect(result.drifts.first?.fields == ["deleted"])
        #expect(result.drifts.first?.outcome == .keptNewer)
        let row = try #require(try await ledger.row("customer", id: Self.customerID))
        #expect(row["vDeleted"] as Bool == true)
    }

    @Test("Objects a complete listing did not see are gone candidates; a 404 tombstones them")
    func goneCandidates() async throws {
        let ledger = try TestLedger()
        var bodies: [[UInt8]] = []
        for index in 0..<5 {
            var object = EventFactory.object("customer")
            object["id"] = "cus_gone\(index)"
            bodies.append(EventFactory.event(id: "evt_c\(index)", type: "customer.created", created: Self.eventTime, object: object))
        }
        try await ledger.deliver(bodies)
        let reconciliation = LedgerReconciliation(database: ledger.database)
        try await reconciliation.beginListing([.customer])
        let listed = try [0, 2, 4].map { index in
            var object = EventFactory.object("customer")
            object["id"] = "cus_gone\(index)"
            return try fetched(object, at: Self.eventTime + 60)
        }
        _ = try await reconciliation.reconcile(listed, account: "", livemode: false, dryRun: false, trackSeen: true)
        let candidates = try await reconciliation.goneCandidates(.customer, account: "", livemode: false, after: nil, limit: 100)
        #expect(candidates == ["cus_gone1", "cus_gone3"])
        #expect(try await reconciliation.goneCandidates(.customer, account: "", livemode: false, after: "cus_gone1", limit: 100) == ["cus_gone3"])
        #expect(try await reconciliation.markGone(.customer, id: "cus_gone1", account: "", livemode: false, fetchedAt: Self.eventTime + 61, fetchID: "fetch:req_1"))
        #expect(try await reconciliation.markGone(.customer, id: "cus_gone1", account: "", livemode: false, fetchedAt: Self.eventTime + 62, fetchID: "fetch:req_2") == false)
        // Other mode and account are different objects.
        #expect(try await reconciliation.goneCandidates(.customer, account: "acct_1", livemode: false, after: nil, limit: 100).isEmpty)
        // A second listing starts afresh.
        try await reconciliation.beginListing([.customer])
        #expect(try await reconciliation.goneCandidates(.customer, account: "", livemode: false, after: nil, limit: 100) == ["cus_gone0", "cus_gone2", "cus_gone3", "cus_gone4"])
    }

    @Test("Subscription items that differ are reported as items")
    func itemsDiffer() async throws {
        let ledger = try TestLedger()
        let subscription = EventFactory.object("subscription")
        try await ledger.deliver([EventFactory.event(id: "evt_s", type: "customer.subscription.created", created: Self.eventTime, object: subscription)])
        var changed = subscription
        var items = changed["items"] as! [String: Any]
        var data = items["data"] as! [[String: Any]]
        data[0]["quantity"] = 7
        items["data"] = data
        changed["items"] = items
        let result = try await LedgerReconciliation(database: ledger.database).reconcile(
            [try fetched(changed, kind: .subscription, at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false, trackSeen: false)
        #expect(result.drifts.first?.fields == ["items"])
        let quantity = try await ledger.rows("SELECT quantity FROM subscriptionItem").first?["quantity"] as Int64?
        #expect(quantity == 7)
    }

    @Test("A matching re-fetch clears the applier's re-fetch mark")
    func clearsRefetch() async throws {
        let ledger = try await ledgerWithCustomer()
        try await ledger.database.writer.write { db in try db.execute(sql: "UPDATE customer SET needsRefetch = 1") }
        let reconciliation = LedgerReconciliation(database: ledger.database)
        #expect(try await reconciliation.refetchQueue(account: "", livemode: false, limit: 10).map(\.id) == [Self.customerID])
        let result = try await reconciliation.reconcile(
            [try fetched(EventFactory.object("customer"), at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false, trackSeen: false)
        #expect(result.refetchCleared == 1)
        #expect(try await reconciliation.refetchQueue(account: "", livemode: false, limit: 10).isEmpty)
    }
}

@Suite("Reconcile leases, runs and the events cursor")
struct ReconcileRunsTests {
    @Test("A second holder is refused while the lease is live, and gets it once expired")
    func lease() async throws {
        let ledger = try TestLedger()
        let runs = ReconcileRuns(database: ledger.database)
        try await runs.acquire("reconcile", holder: "a:1", ttl: 120, now: 1000)
        await #expect(throws: LeaseHeld.self) {
            try await runs.acquire("reconcile", holder: "b:2", ttl: 120, now: 1100)
        }
        try await runs.renew("reconcile", holder: "a:1", ttl: 120, now: 1100)
        await #expect(throws: LeaseHeld.self) {
            try await runs.acquire("reconcile", holder: "b:2", ttl: 120, now: 1200)
        }
        // a:1 died without releasing: its lease runs out.
        try await runs.acquire("reconcile", holder: "b:2", ttl: 120, now: 1221)
        await #expect(throws: LeaseHeld.self) {
            try await runs.renew("reconcile", holder: "a:1", ttl: 120, now: 1222)
        }
        try await runs.release("reconcile", holder: "b:2")
        try await runs.acquire("reconcile", holder: "c:3", ttl: 120, now: 1223)
    }

    @Test("Runs are recorded; a run left running by a dead holder is marked interrupted")
    func runs() async throws {
        let ledger = try TestLedger()
        let runs = ReconcileRuns(database: ledger.database)
        let first = try await runs.start(mode: "full", holder: "a:1", dryRun: false, now: 100)
        try await runs.finish(first, outcome: .completed, totals: .init(drift: 3, repaired: 2, recoveredEvents: 1, objects: 50), error: nil, report: Data("{}".utf8), now: 160)
        _ = try await runs.start(mode: "full", holder: "a:2", dryRun: false, now: 200)
        try await runs.markAbandoned(leaseName: "reconcile", now: 300)
        let latest = try await runs.latest(mode: "full")
        #expect(latest.completed?.id == first)
        #expect(latest.completed?.drift == 3)
        #expect(latest.completed?.objects == 50)
        #expect(latest.finished?.outcome == .interrupted)
        #expect(try await runs.report(first) == Data("{}".utf8))
    }

    @Test("The events cursor only moves forward, per account and mode")
    func cursor() async throws {
        let ledger = try TestLedger()
        let runs = ReconcileRuns(database: ledger.database)
        #expect(try await runs.eventCursor(account: "", livemode: false) == nil)
        try await runs.advanceEventCursor(account: "", livemode: false, created: 500, walkedAt: 600)
        try await runs.advanceEventCursor(account: "", livemode: false, created: 400, walkedAt: 700)
        let cursor = try #require(try await runs.eventCursor(account: "", livemode: false))
        #expect(cursor.created == 500)
        #expect(cursor.walkedAt == 700)
        #expect(try await runs.eventCursor(account: "", livemode: true) == nil)
    }
}
