import BillingCore
import GRDB

/// The SQLite ``MetricsFactStore``: runs ``MetricsFactReads``'s statements, each read in one
/// snapshot of the database.
public struct SQLiteMetricsFacts: MetricsFactStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    public func stripeSubscriptions(scope: ServiceScope) async throws -> [StripeSubscriptionFacts] {
        try await database.writer.read { db in
            let facts = try Self.rows(MetricsFactReads.subscriptionFactsSQL, [.text(scope.account), .boolean(scope.livemode)], db: db)
                .map(MetricsFactReads.SubscriptionFactRow.init)
            let invoices = try Self.rows(MetricsFactReads.paidInvoicesSQL, MetricsFactReads.paidInvoicesArguments(scope: scope), db: db)
                .compactMap { row -> (subscription: String, paidAt: Int64, refunded: Bool)? in
                    guard let subscription = row[0].text, let paidAt = row[1].integer else { return nil }
                    return (subscription, paidAt, row[2].flag)
                }
            return MetricsFactReads.stripeSubscriptions(facts: facts, paidInvoices: invoices)
        }
    }

    public func appStoreSubscriptions(environments: [String]) async throws -> [AppStoreSubscriptionFacts] {
        try await database.writer.read { db in
            let transactions = try Self.rows(
                MetricsFactReads.appStoreTransactionsSQL(environments: environments.count),
                MetricsFactReads.appStoreTransactionsArguments(environments: environments), db: db)
            let grace = try Self.rows(
                MetricsFactReads.gracePeriodsSQL(environments: environments.count), MetricsFactReads.environmentValues(environments), db: db)
            return MetricsFactReads.appStoreSubscriptions(transactions: transactions, gracePeriods: grace)
        }
    }

    public func revenueEntries(scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64) async throws -> [RevenueEntry] {
        try await database.writer.read { db in
            var entries: [RevenueEntry] = []
            try Self.forEachEntry(scope: scope, appStoreEnvironments: appStoreEnvironments, from: from, to: to, db: db) { entries.append($0) }
            return entries
        }
    }

    /// Streams the payments and refunds into the buckets through a cursor: memory stays flat
    /// whatever the range holds.
    public func revenue(scope: ServiceScope, appStoreEnvironments: [String], into tally: RevenueTally) async throws -> RevenueTally {
        guard let from = tally.buckets.first?.start, let to = tally.buckets.last?.end else { return tally }
        return try await database.writer.read { db in
            var tally = tally
            try Self.forEachEntry(scope: scope, appStoreEnvironments: appStoreEnvironments, from: from, to: to, db: db) { tally.add($0) }
            return tally
        }
    }

    /// Hands each payment and refund in `[from, to)` to `body`, one row at a time.
    private static func forEachEntry(
        scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64, db: Database, _ body: (RevenueEntry) -> Void
    ) throws {
        try forEachRow(
            MetricsFactReads.stripePaymentsSQL,
            MetricsFactReads.stripeRevenueArguments(status: InvoiceStatus.paid.rawValue, scope: scope, from: from, to: to), db: db
        ) { row in
            if let entry = MetricsFactReads.stripeEntry(row, kind: .payment) { body(entry) }
        }
        try forEachRow(
            MetricsFactReads.stripeRefundsSQL,
            MetricsFactReads.stripeRevenueArguments(status: Refund.succeeded, scope: scope, from: from, to: to), db: db
        ) { row in
            if let entry = MetricsFactReads.stripeEntry(row, kind: .refund) { body(entry) }
        }
        try forEachRow(
            MetricsFactReads.appStoreRevenueSQL(environments: appStoreEnvironments.count),
            MetricsFactReads.appStoreRevenueArguments(environments: appStoreEnvironments, from: from, to: to), db: db
        ) { row in
            for entry in MetricsFactReads.appStoreEntries(row, from: from, to: to) { body(entry) }
        }
    }

    /// Each row of a statement, as ledger values, read through a cursor.
    private static func forEachRow(_ sql: String, _ values: [LedgerValue], db: Database, _ body: ([LedgerValue]) -> Void) throws {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: StatementArguments(values.map(\.databaseValue)))
        while let row = try rows.next() {
            body(row.databaseValues.map(LedgerValue.init))
        }
    }

    /// The ledger's index of `scope`, refreshed first (see ``SQLiteMetricsIndex``).
    public func metricsIndex(_ scope: MetricsScope, catalog: PlanCatalog) async throws -> any MetricsIndexReads {
        try await SQLiteMetricsIndex(database: database).refresh(catalog: catalog)
        return SQLiteMetricsIndex.Reads(database: database, groups: MetricsIndexRows.groups(scope))
    }

    /// Every row of a statement, as ledger values.
    private static func rows(_ sql: String, _ values: [LedgerValue], db: Database) throws -> [[LedgerValue]] {
        try Row.fetchAll(db.cachedStatement(sql: sql), arguments: StatementArguments(values.map(\.databaseValue))).map { row in
            row.databaseValues.map(LedgerValue.init)
        }
    }
}
