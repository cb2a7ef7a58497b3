import BillingCore
import BillingStore
import Foundation
import Synchronization
import Testing

/// Issue 31: an existing SQLite file and an existing PostgreSQL database open and migrate without
/// loss. The fixtures were written by main at 7da94e6 (Fixtures/ledgers/README.md).
@Suite("A ledger written by an older billingd opens, migrates and keeps its rows, on both backends")
struct LedgerFixtureMigrationTests {
    typealias F = AppStoreFactory

    /// Rows per table in both fixtures, as 7da94e6 wrote them.
    static let counts: [String: Int] = [
        "inboxEvent": 77, "inboxBody": 77, "customer": 2, "subscription": 2, "subscriptionItem": 2, "invoice": 6, "invoiceLine": 6,
        "paymentMethod": 2, "userLink": 2, "checkoutSession": 2, "entitlementSummary": 2, "appStoreSubscription": 6,
        "appStoreTransaction": 9, "appStoreOwner": 1, "appStoreAccountToken": 1, "usageRecord": 3, "usageTotal": 1,
        "outboxUserState": 3, "reconcileRun": 1, "meta": 2,
    ]

    @Test("Every table keeps its row count", arguments: StoreBackend.allCases)
    func rowCounts(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { (ledger: LedgerUnderTest) async throws in
            for (table, count) in Self.counts.sorted(by: { $0.key < $1.key }) {
                #expect(try await ledger.count(table) == count, "\(table)")
            }
            #expect(try await ledger.store.metaValue("fixture_made_by") == LedgerFixtures.madeBy)
        }
    }

    @Test("Stripe's customers, subscriptions, invoices, payment methods and user links keep their values", arguments: StoreBackend.allCases)
    func stripeValues(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { ledger in
            for n in 0..<2 {
                let subscription = try #require(try await ledger.row("subscription", id: "sub_L\(n)"))
                #expect(subscription["status"] == "canceled")
                #expect(subscription.bool("cancelAtPeriodEnd") == true)
                #expect(subscription["customer"] == "cus_L\(n)")
                let invoice = try #require(try await ledger.row("invoice", id: "in_L\(n)_2"))
                #expect(invoice["status"] == "paid" && invoice.int("amountPaid") == 1944 && invoice["currency"] == "usd")
                let method = try #require(try await ledger.row("paymentMethod", id: "pm_L\(n)"))
                #expect(method["customer"] == nil && method.int("expYear") == 2031 && method["last4"] == "4242")
                let customer = try #require(try await ledger.row("customer", id: "cus_L\(n)"))
                #expect(customer["email"] == "c\(n)@example.com" && customer.bool("needsRefetch") == true)
                let links = try await ledger.rows("SELECT customer FROM userLink WHERE appUserID = 'user_\(n)'")
                #expect(links.map { $0["customer"] } == ["cus_L\(n)"])
            }
            let body = try #require(try await ledger.inbox.body(eventID: "evt_L0_1", account: nil, livemode: false))
            let event = try EventEnvelope(decoding: body)
            #expect(event.type == "customer.created" && event.objectID == "cus_L0", "a stored body still decodes")
        }
    }

    @Test("The App Store's subscriptions, transactions and owners keep their values", arguments: StoreBackend.allCases)
    func appStoreValues(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { ledger in
            let renewed = try #require(try await ledger.store.appStore.subscription(environment: "Sandbox", originalTransactionID: "1000"))
            #expect(renewed.0.transactionID == "1002")
            #expect(renewed.0.expiresDate == F.t0 + 92 * F.day)
            let tied = try #require(try await ledger.store.appStore.subscription(environment: "Sandbox", originalTransactionID: "700"))
            #expect(tied.owner == "user_7")
            #expect(try await ledger.store.metaValue("appstore_account_token_namespace") != nil, "the token namespace survived")
            let revoked = try await ledger.rows("SELECT status, revoked FROM appStoreSubscription WHERE originalTransactionID = '4000'")
            #expect(revoked.map { "\($0["status"] ?? "") \($0.bool("revoked") ?? false)" } == ["revoked true"])
            let refunded = try await ledger.rows("SELECT revoked FROM appStoreTransaction WHERE transactionID = '1000'")
            #expect(refunded.map { $0.bool("revoked") } == [true])
        }
    }

    @Test("Usage, the outbox and reconcile's runs keep their state", arguments: StoreBackend.allCases)
    func bookkeeping(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { ledger in
            let used = try await ledger.store.usage.states(
                scope: .test, user: "user_0", meters: [(LedgerFixtures.radars, LedgerFixtures.january, .count(10))])
            #expect(used.map(\.used) == [6])
            // The outbox kept each user's last announced view (no event was queued: no endpoint row).
            #expect(try await ledger.count("outboxUserState") == 3)
            let run = try #require(try await ledger.store.reconcileRuns.latest(mode: "full").completed)
            #expect(run.holder == "fixture" && run.objects == 3 && run.drift == 1)
        }
    }

    @Test("A known user's view is what the older billingd answered, and new deliveries still apply", arguments: StoreBackend.allCases)
    func userViewAndNewDeliveries(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { ledger in
            let billing = try await ledger.users.billing(of: "user_0", in: .test)
            let view = String(describing: billing)
            #expect(view.contains("cus_L0") && view.contains("sub_L0") && !view.contains("cus_L1"), "\(view)")
            let page = try #require(try await ledger.users.invoices(of: "user_0", in: .test, limit: 10, startingAfter: nil))
            #expect(Set(page.invoices.map(\.id)) == ["in_L0_1", "in_L0_2", "in_L0_3"])

            let before = try await ledger.inbox.list(.init(limit: 1000)).map(\.seq).max() ?? 0
            var customer = EventFactory.object("customer")
            customer["id"] = "cus_after_migration"
            let pass = try await ledger.deliver([
                EventFactory.event(id: "evt_after_migration", type: "customer.created", created: 1_800_000_000, object: customer)
            ])
            #expect(pass.applied == 1)
            #expect(try await ledger.inbox.list(.init(eventID: "evt_after_migration")).map(\.seq).first ?? 0 > before)
            #expect(try await ledger.value("customer", "cus_after_migration", "email") == "ada@example.com")
        }
    }

    @Test("Bodies stored before compression read back as they were; compact compresses them in resumable batches, each reading back the same, and replay gives the same ledger", arguments: StoreBackend.allCases)
    func bodiesCompressedInPlace(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { ledger in
            let events = try await ledger.rows("SELECT eventID, account, livemode FROM inboxEvent ORDER BY seq")
            #expect(events.count == Self.counts["inboxEvent"])
            func bodies() async throws -> [[UInt8]?] {
                var bodies: [[UInt8]?] = []
                for event in events {
                    let account = event["account"].flatMap { $0.isEmpty ? nil : $0 }
                    bodies.append(try await ledger.inbox.body(eventID: event["eventID"] ?? "", account: account, livemode: event.bool("livemode") ?? false))
                }
                return bodies
            }
            func stored() async throws -> (verbatim: Int64, bytes: Int64) {
                let row = try #require(try await ledger.rows(
                    "SELECT sum(CASE WHEN encoding = 0 THEN 1 ELSE 0 END) AS verbatim, sum(length(body)) AS bytes FROM inboxBody").first)
                return (try #require(row.int("verbatim")), try #require(row.int("bytes")))
            }
            let original = try await bodies()
            #expect(original.allSatisfy { ($0?.first ?? 0) == UInt8(ascii: "{") }, "the older billingd's bodies, verbatim JSON")
            let before = try await stored()
            #expect(before.verbatim == Int64(Self.counts["inboxBody"] ?? 0), "every older row is verbatim")
            let dump = try await ledger.dump()
            let retention = ledger.store.retention

            let dry = try await retention.compressBodies(batchSize: 1000, dryRun: true, progress: { _ in })
            #expect(dry.bodies == Self.counts["inboxBody"] && dry.compressed == 0)
            #expect(try await stored() == before, "a dry run changes nothing")

            // Batches of 10: a run stopped after any of them leaves rows of both kinds, all readable.
            let totals = Mutex<[Int]>([])
            let result = try await retention.compressBodies(batchSize: 10, dryRun: false) { total in totals.withLock { $0.append(total.bodies) } }
            #expect(totals.withLock { $0 } == Array(stride(from: 10, to: 77, by: 10)) + [77])
            #expect(result.bodies == Self.counts["inboxBody"])
            #expect(result.compressed > result.bodies / 2, "\(result)")
            let after = try await stored()
            #expect(after.verbatim == Int64(result.bodies - result.compressed))
            #expect(after.bytes == before.bytes - (result.bytesBefore - result.bytesAfter))
            #expect(after.bytes < before.bytes * 3 / 4, "\(before.bytes) → \(after.bytes) bytes")
            #expect(try await bodies() == original, "every body reads back byte for byte")

            let again = try await retention.compressBodies(batchSize: 1000, dryRun: false, progress: { _ in })
            #expect(again.compressed == 0 && again.bodies == result.bodies - result.compressed, "only the bodies that stayed verbatim are read again")

            _ = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(try await ledger.dump() == dump, "replay from the compressed bodies rebuilds the same ledger")
        }
    }

    @Test("Objects' raw JSON stored verbatim beside its event's body reads back as it was; compact keeps it once (in the body, else compressed), in resumable batches, and replay gives the same ledger", arguments: StoreBackend.allCases)
    func rawJSONKeptOnceInPlace(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { ledger in
            let tables = [
                ("customer", "id", "raw"), ("subscription", "id", "raw"), ("invoice", "id", "raw"), ("checkoutSession", "id", "raw"),
                ("entitlementSummary", "id", "raw"), ("appStoreTransaction", "transactionID", "raw"),
                ("appStoreSubscription", "originalTransactionID", "renewalRaw"),
            ]
            // Every object's JSON as the test support reads it (decoded when compressed), and the bytes stored.
            func held() async throws -> (json: [String], bytes: Int64) {
                var json: [String] = []
                var bytes: Int64 = 0
                for (table, key, column) in tables {
                    let body = table.hasPrefix("appStore") ? "" : ", \(StoredJSON.eventBodyColumn(of: "r"))"
                    let sql = "SELECT r.\(key) AS k, r.\(column)\(body), length(r.\(column)) AS n FROM \(table) r WHERE r.\(column) IS NOT NULL ORDER BY r.\(key)"
                    for row in try await ledger.rows(sql) {
                        json.append("\(table) \(row["k"] ?? "") \(row[column] ?? "")")
                        bytes += row.int("n") ?? 0
                    }
                }
                return (json, bytes)
            }
            let before = try await held()
            let objects = before.json.count
            #expect(objects >= 23, "the fixtures' objects with raw JSON: \(objects)")
            #expect(before.json.allSatisfy { $0.split(separator: " ", maxSplits: 2).last?.first == "{" }, "the older billingd's JSON, verbatim")
            // The Stripe objects whose row names an event the inbox holds a body of: that body's
            // data.object is the JSON the older billingd copied into the row.
            var inBodies = 0
            for (table, _, _) in tables where !table.hasPrefix("appStore") {
                inBodies += Int(try #require(try await ledger.rows("""
                    SELECT count(*) AS n FROM \(table) r WHERE EXISTS (SELECT 1 FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
                        WHERE e.eventID = r.vEventID AND e.account = r.account AND e.livemode = r.livemode)
                    """).first?.int("n")))
            }
            #expect(inBodies >= objects / 2, "rows an event wrote: \(inBodies) of \(objects)")
            let dump = try await ledger.dump()
            let retention = ledger.store.retention

            let dry = try await retention.compressLedgerJSON(batchSize: 1000, dryRun: true, progress: { _ in })
            #expect(dry.inEventBodies == inBodies && dry.objects == objects - inBodies && dry.compressed == 0 && !dry.alreadyDone, "\(dry)")
            #expect(try await held().bytes == before.bytes, "a dry run changes nothing")

            // Batches of 2: a run stopped after any of them leaves rows of every kind, all readable.
            let batches = Mutex(0)
            let result = try await retention.compressLedgerJSON(batchSize: 2, dryRun: false) { _ in batches.withLock { $0 += 1 } }
            #expect(batches.withLock { $0 } >= objects / 2, "progress after each batch")
            #expect(result.inEventBodies == inBodies && result.objects == objects - inBodies && result.compressed > 0, "\(result)")
            var kept = 0
            for (table, _, column) in tables {
                kept += Int(try #require(try await ledger.rows("SELECT count(*) AS n FROM \(table) WHERE length(\(column)) = 0").first?.int("n")))
            }
            #expect(kept == inBodies, "the rows keep no copy of what their event's body holds")
            let after = try await held()
            #expect(after.json == before.json, "every object's JSON reads back the same")
            #expect(after.bytes == before.bytes - (result.bytesBefore - result.bytesAfter), "\(before.bytes) → \(after.bytes)")
            #expect(after.bytes < before.bytes * 3 / 4, "\(before.bytes) → \(after.bytes) bytes")
            #expect(try await ledger.dump() == dump, "the ledger's state is the same")
            let view = try #require(try await ledger.maintenance.inspect(id: "sub_L0"))
            let raw = try #require((view["object"] as? [String: any Sendable])?["raw"] as? LedgerJSON)
            #expect((raw.value as? [String: Any])?["id"] as? String == "sub_L0", "inspect shows the JSON")

            let again = try await retention.compressLedgerJSON(batchSize: 1000, dryRun: false, progress: { _ in })
            #expect(again.alreadyDone && again.objects == 0, "a complete run is not repeated: \(again)")

            _ = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(try await ledger.dump() == dump, "replay rebuilds the same ledger")
            #expect(try await held().json == before.json)
        }
    }

    @Test("The migration gives the subscriptions the facts replay would give them", arguments: StoreBackend.allCases)
    func subscriptionFactsBackfilled(_ backend: StoreBackend) async throws {
        try await LedgerFixtures.withFixtureLedger(backend) { ledger in
            let migrated = try await MetricsFacts(ledger.store.metrics).stripe
            #expect(migrated.map(\.id) == ["sub_L0", "sub_L1"])
            #expect(migrated.allSatisfy { $0.snapshots.contains { $0.status == .canceled } }, "\(migrated)")
            _ = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(try await MetricsFacts(ledger.store.metrics).stripe == migrated)
        }
    }
}
