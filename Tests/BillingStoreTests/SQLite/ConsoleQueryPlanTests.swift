import Foundation
import GRDB
import Synchronization
import Testing

@testable import BillingStore

/// The console's reads find their rows through indexes: on a ledger of a million subscriptions a
/// scan of the customers, the App Store owners or the inbox costs far beyond the page's 100 ms
/// (docs/console.md, Speed).
@Suite("The console's SQLite reads use indexes, never a scan of a large table")
struct ConsoleQueryPlanTests {
    /// The lines of `EXPLAIN QUERY PLAN` of `sql`, its parameters bound to NULL (the plan does not
    /// depend on their values).
    func plan(_ sql: String, in database: SQLiteDatabase) async throws -> [String] {
        let arguments = StatementArguments([String?](repeating: nil, count: sql.filter { $0 == "?" }.count))
        return try await database.writer.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
        }
    }

    @Test("The search by e-mail, id, subscription and original transaction reads customers, subscriptions and owners by index", arguments: [false, true])
    func search(livemode: Bool) async throws {
        let database = try SQLiteDatabase.inMemory()
        defer { try? database.close() }
        let lines = try await plan(UserQueries.matchingUsersSQL(appStore: true, livemode: livemode, limit: 50), in: database)
        #expect(lines.contains { $0.contains("customer USING INDEX customer_email") }, "\(lines)")
        #expect(lines.contains { $0.contains("appStoreOwner USING") && $0.contains("appStoreOwner_original") } || livemode, "\(lines)")
        for table in ["customer", "subscription", "appStoreOwner", "userLink"] {
            #expect(!lines.contains { $0.hasPrefix("SCAN \(table)") }, "\(table) is scanned: \(lines)")
        }
    }

    @Test("The events page's deliveries not applied, their counts and the oldest waiting are read through the partial work index, in any order of statuses asked")
    func inboxNotApplied() async throws {
        let database = try SQLiteDatabase.inMemory()
        defer { try? database.close() }
        let inbox = SQLiteInbox(database: database)
        // The plan of the statement list() runs, through SQLite's own trace of it.
        let statements = Mutex<[String]>([])
        try await database.writer.write { db in
            db.trace(options: .statement) { event in statements.withLock { $0.append("\(event)") } }
        }
        _ = try await inbox.list(InboxFilter(statuses: [.failed, .dead, .pending], limit: 500))
        _ = try await inbox.depth()
        let read = statements.withLock { $0 }.filter { $0.contains("FROM inboxEvent") }
        #expect(read.count == 3, "the list, the depth's counts and its oldest waiting event: \(read)")
        for statement in read {
            let lines = try await plan(statement, in: database)
            #expect(lines.contains { $0.contains("inboxEvent_work") }, "\(statement): \(lines)")
            #expect(!lines.contains { $0.hasPrefix("SCAN inboxEvent") }, "\(statement): \(lines)")
        }
    }

    @Test("The applier's read of due events takes each waiting status from the partial work index in inbox order, never a walk of the applied inbox")
    func applierDueEvents() async throws {
        let database = try SQLiteDatabase.inMemory()
        defer { try? database.close() }
        let statements = Mutex<[String]>([])
        try await database.writer.write { db in
            db.trace(options: .statement) { event in statements.withLock { $0.append("\(event)") } }
        }
        _ = try await SQLiteInbox(database: database).due(now: 0, after: 0, limit: 100)
        let read = try #require(statements.withLock { $0 }.first { $0.contains("FROM inboxEvent") })
        let lines = try await database.writer.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + read, arguments: [0, 0, 100]).map { $0["detail"] as String }
        }
        // Once for pending, once for failed: each a range of (status, seq) read in seq order.
        #expect(lines.filter { $0.contains("inboxEvent USING") && $0.contains("INDEX inboxEvent_work (status=? AND seq>?)") }.count == 2, "\(lines)")
        #expect(!lines.contains { $0.contains("rowid>?") }, "walks the inbox from a position: \(lines)")
        #expect(!lines.contains { $0.hasPrefix("SCAN inboxEvent") || $0.hasPrefix("SCAN e") }, "\(lines)")
        #expect(!lines.contains { $0.contains("TEMP B-TREE") }, "sorts what it read: \(lines)")
    }

    @Test("The customer page's timeline reads reconcile's repairs and payment methods' customers by customer through their indexes")
    func timelineRepairsAndPaymentMethods() async throws {
        let database = try SQLiteDatabase.inMemory()
        defer { try? database.close() }
        let repairs = try await plan(TimelineRows.repairsSQL, in: database)
        #expect(repairs.contains { $0.contains("reconcileRepair USING INDEX reconcileRepair_customer") && $0.contains("customer=?") }, "\(repairs)")
        let events = try await plan(TimelineRows.stripeEventsSQL, in: database)
        #expect(events.contains { $0.contains("paymentMethodCustomer USING") && $0.contains("paymentMethodCustomer_customer") }, "\(events)")
        #expect(events.contains { $0.contains("inboxEvent USING INDEX inboxEvent_objectCreated") }, "\(events)")
        // The user's customers (the `customers` CTE, a handful of rows) are scanned; tables never.
        for table in ["reconcileRepair", "paymentMethodCustomer", "inboxEvent", "customer", "subscription", "invoice", "userLink"] {
            #expect(!(repairs + events).contains { $0 == "SCAN \(table)" || $0.hasPrefix("SCAN \(table) ") }, "\(table) is scanned: \(repairs + events)")
        }
    }

    @Test("The overview's movement and churn find the subscriptions that changed in a range from two ranges of the span indexes alone, and their spans by key")
    func metricsChangedSpans() async throws {
        let database = try SQLiteDatabase.inMemory()
        defer { try? database.close() }
        let changed = try await plan(MetricsIndexRows.changedSpansSQL, in: database)
        #expect(changed.contains { $0.contains("COVERING INDEX metricsIndexSpan_start") && $0.contains("spanStart>?") }, "\(changed)")
        #expect(changed.contains { $0.contains("COVERING INDEX metricsIndexSpan_end") && $0.contains("spanEnd>?") }, "\(changed)")
        #expect(changed.contains { $0.contains("metricsIndexSpan USING PRIMARY KEY") && $0.contains("subscription=?") }, "\(changed)")
        let boundary = try await plan(MetricsIndexRows.boundarySpansSQL, in: database)
        #expect(boundary.contains { $0.contains("metricsIndexSpan_start") && $0.contains("spanStart>?") }, "\(boundary)")
        #expect(boundary.contains { $0.contains("metricsIndexSpan_end") && $0.contains("spanEnd>?") }, "\(boundary)")
        for lines in [changed, boundary] {
            #expect(!lines.contains { $0.hasPrefix("SCAN") }, "\(lines)")
            // A search on the group alone reads every span of a store.
            #expect(!lines.contains { $0.hasSuffix("(store=? AND account=? AND livemode=?)") }, "\(lines)")
        }
    }

    @Test("A ledger's metrics index keeps its spans through the migration that clusters them by subscription")
    func spansKeptThroughClustering() async throws {
        let queue = try DatabaseQueue(configuration: Configuration())
        try SQLiteMigrations.migrator.migrate(queue, upTo: "v15-timeline-checkout")
        try await queue.write { db in
            try db.execute(sql: """
                INSERT INTO metricsIndexSpan (store, account, livemode, subscription, spanStart, spanEnd, kind, plan, currency, monthly)
                VALUES ('stripe', 'acct_1', 1, 'sub_b', 100, 200, 'paying', 'pro', 'usd', 2900),
                       ('stripe', 'acct_1', 1, 'sub_a', 50, NULL, 'trial', 'pro', '', 0),
                       ('app_store', 'Sandbox', 0, '2000000001', 10, 40, 'paying', 'pro', 'eur', 2700)
                """)
        }
        try SQLiteMigrations.migrator.migrate(queue)
        try await queue.read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT subscription, spanStart, spanEnd, kind, monthly FROM metricsIndexSpan ORDER BY subscription")
            #expect(rows.map { $0["subscription"] as String } == ["2000000001", "sub_a", "sub_b"])
            #expect(rows.map { $0["spanEnd"] as Int64? } == [40, nil, 200])
            #expect(rows.map { $0["monthly"] as Int64 } == [2700, 0, 2900])
            let sql = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'metricsIndexSpan'") ?? ""
            #expect(sql.contains("WITHOUT ROWID"), "\(sql)")
        }
    }
}
