import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import Testing

/// A ledger of the version before the repair log (SQLite `v16-timeline-repairs`, PostgreSQL
/// `v14-timeline-repairs`) migrates without loss and gains the two tables, filled from what it holds.
@Suite("A ledger migrated to the repair log keeps its rows and gains the log and the payment-method links, on both backends")
struct TimelineRepairMigrationTests {
    /// After every event of ``Lifecycle/customerLifecycle(_:)``.
    static let t0: Int64 = 1_900_000_000

    /// Runs `prepare` on a ledger of the current schema, takes the repair migration back out (its
    /// tables and its record, as a ledger of the previous version lacks them), opens the ledger
    /// again, which migrates it, and runs `body` on it.
    func withLedgerBeforeRepairs(
        _ backend: StoreBackend, prepare: (LedgerUnderTest) async throws -> Void, then body: (LedgerUnderTest) async throws -> Void
    ) async throws {
        let configuration = ApplierConfiguration(firstRetryDelay: .zero)
        let drop = ["DROP TABLE reconcileRepair", "DROP TABLE paymentMethodCustomer"]
        switch backend {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-repairs-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("ledger.sqlite3").path
            let before = try SQLiteDatabase.open(path: path)
            let ledger = LedgerUnderTest(sqlite: before, configuration: configuration)
            try await prepare(ledger)
            for statement in drop + ["DELETE FROM grdb_migrations WHERE identifier = 'v16-timeline-repairs'"] {
                try await ledger.execute(statement)
            }
            try before.close()
            let after = try SQLiteDatabase.open(path: path)
            defer { try? after.close() }
            try await body(LedgerUnderTest(sqlite: after, configuration: configuration))
        case .postgres:
            try await PostgresTestDatabase.withFreshDatabase { database in
                let before = try await PostgresLedgerStore.open(database, maximumConnections: 4, logger: PostgresTestDatabase.logger)
                do {
                    let ledger = LedgerUnderTest(postgres: before, configuration: configuration)
                    try await prepare(ledger)
                    for statement in drop + ["DELETE FROM schemaMigration WHERE version = 'v14-timeline-repairs'"] {
                        try await ledger.execute(statement)
                    }
                } catch {
                    await before.close()
                    throw error
                }
                await before.close()
                let after = try await PostgresLedgerStore.open(database, maximumConnections: 4, logger: PostgresTestDatabase.logger)
                do {
                    try await body(LedgerUnderTest(postgres: after, configuration: configuration))
                } catch {
                    await after.close()
                    throw error
                }
                await after.close()
            }
        }
    }

    @Test("Every ledger row is kept; attached payment methods get their link, detached ones none; fetched subscriptions show as repairs of no recorded run", arguments: StoreBackend.allCases)
    func migrates(_ backend: StoreBackend) async throws {
        var dump = ""
        try await withLedgerBeforeRepairs(backend) { ledger in
            try await ledger.deliver(Lifecycle.customerLifecycle(0).map(\.body))
            var method = EventFactory.object("payment_method")
            method["id"] = "pm_A0"
            method["customer"] = "cus_L0"
            try await ledger.deliver([EventFactory.event(id: "evt_A0", type: "payment_method.attached", created: Self.t0, object: method)])
            // What the timeline showed as a repair before the log: a subscription fetched from Stripe's API.
            var subscription = EventFactory.object("subscription")
            subscription["id"] = "sub_L0"
            subscription["customer"] = "cus_L0"
            subscription["status"] = "canceled"
            let json = Array(try JSONSerialization.data(withJSONObject: subscription))
            let fetched = try LedgerSnapshot.decode(
                kind: .subscription, deletion: false, eventType: nil, eventID: "fetch:req_old", eventCreated: Self.t0 + 10, objectJSON: json[...])
            _ = try await ledger.store.reconciliation.applyFetched(fetched, account: "", livemode: false)
            dump = try await ledger.dump()
        } then: { ledger in
            #expect(try await ledger.dump() == dump, "every ledger row and subscription fact kept")
            #expect(try await ledger.count("inboxEvent") == Lifecycle.customerLifecycle(0).count + 1)
            let links = try await ledger.rows("SELECT paymentMethod, customer, firstSeen FROM paymentMethodCustomer ORDER BY paymentMethod")
            #expect(links.map { "\($0["paymentmethod"] ?? "") \($0["customer"] ?? "") \($0["firstseen"] ?? "")" } == ["pm_A0 cus_L0 \(Self.t0)"],
                "pm_L0 was detached before the migration: no link")
            let repairs = try await ledger.rows("SELECT run, kind, objectID, customer FROM reconcileRepair")
            #expect(repairs.map { "\($0["run"] ?? "none") \($0["kind"] ?? "") \($0["objectid"] ?? "") \($0["customer"] ?? "")" } == ["none subscription sub_L0 cus_L0"])

            let items = try await ledger.store.timeline.timeline(of: "user_0", in: .test, limit: 500, after: nil, now: Self.t0 + 100).items
            let repair = try #require(items.first { $0.kind == .reconcileRepair })
            #expect(repair.ref == "sub_L0" && repair.at == Self.t0 + 10 && repair.source == "reconcile")
            #expect(repair.summary == "Subscription sub_L0 repaired from Stripe's API (now canceled) (a reconcile run before repairs were logged)")
            #expect(items.contains { $0.kind == .stripeEvent && $0.ref == "evt_A0" }, "an attached payment method's events show")
            #expect(!items.contains { $0.summary.hasSuffix(" on pm_L0") }, "a payment method detached before the migration names no customer")

            // New repairs are logged on the migrated ledger.
            var customer = EventFactory.object("customer")
            customer["id"] = "cus_L0"
            customer["metadata"] = ["app_user_id": "user_0"]
            let page = try await ledger.store.reconciliation.reconcile(
                [try LedgerSnapshot.decode(
                    kind: .customer, deletion: false, eventType: nil, eventID: "fetch:req_new", eventCreated: Self.t0 + 20,
                    objectJSON: Array(try JSONSerialization.data(withJSONObject: customer))[...])],
                account: "", livemode: false, dryRun: false, trackSeen: false, run: 5)
            #expect(page.drifts.map(\.outcome) == [.repaired])
            let newest = try await ledger.store.timeline.timeline(of: "user_0", in: .test, limit: 1, after: nil, now: Self.t0 + 100).items
            #expect(newest.map(\.ref) == ["cus_L0"] && newest.first?.summary.hasSuffix("(reconcile run 5)") == true)
        }
    }
}
