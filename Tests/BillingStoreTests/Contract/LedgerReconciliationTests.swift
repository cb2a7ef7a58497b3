import BillingCore
import BillingStore
import Foundation
import GRDB
import Testing

/// The ledger side of reconcile: comparing fetched objects field by field, repairing through the
/// version guard, and finding objects Stripe no longer lists.
@Suite("Reconciling fetched objects with the ledger", .serialized)
struct LedgerReconciliationTests {
    static let customerID = "cus_TqW7mZ2xLp9Kna"
    static let eventTime: Int64 = 1_780_000_000

    /// A customer snapshot as reconcile builds it from an API read at `fetchedAt`.
    func fetched(_ object: [String: Any], kind: LedgerObjectKind = .customer, at fetchedAt: Int64) throws -> LedgerSnapshot {
        let json = Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        return try LedgerSnapshot.decode(
            kind: kind, deletion: false, eventType: nil, eventID: "fetch:req_\(fetchedAt)", eventCreated: fetchedAt, objectJSON: json[...])
    }

    /// Runs `body` on a ledger of `backend` holding the fixture customer, created at `eventTime`.
    func withCustomer(_ backend: StoreBackend, _ body: (LedgerUnderTest) async throws -> Void) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver([
                EventFactory.event(id: "evt_1", type: "customer.created", created: Self.eventTime, object: EventFactory.object("customer"))
            ])
            try await body(ledger)
        }
    }

    @Test("An identical object matches; nothing is written", arguments: StoreBackend.allCases)
    func matches(_ backend: StoreBackend) async throws {
        try await withCustomer(backend) { ledger in
            let result = try await ledger.store.reconciliation.reconcile(
                [try fetched(EventFactory.object("customer"), at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false,
                trackSeen: false, run: 1)
            #expect(result.matched == 1)
            #expect(result.drifts.isEmpty)
            #expect(try await ledger.value("customer", Self.customerID, "vEventID") == "evt_1", "a match must not rewrite the row")
        }
    }

    @Test("A changed field is reported by name and repaired", arguments: StoreBackend.allCases)
    func fieldDiffers(_ backend: StoreBackend) async throws {
        try await withCustomer(backend) { ledger in
            var object = EventFactory.object("customer")
            object["email"] = "ada@new.example.com"
            object["metadata"] = ["app_user_id": "user_43"]
            let result = try await ledger.store.reconciliation.reconcile(
                [try fetched(object, at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false, trackSeen: false, run: 1)
            let drift = try #require(result.drifts.first)
            #expect(drift.drift == .fieldDiffers)
            #expect(Set(drift.fields) == ["email", "appUserID"])
            #expect(drift.outcome == .repaired)
            #expect(try await ledger.value("customer", Self.customerID, "email") == "ada@new.example.com")
            #expect(try await ledger.value("customer", Self.customerID, "vCreated") == String(Self.eventTime + 60))
        }
    }

    @Test("--dry-run reports the same drift and changes nothing", arguments: StoreBackend.allCases)
    func dryRun(_ backend: StoreBackend) async throws {
        try await withCustomer(backend) { ledger in
            let before = try await ledger.dump()
            var object = EventFactory.object("customer")
            object["name"] = "Ada King"
            var other = EventFactory.object("customer")
            other["id"] = "cus_Missing000001"
            let result = try await ledger.store.reconciliation.reconcile(
                [try fetched(object, at: Self.eventTime + 60), try fetched(other, at: Self.eventTime + 60)],
                account: "", livemode: false, dryRun: true, trackSeen: false, run: 1)
            #expect(result.drifts.map(\.drift) == [.fieldDiffers, .missingLocally])
            #expect(result.drifts.allSatisfy { $0.outcome == .dryRun })
            #expect(try await ledger.dump() == before)
        }
    }

    @Test("An object only Stripe has is missing locally, and inserted", arguments: StoreBackend.allCases)
    func missingLocally(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let result = try await ledger.store.reconciliation.reconcile(
                [try fetched(EventFactory.object("customer"), at: Self.eventTime)], account: "", livemode: false, dryRun: false,
                trackSeen: false, run: 1)
            #expect(result.drifts.map(\.drift) == [.missingLocally])
            #expect(try await ledger.value("customer", Self.customerID, "id") == Self.customerID)
        }
    }

    @Test("A read older than the ledger's event is kept out: the version guard holds", arguments: StoreBackend.allCases)
    func keptNewer(_ backend: StoreBackend) async throws {
        try await withCustomer(backend) { ledger in
            var object = EventFactory.object("customer")
            object["email"] = "stale@example.com"
            let result = try await ledger.store.reconciliation.reconcile(
                [try fetched(object, at: Self.eventTime - 10)], account: "", livemode: false, dryRun: false, trackSeen: false, run: 1)
            #expect(result.drifts.map(\.outcome) == [.keptNewer])
            #expect(try await ledger.value("customer", Self.customerID, "email") == "ada@example.com")
        }
    }

    @Test("A tombstone is never revived by a read", arguments: StoreBackend.allCases)
    func tombstoneHolds(_ backend: StoreBackend) async throws {
        try await withCustomer(backend) { ledger in
            try await ledger.deliver([
                EventFactory.event(id: "evt_2", type: "customer.deleted", created: Self.eventTime + 5, object: EventFactory.object("customer"))
            ])
            let result = try await ledger.store.reconciliation.reconcile(
                [try fetched(EventFactory.object("customer"), at: Self.eventTime + 100)], account: "", livemode: false, dryRun: false,
                trackSeen: false, run: 1)
            #expect(result.drifts.first?.fields == ["deleted"])
            #expect(result.drifts.first?.outcome == .keptNewer)
            #expect(try await ledger.value("customer", Self.customerID, "vDeleted") == "1")
        }
    }

    @Test("Objects a complete listing did not see are gone candidates; a 404 tombstones them", arguments: StoreBackend.allCases)
    func goneCandidates(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            var bodies: [[UInt8]] = []
            for index in 0..<5 {
                var object = EventFactory.object("customer")
                object["id"] = "cus_gone\(index)"
                bodies.append(EventFactory.event(id: "evt_c\(index)", type: "customer.created", created: Self.eventTime, object: object))
            }
            try await ledger.deliver(bodies)
            let reconciliation = ledger.store.reconciliation
            try await reconciliation.beginListing([.customer])
            let listed = try [0, 2, 4].map { index in
                var object = EventFactory.object("customer")
                object["id"] = "cus_gone\(index)"
                return try fetched(object, at: Self.eventTime + 60)
            }
            _ = try await reconciliation.reconcile(listed, account: "", livemode: false, dryRun: false, trackSeen: true, run: 1)
            if backend == .postgres {
                // Another replica's run keeps its own listing. (On SQLite one process runs one
                // reconcile at a time, under the lease, and each process lists on its own connection.)
                let other = ledger.store.reconciliation
                try await other.beginListing([.customer])
                #expect(try await other.goneCandidates(.customer, account: "", livemode: false, after: nil, limit: 100).count == 5)
            }
            let candidates = try await reconciliation.goneCandidates(.customer, account: "", livemode: false, after: nil, limit: 100)
            #expect(candidates == ["cus_gone1", "cus_gone3"])
            #expect(try await reconciliation.goneCandidates(.customer, account: "", livemode: false, after: "cus_gone1", limit: 100) == ["cus_gone3"])
            #expect(try await reconciliation.markGone(.customer, id: "cus_gone1", account: "", livemode: false, fetchedAt: Self.eventTime + 61, fetchID: "fetch:req_1", run: 1))
            #expect(try await reconciliation.markGone(.customer, id: "cus_gone1", account: "", livemode: false, fetchedAt: Self.eventTime + 62, fetchID: "fetch:req_2", run: 1) == false)
            // Other mode and account are different objects.
            #expect(try await reconciliation.goneCandidates(.customer, account: "acct_1", livemode: false, after: nil, limit: 100).isEmpty)
            // A second listing starts afresh.
            try await reconciliation.beginListing([.customer])
            #expect(try await reconciliation.goneCandidates(.customer, account: "", livemode: false, after: nil, limit: 100) == ["cus_gone0", "cus_gone2", "cus_gone3", "cus_gone4"])
        }
    }

    @Test("Unchanged JSON matches without decoding; changed, missing and deleted objects do not", arguments: StoreBackend.allCases)
    func unchangedJSON(_ backend: StoreBackend) async throws {
        try await withCustomer(backend) { ledger in
            let reconciliation = ledger.store.reconciliation
            let raw = try #require(try await ledger.value("customer", Self.customerID, "raw"))
            let objects: [(id: String, json: ArraySlice<UInt8>)] = [
                (Self.customerID, Array(raw.utf8)[...]), (Self.customerID, Array((raw + " ").utf8)[...]), ("cus_Unknown", Array(raw.utf8)[...]),
            ]
            let (matched, changed) = try await reconciliation.unchanged(.customer, objects: objects, account: "", livemode: false, trackSeen: false)
            #expect(matched == 1)
            #expect(changed == [1, 2])
            let (_, otherMode) = try await reconciliation.unchanged(.customer, objects: [objects[0]], account: "", livemode: true, trackSeen: false)
            #expect(otherMode == [0])
        }
    }

    @Test("Subscription items that differ are reported as items", arguments: StoreBackend.allCases)
    func itemsDiffer(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let subscription = EventFactory.object("subscription")
            try await ledger.deliver([
                EventFactory.event(id: "evt_s", type: "customer.subscription.created", created: Self.eventTime, object: subscription)
            ])
            var changed = subscription
            var items = changed["items"] as! [String: Any]
            var data = items["data"] as! [[String: Any]]
            data[0]["quantity"] = 7
            let itemID = try #require(data[0]["id"] as? String)
            items["data"] = data
            changed["items"] = items
            let result = try await ledger.store.reconciliation.reconcile(
                [try fetched(changed, kind: .subscription, at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false,
                trackSeen: false, run: 1)
            #expect(result.drifts.first?.fields == ["items"])
            #expect(try await ledger.value("subscriptionItem", itemID, "quantity") == "7")
        }
    }

    @Test("A matching re-fetch clears the applier's re-fetch mark", arguments: StoreBackend.allCases)
    func clearsRefetch(_ backend: StoreBackend) async throws {
        try await withCustomer(backend) { ledger in
            try await ledger.execute("UPDATE customer SET needsRefetch = TRUE")
            let reconciliation = ledger.store.reconciliation
            #expect(try await reconciliation.refetchQueue(account: "", livemode: false, limit: 10).map(\.id) == [Self.customerID])
            let result = try await reconciliation.reconcile(
                [try fetched(EventFactory.object("customer"), at: Self.eventTime + 60)], account: "", livemode: false, dryRun: false,
                trackSeen: false, run: 1)
            #expect(result.refetchCleared == 1)
            #expect(try await reconciliation.refetchQueue(account: "", livemode: false, limit: 10).isEmpty)
        }
    }
}

@Suite("Reconcile leases, runs and the events cursor, on both backends")
struct ReconcileRunsTests {
    @Test("A second holder is refused while the lease is live, and gets it once expired", arguments: StoreBackend.allCases)
    func lease(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let runs = ledger.store.reconcileRuns
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
    }

    @Test("Runs are recorded with their report; a run left running by a dead holder is marked interrupted", arguments: StoreBackend.allCases)
    func runs(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let runs = ledger.store.reconcileRuns
            let first = try await runs.start(mode: "full", holder: "a:1", dryRun: false, now: 100)
            try await runs.finish(
                first, outcome: .completed, totals: .init(drift: 3, repaired: 2, recoveredEvents: 1, objects: 50), error: nil,
                report: Data("{}".utf8), now: 160)
            _ = try await runs.start(mode: "full", holder: "a:2", dryRun: false, now: 200)
            try await runs.markAbandoned(leaseName: "reconcile", now: 300)
            let latest = try await runs.latest(mode: "full")
            #expect(latest.completed?.id == first)
            #expect(latest.completed?.drift == 3)
            #expect(latest.completed?.objects == 50)
            #expect(latest.finished?.outcome == .interrupted)
            #expect(try await ledger.rows("SELECT report FROM reconcileRun WHERE id = \(first)").first?["report"] == "{}")
        }
    }

    @Test("The events cursor only moves forward, per account and mode", arguments: StoreBackend.allCases)
    func cursor(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let runs = ledger.store.reconcileRuns
            #expect(try await runs.eventCursor(account: "", livemode: false) == nil)
            try await runs.advanceEventCursor(account: "", livemode: false, created: 500, walkedAt: 600)
            try await runs.advanceEventCursor(account: "", livemode: false, created: 400, walkedAt: 700)
            let cursor = try #require(try await runs.eventCursor(account: "", livemode: false))
            #expect(cursor.created == 500)
            #expect(cursor.walkedAt == 700)
            #expect(try await runs.eventCursor(account: "", livemode: true) == nil)
        }
    }
}
