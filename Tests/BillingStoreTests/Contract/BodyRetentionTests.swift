import BillingCore
import BillingStore
import Foundation
import GRDB
import Testing

/// A small ledger for retention: old events (created before `cutoff`) and events inside the
/// window, with superseded and newest snapshots of three subscriptions and a customer.
private enum RetentionLedger {
    static let cutoff: Int64 = 10_000

    /// Event id, created, object kind, object id, subscription status (nil for the customer).
    static let events: [(id: String, created: Int64, id2: String, status: String?)] = [
        ("evt_r1_a", 1_000, "sub_r1", "trialing"), ("evt_r1_b", 2_000, "sub_r1", "active"), ("evt_r1_c", 3_000, "sub_r1", "past_due"),
        ("evt_r2_a", 1_000, "sub_r2", "trialing"), ("evt_r2_b", 20_000, "sub_r2", "active"),
        ("evt_r3_a", 1_000, "sub_r3", "active"),
        ("evt_r4_a", 15_000, "sub_r4", "trialing"), ("evt_r4_b", 16_000, "sub_r4", "active"),
        ("evt_c_a", 1_000, "cus_r", nil), ("evt_c_b", 1_500, "cus_r", nil),
    ]
    /// Old, applied, and superseded by a snapshot whose body is kept.
    static let prunable: Set<String> = ["evt_r1_a", "evt_r1_b", "evt_r2_a", "evt_c_a"]

    static func body(_ event: (id: String, created: Int64, id2: String, status: String?)) -> [UInt8] {
        if let status = event.status {
            var object = EventFactory.object("subscription")
            object["id"] = event.id2
            object["status"] = status
            return EventFactory.event(id: event.id, type: "customer.subscription.updated", created: event.created, object: object)
        }
        var object = EventFactory.object("customer")
        object["id"] = event.id2
        object["name"] = "Name at \(event.created)"
        return EventFactory.event(id: event.id, type: "customer.updated", created: event.created, object: object)
    }

    static var bodies: [[UInt8]] { events.map(body) }

    /// Whether each event still has its body, by id.
    static func bodiesKept(_ ledger: LedgerUnderTest) async throws -> [String: Bool] {
        var kept: [String: Bool] = [:]
        for event in events { kept[event.id] = try await ledger.inbox.body(eventID: event.id, account: nil, livemode: false) != nil }
        return kept
    }
}

@Suite("Body retention prunes only superseded Stripe bodies past the window, and changes no state")
struct BodyRetentionTests {
    @Test("Pruning keeps the newest snapshot of each object and every body inside the window, in batches of any size", arguments: StoreBackend.allCases)
    func prunesOnlySuperseded(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(RetentionLedger.bodies)
            let dump = try await ledger.dump()
            let retention = ledger.store.retention

            let result = try await retention.pruneBodies(olderThan: RetentionLedger.cutoff, batchSize: 1, dryRun: false, progress: { _ in })
            #expect(result.bodies == RetentionLedger.prunable.count)
            #expect(result.bytes > 0)
            for (id, kept) in try await RetentionLedger.bodiesKept(ledger) {
                #expect(kept == !RetentionLedger.prunable.contains(id), "\(id)")
            }
            #expect(try await ledger.inbox.count() == RetentionLedger.events.count, "every event's row stays")
            #expect(try await ledger.dump() == dump, "the ledger is unchanged")
            let counts = try await retention.eventCounts()
            #expect(counts["stripe"] == InboxEventCount(events: 10, bodies: 6))
            #expect(counts["appstore"] == InboxEventCount(events: 0, bodies: 0))

            let again = try await retention.pruneBodies(olderThan: RetentionLedger.cutoff, batchSize: 1000, dryRun: false, progress: { _ in })
            #expect(again == BodyPruneResult(), "a second run finds nothing more")
        }
    }

    @Test("A body the App Store sent, or one of an event still waiting to apply, is never pruned", arguments: StoreBackend.allCases)
    func keepsAppStoreAndUnapplied(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(RetentionLedger.bodies)
            try await ledger.execute("UPDATE inboxEvent SET source = 'appstore_notification' WHERE eventID = 'evt_r1_a'")
            try await ledger.execute("UPDATE inboxEvent SET status = 'failed' WHERE eventID = 'evt_r1_b'")
            let result = try await ledger.store.retention.pruneBodies(
                olderThan: RetentionLedger.cutoff, batchSize: 1000, dryRun: false, progress: { _ in })
            #expect(result.bodies == RetentionLedger.prunable.count - 2)
            let kept = try await RetentionLedger.bodiesKept(ledger)
            #expect(kept["evt_r1_a"] == true)
            #expect(kept["evt_r1_b"] == true)
            #expect(kept["evt_r2_a"] == false)
        }
    }

    @Test("Bodies are stored compressed, by the inbox and by the webhook's group commit, and read back byte for byte by the inbox, the applier and replay", arguments: StoreBackend.allCases)
    func storedCompressed(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let bodies = RetentionLedger.bodies
            // The first half through the inbox and the applier's drain, the rest as the webhook commits them.
            let pass = try await ledger.deliver(Array(bodies.prefix(5)))
            #expect(pass.processed == 5 && pass.failed == 0 && pass.dead == 0, "the applier read the bodies it stored")
            #expect(try await ledger.ingest(Array(bodies.dropFirst(5))) == 0)

            let row = try #require(try await ledger.rows(
                "SELECT count(*) AS n, sum(CASE WHEN encoding = 1 THEN 1 ELSE 0 END) AS zstd, sum(length(body)) AS bytes FROM inboxBody").first)
            #expect(row.int("n") == Int64(bodies.count))
            #expect(row.int("zstd") == Int64(bodies.count), "every body compressed")
            let received = bodies.reduce(0) { $0 + $1.count }
            #expect((row.int("bytes") ?? .max) * 4 < Int64(received) * 3, "\(row) of \(received) bytes received")
            for (event, body) in zip(RetentionLedger.events, bodies) {
                #expect(try await ledger.inbox.body(eventID: event.id, account: nil, livemode: false) == body, "\(event.id)")
            }

            let dump = try await ledger.dump()
            let replayed = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(replayed.processed == bodies.count && replayed.failed == 0 && replayed.dead == 0)
            #expect(try await ledger.dump() == dump)
        }
    }

    @Test("An object's raw JSON is kept once: a row an event wrote keeps none of it, and inspect, reconcile, replay and retention read it from the event's body; an object read from the API keeps it compressed", arguments: StoreBackend.allCases)
    func rawJSONKeptOnce(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let bodies = RetentionLedger.bodies
            try await ledger.deliver(Array(bodies.prefix(5)))
            #expect(try await ledger.ingest(Array(bodies.dropFirst(5))) == 0)
            // Each object's newest snapshot, as the event carried it.
            var newest: [String: [UInt8]] = [:]
            for (event, body) in zip(RetentionLedger.events, bodies).sorted(by: { $0.0.created < $1.0.created }) {
                newest[event.id2] = Array(try #require(RawObjectLocator.object(in: body)))
            }
            let objects = [("subscription", ["sub_r1", "sub_r2", "sub_r3", "sub_r4"]), ("customer", ["cus_r"])]
            func readsBack(_ moment: String) async throws {
                for (table, ids) in objects {
                    for id in ids {
                        let json = try #require(newest[id])
                        #expect(try await ledger.value(table, id, "raw") == String(decoding: json, as: UTF8.self), "\(moment): \(id) reads back as sent")
                    }
                }
            }
            for (table, ids) in objects {
                for id in ids {
                    let stored = try #require(try await ledger.rows("SELECT length(raw) AS n FROM \(table) WHERE id = '\(id)'").first?.int("n"))
                    #expect(stored == 0, "\(id): its row keeps no copy of the JSON (\(stored) bytes)")
                }
            }
            try await readsBack("applied")
            let view = try #require(try await ledger.maintenance.inspect(id: "sub_r2"))
            let object = try #require(view["object"] as? [String: any Sendable])
            let raw = try #require(object["raw"] as? LedgerJSON)
            #expect((raw.value as? [String: Any])?["status"] as? String == "active", "inspect shows the JSON: \(raw.value)")
            #expect(object["event_body"] == nil && object["eventBody"] == nil && object["eventbody"] == nil, "inspect shows no body column")

            let reconciliation = ledger.store.reconciliation
            let compared: [(id: String, json: ArraySlice<UInt8>)] = try ["sub_r2", "sub_r3"].map { ($0, try #require(newest[$0])[...]) }
                + [("sub_r4", Array("{}".utf8)[...])]
            let (matched, changed) = try await reconciliation.unchanged(.subscription, objects: compared, account: "", livemode: false, trackSeen: false)
            #expect(matched == 2 && changed == [2], "reconcile compares the JSON, not the stored bytes")

            let dump = try await ledger.dump()
            #expect(dump.contains("raw=Data(") && !dump.contains("raw=Data(0 bytes)"), "the dump reads the JSON the rows keep in their events' bodies")
            _ = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(try await ledger.dump() == dump)

            // Retention prunes superseded bodies, never the one a row reads its JSON from.
            let pruned = try await ledger.store.retention.pruneBodies(olderThan: RetentionLedger.cutoff, batchSize: 1000, dryRun: false, progress: { _ in })
            #expect(pruned.bodies == RetentionLedger.prunable.count)
            try await readsBack("pruned")
            #expect(try await ledger.dump() == dump)

            // An object read from Stripe's API has no event body: its row keeps the JSON, compressed.
            var fetched = EventFactory.object("subscription")
            fetched["id"] = "sub_r3"
            fetched["status"] = "canceled"
            fetched["metadata"] = ["note": String(repeating: "fetched from the API ", count: 20)]
            let json = try JSONSerialization.data(withJSONObject: fetched, options: [.sortedKeys])
            let snapshot = try LedgerSnapshot.decode(
                kind: .subscription, deletion: false, eventType: nil, eventID: "fetch:req_kept_once", eventCreated: 30_000,
                objectJSON: Array(json)[...])
            _ = try await reconciliation.reconcile([snapshot], account: "", livemode: false, dryRun: false, trackSeen: false, run: 1)
            let stored = try #require(try await ledger.rows("SELECT length(raw) AS n FROM subscription WHERE id = 'sub_r3'").first?.int("n"))
            #expect(stored > 0 && stored < Int64(json.count), "the fetched JSON is kept in the row, compressed: \(stored) of \(json.count) bytes")
            #expect(try await ledger.value("subscription", "sub_r3", "raw") == String(decoding: json, as: UTF8.self))
        }
    }

    @Test("A redelivery of a pruned event is still a duplicate, by the webhook's group commit and by the inbox", arguments: StoreBackend.allCases)
    func dedupeOfPruned(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(RetentionLedger.bodies)
            _ = try await ledger.store.retention.pruneBodies(olderThan: RetentionLedger.cutoff, batchSize: 1000, dryRun: false, progress: { _ in })
            let dump = try await ledger.dump()
            let pruned = RetentionLedger.events.filter { RetentionLedger.prunable.contains($0.id) }.map(RetentionLedger.body)

            let ingested = try await ledger.applier.ingest(try pruned.map { ledger.applier.prepare(try EventFactory.delivery($0)) }, now: 0)
            #expect(ingested.outcomes == Array(repeating: .duplicate, count: pruned.count))
            #expect(try await ledger.inbox.insert(try pruned.map(EventFactory.delivery)) == Array(repeating: .duplicate, count: pruned.count))
            #expect(try await ledger.inbox.count() == RetentionLedger.events.count)
            #expect(try await ledger.dump() == dump, "the old snapshots did not come back")
        }
    }

    @Test("Replay after pruning rebuilds the identical ledger and subscription facts, and leaves pruned events applied", arguments: StoreBackend.allCases)
    func replayAfterPruning(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(RetentionLedger.bodies)
            let dump = try await ledger.dump()
            let facts = try await ledger.count("stripeSubscriptionFact")
            #expect(facts == 8, "one fact per subscription snapshot")
            _ = try await ledger.store.retention.pruneBodies(olderThan: RetentionLedger.cutoff, batchSize: 1000, dryRun: false, progress: { _ in })

            let pass = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(pass.processed == RetentionLedger.events.count - RetentionLedger.prunable.count)
            #expect(pass.failed == 0 && pass.dead == 0)
            #expect(try await ledger.dump() == dump)
            #expect(try await ledger.count("stripeSubscriptionFact") == facts)
            let statuses = try await ledger.inbox.list(.init()).map(\.status)
            #expect(statuses == Array(repeating: .applied, count: RetentionLedger.events.count))
        }
    }

    @Test("A dry run counts what a run prunes and changes nothing", arguments: StoreBackend.allCases)
    func dryRun(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(RetentionLedger.bodies)
            let dump = try await ledger.dump()
            let retention = ledger.store.retention
            let counted = try await retention.pruneBodies(olderThan: RetentionLedger.cutoff, batchSize: 2, dryRun: true, progress: { _ in })
            #expect(counted.bodies == RetentionLedger.prunable.count)
            #expect(try await RetentionLedger.bodiesKept(ledger).values.allSatisfy { $0 })
            #expect(try await retention.eventCounts()["stripe"] == InboxEventCount(events: 10, bodies: 10))
            #expect(try await ledger.dump() == dump)
            let pruned = try await retention.pruneBodies(olderThan: RetentionLedger.cutoff, batchSize: 2, dryRun: false, progress: { _ in })
            #expect(pruned == counted)
        }
    }
}

@Suite("SQLite gives pruned bodies' space back to the file system")
struct SQLiteCompactionSpaceTests {
    /// A ledger file with `count` superseded snapshots of one subscription, 16 KB of random
    /// metadata each, old enough to prune.
    static func withFilledLedger(_ body: (SQLiteDatabase, LedgerUnderTest) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-compact-\(UUID().uuidString).sqlite3").path
        let database = try SQLiteDatabase.open(path: path)
        defer {
            try? database.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        try await body(database, LedgerUnderTest(sqlite: database, configuration: .init(firstRetryDelay: .zero)))
    }

    static func fill(_ ledger: LedgerUnderTest, count: Int = 200) async throws {
        let bodies = (0..<count).map { index in
            var object = EventFactory.object("subscription")
            object["id"] = "sub_space"
            object["status"] = "active"
            object["metadata"] = ["note": (0..<450).map { _ in UUID().uuidString }.joined()]
            return EventFactory.event(id: "evt_space_\(index)", type: "customer.subscription.updated", created: 1_000 + Int64(index), object: object)
        }
        try await ledger.deliver(bodies)
    }

    static func autoVacuum(_ database: SQLiteDatabase) async throws -> Int {
        try await database.writer.read { db in try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") ?? -1 }
    }

    @Test("A new ledger is created with incremental auto-vacuum, and compaction makes its file smaller")
    func incremental() async throws {
        try await Self.withFilledLedger { database, ledger in
            #expect(try await Self.autoVacuum(database) == 2, "auto_vacuum=INCREMENTAL")
            try await Self.fill(ledger)
            let before = try await ledger.store.sizes().database
            let result = try await ledger.store.retention.pruneBodies(olderThan: 10_000, batchSize: 50, dryRun: false, progress: { _ in })
            #expect(result.bodies == 199)
            try await ledger.store.retention.reclaimSpace(full: false)
            let after = try await ledger.store.sizes().database
            #expect(after < before / 2, "\(before) → \(after) bytes")
            let path = try #require(database.path)
            let file = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)
            #expect(file.int64Value < before / 2, "the file itself shrank: \(file.int64Value) bytes")
        }
    }

    @Test("A ledger from before auto-vacuum does not shrink incrementally; --full's VACUUM shrinks it and turns incremental auto-vacuum on")
    func fullOnOlderLedger() async throws {
        try await Self.withFilledLedger { database, ledger in
            try await database.writer.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA auto_vacuum = NONE")
                try db.execute(sql: "VACUUM")
            }
            #expect(try await Self.autoVacuum(database) == 0)
            try await Self.fill(ledger)
            let before = try await ledger.store.sizes().database
            _ = try await ledger.store.retention.pruneBodies(olderThan: 10_000, batchSize: 1000, dryRun: false, progress: { _ in })
            try await ledger.store.retention.reclaimSpace(full: false)
            #expect(try await ledger.store.sizes().database == before, "free pages stay in the file")
            let dump = try await ledger.dump()
            try await ledger.store.retention.reclaimSpace(full: true)
            #expect(try await ledger.store.sizes().database < before / 2)
            #expect(try await Self.autoVacuum(database) == 2)
            #expect(try await ledger.dump() == dump)
        }
    }
}
