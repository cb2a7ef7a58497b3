import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import PostgresNIO
import Testing

@Suite("billingd copy: a SQLite ledger into PostgreSQL, and exports equal across backends")
struct PostgresCopyTests {
    /// A SQLite ledger with real events applied, exports' invoices, usage and reconcile runs.
    static func sourceLedger() async throws -> ExportLedger {
        let ledger = try ExportLedger()
        let customer = EventFactory.object("customer")
        let subscription = EventFactory.object("subscription")
        let invoice = EventFactory.object("invoice")
        let bodies = [
            EventFactory.event(id: "evt_copy_1", type: "customer.created", created: 1_767_225_600, object: customer),
            EventFactory.event(id: "evt_copy_2", type: "customer.subscription.created", created: 1_767_225_601, object: subscription),
            EventFactory.event(id: "evt_copy_3", type: "invoice.paid", created: 1_767_225_602, object: invoice),
            EventFactory.event(id: "evt_copy_4", type: "some.future_event", created: 1_767_225_603, object: ["id": "x_1", "object": "x"]),
        ]
        _ = try await SQLiteInbox(database: ledger.database).insert(bodies.map(EventFactory.delivery))
        try await SQLiteApplier(database: ledger.database, configuration: .init(firstRetryDelay: .zero)).drain()
        try ledger.insert([
            LedgerInvoice(id: "in_nodate", created: nil, lines: [LedgerLine(id: "il_1", amount: 1000, description: "=cmd|' /C calc'!A0")]),
            LedgerInvoice(id: "in_quote", customer: "cus_B", customerName: "Anne \"Q\", Ltd\nSecond line", currency: "JPY", created: 1_767_225_700),
            LedgerInvoice(id: "in_Tie", account: "acct_b", created: 1_767_225_800),
            LedgerInvoice(id: "in_tie", account: "acct_B", created: 1_767_225_800),
            LedgerInvoice(id: "in_tie", account: "acct_a", livemode: false, created: 1_767_225_800),
            LedgerInvoice(id: "in_deleted", created: 1_767_225_900, deleted: true),
        ])
        try ledger.insertCustomer("cus_B", email: "b@example.com", name: "B", appUser: "user_b")
        try ledger.link(user: "user_z", customer: "cus_A")
        try ledger.link(user: "user_a", customer: "cus_A")
        try ledger.generate(count: 40)
        let store = SQLiteLedgerStore(database: ledger.database)
        let meter = UsageMeter(id: "radars", kind: .counter, limit: "radars", stripeMeter: "radar_created")
        _ = try await store.usage.apply(
            [.record(UsageRecordInput(
                scope: .test, user: "user_a", meter: meter, quantity: 2, timestamp: 1_767_225_600, idempotencyKey: "u1",
                period: UsagePeriod(start: 1_767_225_600, end: 1_769_904_000), limit: .count(10)))], now: 1_767_225_600_000)
        try await store.reconcileRuns.acquire("reconcile", holder: "h", ttl: 60, now: 1000)
        let run = try await store.reconcileRuns.start(mode: "full", holder: "h", dryRun: false, now: 1000)
        try await store.reconcileRuns.finish(run, outcome: .completed, totals: .init(objects: 3), error: nil, report: Data("{\"ok\":true}".utf8), now: 1001)
        try await store.setMetaValue("local_secret", "whsec_local")
        _ = try await store.grants.create(
            GrantRequest(tier: "pro", expiresAt: 1_768_000_000, reason: "copied", createdBy: "console:ops", idempotencyKey: "g1", fingerprint: "f"),
            for: "user_a", in: .test, now: 1_767_225_600)
        // A refund request with its answer, and a consent: neither is derived from the inbox's ledger rules alone.
        let request = AppStoreFactory.notification(
            "CONSUMPTION_REQUEST", original: "7000", transaction: "7001", purchase: AppStoreFactory.t0, expires: AppStoreFactory.t0 + AppStoreFactory.day,
            signed: AppStoreFactory.t0)
        _ = try await SQLiteInbox(database: ledger.database).insert([try AppStoreFactory.delivery(request)])
        try await SQLiteApplier(database: ledger.database, configuration: .init(firstRetryDelay: .zero)).drain()
        try await store.appStoreConsumption.record(
            .sent(appleStatus: 202), environment: "Sandbox", notificationUUID: try AppStoreNotification(storedBody: request).notificationUUID, at: 1)
        _ = try await store.appStoreConsumption.setConsent(of: "user_a", consented: true, now: 1_767_225_600)
        return ledger
    }

    @Test("A ledger with events is copied table by table: every count matches, bodies and positions are kept, and a second copy onto it is refused")
    func roundTrip() async throws {
        let ledger = try await Self.sourceLedger()
        defer { ledger.remove() }
        try await PostgresTestDatabase.withStore { store in
            let report = try await PostgresLedgerCopy.copy(from: ledger.database, to: store, batchSize: 7)
            #expect(report.isVerified, "\(report.tables)")
            let counts = Dictionary(uniqueKeysWithValues: report.tables.map { ($0.table, $0.target) })
            let expected = try await ledger.database.writer.read { db in
                try ["inboxEvent", "inboxBody", "customer", "subscription", "invoice", "invoiceLine", "userLink", "usageRecord",
                     "usageTotal", "reconcileRun", "lease", "meta", "promotionalGrant", "appStoreConsumptionRequest",
                     "appStoreConsumptionConsent"].map { ($0.lowercased(), try Int.fetchOne(db, sql: "SELECT count(*) FROM \($0)")!) }
            }
            for (table, rows) in expected {
                #expect(rows > 0, "the source's \(table) has rows")
                #expect(counts[table] == rows, "\(table)")
            }
            // Bodies byte for byte, positions kept, and new positions drawn after the copied ones.
            let sqliteInbox = SQLiteInbox(database: ledger.database)
            for id in ["evt_copy_1", "evt_copy_3", "evt_copy_4"] {
                let body = try await store.inbox.body(eventID: id, account: nil, livemode: false)
                let original = try await sqliteInbox.body(eventID: id, account: nil, livemode: false)
                #expect(body != nil && body == original)
            }
            #expect(try await store.inbox.list(InboxFilter()).map(\.seq) == (try await sqliteInbox.list(InboxFilter()).map(\.seq)))
            #expect(try await store.inbox.countsByStatus() == (try await sqliteInbox.countsByStatus()))
            let fresh = EventFactory.event(id: "evt_after_copy", type: "customer.updated", created: 1_767_226_000, object: EventFactory.object("customer"))
            let outcome = try await store.inbox.insert([try EventFactory.delivery(fresh)])
            guard case .stored(let seq) = outcome.first else { Issue.record("not stored: \(outcome)"); return }
            #expect(seq > (try await sqliteInbox.list(InboxFilter(limit: 1000)).map(\.seq).max() ?? 0))
            #expect(try await store.metaValue("local_secret") == "whsec_local")
            #expect(try await store.reconcileRuns.latest(mode: "full").completed?.objects == 3)
            #expect(try await store.grants.grants(of: "user_a", in: .test) == (try await SQLiteLedgerStore(database: ledger.database).grants.grants(of: "user_a", in: .test)),
                "grants are copied")
            #expect(try await store.appStoreConsumption.requests(status: nil, limit: 10)
                == (try await SQLiteLedgerStore(database: ledger.database).appStoreConsumption.requests(status: nil, limit: 10)),
                "refund requests are copied with their answers")
            #expect(try await store.appStoreConsumption.consent(of: "user_a")?.consented == true, "consent is copied")

            let again = await #expect(throws: PostgresLedgerCopy.Failure.self) {
                try await PostgresLedgerCopy.copy(from: ledger.database, to: store)
            }
            guard case .targetNotEmpty(let tables) = again else { Issue.record("\(String(describing: again))"); return }
            #expect(tables.contains { $0.hasPrefix("inboxevent: ") })
            #expect(try await store.inbox.count() == expected.first { $0.0 == "inboxevent" }!.1 + 1)
        }
    }

    @Test("A ledger made by the Stripe and App Store lifecycles is copied row for row, and replaying the copied inbox on PostgreSQL rebuilds it identically")
    func replayComparison() async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        let deliveries = try Lifecycle.events().map(EventFactory.delivery) + AppStoreFactory.lifecycles.map(AppStoreFactory.delivery)
        _ = try await SQLiteInbox(database: ledger.database).insert(deliveries)
        let applied = try await SQLiteApplier(database: ledger.database, configuration: .init(firstRetryDelay: .zero)).drain()
        #expect(applied.failed + applied.dead == 0)
        let source = try await SQLiteMaintenance(database: ledger.database).dump()
        #expect(source.contains("subscription ") && source.contains("appStoreSubscription "), "the source holds a ledger of both stores")
        try await PostgresTestDatabase.withStore { store in
            _ = try await PostgresLedgerCopy.copy(from: ledger.database, to: store)
            let comparison = try await PostgresLedgerCopy.compare(ledger.database, with: store, replaying: .init(firstRetryDelay: .zero))
            #expect(comparison.firstDifference == nil)
            let replay = try #require(comparison.replay)
            #expect(replay.firstDifference == nil)
            #expect(replay.pass.processed == deliveries.count)
            #expect(comparison.isIdentical)
            #expect(try await store.maintenance.dump() == source)
            #expect(try await store.outbox.list(status: nil, limit: 10).isEmpty, "the replay announces nothing")
        }
    }

    @Test("Rows with no event behind them make the replay differ, named by table; the ledger is then copied back over the rebuilt one")
    func replayDiffersAndRestores() async throws {
        let ledger = try await Self.sourceLedger()
        defer { ledger.remove() }
        let source = try await SQLiteMaintenance(database: ledger.database).dump()
        try await PostgresTestDatabase.withStore { store in
            _ = try await PostgresLedgerCopy.copy(from: ledger.database, to: store)
            let comparison = try await PostgresLedgerCopy.compare(ledger.database, with: store, replaying: .init(firstRetryDelay: .zero))
            #expect(comparison.firstDifference == nil, "the copy itself holds every row")
            let replay = try #require(comparison.replay)
            // The customers inserted without events sort before every invoice row.
            #expect(replay.firstDifference == "customer")
            #expect(!comparison.isIdentical)
            #expect(try await store.maintenance.dump() == source, "the target is left as copied")

            // A row changed after the copy is found by the row comparison alone.
            try await store.client.query("UPDATE invoice SET total = total + 1 WHERE id = 'in_quote'", logger: PostgresTestDatabase.logger)
            let changed = try await PostgresLedgerCopy.compare(ledger.database, with: store, replaying: nil)
            #expect(changed.firstDifference == "invoice")
            #expect(changed.replay == nil)
        }
    }

    @Test("The same ledger exports byte-identical CSV and JSON Lines on SQLite and PostgreSQL, whole or in pages, with any filter")
    func exportsEqualAcrossBackends() async throws {
        let ledger = try await Self.sourceLedger()
        defer { ledger.remove() }
        let sqlite = SQLiteLedgerStore(database: ledger.database).invoiceExports
        try await PostgresTestDatabase.withStore { store in
            _ = try await PostgresLedgerCopy.copy(from: ledger.database, to: store)
            let postgres = store.invoiceExports
            let requests: [InvoiceExportRequest] = InvoiceExportRequest.Format.allCases.flatMap { format in
                InvoiceExportRequest.Layout.allCases.flatMap { layout in
                    [
                        InvoiceExportRequest(format: format, layout: layout, byteOrderMark: format == .csv),
                        InvoiceExportRequest(format: format, layout: layout, livemode: false),
                        InvoiceExportRequest(format: format, layout: layout, createdFrom: 1_767_225_700, createdBefore: 1_767_225_801),
                        InvoiceExportRequest(format: format, layout: layout, statuses: ["paid", "open"], currency: "JPY"),
                        InvoiceExportRequest(format: format, layout: layout, appUser: "user_a"),
                        InvoiceExportRequest(format: format, layout: layout, customer: "cus_B", account: ""),
                    ]
                }
            }
            for request in requests {
                let expected = try await sqlite.exportText(request)
                #expect(expected.1.invoices > 0 || request.appUser != nil, "\(request)")
                let whole = try await postgres.exportText(request)
                #expect(whole.0 == expected.0, "\(request)")
                #expect(whole.1 == expected.1)
                for pageSize in [1, 3, 1000] {
                    let paged = try await postgres.streamText(request, invoicesPerPage: pageSize)
                    #expect(paged.0 == expected.0, "\(request), pages of \(pageSize)")
                }
            }
        }
    }

    @Test("Reconcile's reads answer on PostgreSQL as on SQLite")
    func reconciliationReadsAgree() async throws {
        let ledger = try await Self.sourceLedger()
        defer { ledger.remove() }
        try ledger.insertCustomer("cus_b", account: "acct_1", livemode: false)
        try ledger.insertCustomer("cus_B", account: "acct_1", livemode: false)
        try ledger.insertCustomer("cus_a", account: "acct_1", livemode: false)
        try await ledger.database.writer.write { db in
            try db.execute(sql: "UPDATE customer SET needsRefetch = 1 WHERE id IN ('cus_b', 'cus_B')")
            try db.execute(sql: "UPDATE invoice SET needsRefetch = 1 WHERE id = 'in_tie'")
        }
        let sqlite = SQLiteLedgerReconciliation(database: ledger.database)
        try await PostgresTestDatabase.withStore { store in
            _ = try await PostgresLedgerCopy.copy(from: ledger.database, to: store)
            let postgres = store.reconciliation
            for (account, livemode) in [("", false), ("acct_1", false), ("", true), ("acct_B", true)] {
                #expect(try await postgres.customerIDs(account: account, livemode: livemode, after: nil, limit: 100)
                    == (try await sqlite.customerIDs(account: account, livemode: livemode, after: nil, limit: 100)))
                #expect(try await postgres.customerIDs(account: account, livemode: livemode, after: "cus_B", limit: 1)
                    == (try await sqlite.customerIDs(account: account, livemode: livemode, after: "cus_B", limit: 1)))
                let queue = try await postgres.refetchQueue(account: account, livemode: livemode, limit: 10).map { "\($0.kind) \($0.id)" }
                #expect(queue == (try await sqlite.refetchQueue(account: account, livemode: livemode, limit: 10).map { "\($0.kind) \($0.id)" }))
            }
            #expect(try await postgres.refetchQueue(account: "acct_1", livemode: false, limit: 10).map(\.id) == ["cus_B", "cus_b"])
            for customer in try await sqlite.customerIDs(account: "", livemode: false, after: nil, limit: 100) {
                #expect(try await postgres.attachedPaymentMethods(customer: customer, account: "", livemode: false)
                    == (try await sqlite.attachedPaymentMethods(customer: customer, account: "", livemode: false)))
                #expect(try await postgres.hasEntitlementSummary(customer: customer, account: "", livemode: false)
                    == (try await sqlite.hasEntitlementSummary(customer: customer, account: "", livemode: false)))
            }
        }
    }

    @Test("A PostgreSQL ledger's backup is pg_dump's job: backup throws an error that says so")
    func backupNamesPgDump() async throws {
        try await PostgresTestDatabase.withStore { store in
            let error = await #expect(throws: PostgresStoreError.self) { try await store.backup(to: "/tmp/never.sqlite3", overwrite: false) }
            #expect(error?.description.contains("pg_dump") == true)
            #expect(!FileManager.default.fileExists(atPath: "/tmp/never.sqlite3"))
        }
    }
}
