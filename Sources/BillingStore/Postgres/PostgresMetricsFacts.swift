import BillingCore
import Logging
import PostgresNIO

/// The PostgreSQL ``MetricsFactStore``: the twin of SQLite/SQLiteMetricsFacts.swift, running
/// ``MetricsFactReads``'s statements, each read in one repeatable-read transaction so that its
/// statements see one state of the ledger.
struct PostgresMetricsFacts: MetricsFactStore {
    let client: PostgresClient
    let logger: Logger

    func stripeSubscriptions(scope: ServiceScope) async throws -> [StripeSubscriptionFacts] {
        try await snapshot { connection in
            let facts = try await rows(MetricsFactReads.subscriptionFactsSQL, [.text(scope.account), .boolean(scope.livemode)], connection)
                .map(MetricsFactReads.SubscriptionFactRow.init)
            let invoices = try await rows(MetricsFactReads.paidInvoicesSQL, MetricsFactReads.paidInvoicesArguments(scope: scope), connection)
                .compactMap { row -> (subscription: String, paidAt: Int64, refunded: Bool)? in
                    guard let subscription = row[0].text, let paidAt = row[1].integer else { return nil }
                    return (subscription, paidAt, row[2].flag)
                }
            return MetricsFactReads.stripeSubscriptions(facts: facts, paidInvoices: invoices)
        }
    }

    func appStoreSubscriptions(environments: [String]) async throws -> [AppStoreSubscriptionFacts] {
        try await snapshot { connection in
            let transactions = try await rows(
                MetricsFactReads.appStoreTransactionsSQL(environments: environments.count),
                MetricsFactReads.appStoreTransactionsArguments(environments: environments), connection)
            let grace = try await rows(
                MetricsFactReads.gracePeriodsSQL(environments: environments.count), MetricsFactReads.environmentValues(environments),
                connection)
            return MetricsFactReads.appStoreSubscriptions(transactions: transactions, gracePeriods: grace)
        }
    }

    func revenueEntries(scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64) async throws -> [RevenueEntry] {
        try await snapshot { connection in
            var entries: [RevenueEntry] = []
            try await forEachEntry(scope: scope, appStoreEnvironments: appStoreEnvironments, from: from, to: to, connection) { entries.append($0) }
            return entries
        }
    }

    /// Streams the payments and refunds into the buckets as the server sends the rows: memory
    /// stays flat whatever the range holds.
    func revenue(scope: ServiceScope, appStoreEnvironments: [String], into tally: RevenueTally) async throws -> RevenueTally {
        guard let from = tally.buckets.first?.start, let to = tally.buckets.last?.end else { return tally }
        return try await snapshot { connection in
            var tally = tally
            try await forEachEntry(scope: scope, appStoreEnvironments: appStoreEnvironments, from: from, to: to, connection) { tally.add($0) }
            return tally
        }
    }

    /// Hands each payment and refund in `[from, to)` to `body`, one row at a time.
    private func forEachEntry(
        scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64, _ connection: PostgresConnection,
        _ body: (RevenueEntry) -> Void
    ) async throws {
        for try await row in try await connection.runOnce(
            MetricsFactReads.stripePaymentsSQL,
            MetricsFactReads.stripeRevenueArguments(status: InvoiceStatus.paid.rawValue, scope: scope, from: from, to: to), logger: logger)
        {
            if let entry = MetricsFactReads.stripeEntry(try row.map { try LedgerValue($0) }, kind: .payment) { body(entry) }
        }
        for try await row in try await connection.runOnce(
            MetricsFactReads.stripeRefundsSQL,
            MetricsFactReads.stripeRevenueArguments(status: Refund.succeeded, scope: scope, from: from, to: to), logger: logger)
        {
            if let entry = MetricsFactReads.stripeEntry(try row.map { try LedgerValue($0) }, kind: .refund) { body(entry) }
        }
        for try await row in try await connection.runOnce(
            MetricsFactReads.appStoreRevenueSQL(environments: appStoreEnvironments.count),
            MetricsFactReads.appStoreRevenueArguments(environments: appStoreEnvironments, from: from, to: to), logger: logger)
        {
            for entry in MetricsFactReads.appStoreEntries(try row.map { try LedgerValue($0) }, from: from, to: to) { body(entry) }
        }
    }

    /// The ledger's index of `scope`, refreshed first (see ``PostgresMetricsIndex``).
    func metricsIndex(_ scope: MetricsScope, catalog: PlanCatalog) async throws -> any MetricsIndexReads {
        try await PostgresMetricsIndex(client: client, logger: logger).refresh(catalog: catalog)
        return PostgresMetricsIndex.Reads(client: client, logger: logger, groups: MetricsIndexRows.groups(scope))
    }

    /// Runs `body` in a read-only repeatable-read transaction.
    private func snapshot<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws -> Result {
        try await client.transaction(logger: logger) { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            return try await body(connection)
        }
    }

    /// Every row of a statement (its text from the bounded set above), as ledger values. The
    /// environment lists make the App Store statements' texts vary, so all run unprepared.
    private func rows(_ sql: String, _ values: [LedgerValue], _ connection: PostgresConnection) async throws -> [[LedgerValue]] {
        var result: [[LedgerValue]] = []
        for try await row in try await connection.runOnce(sql, values, logger: logger) {
            result.append(try row.map { try LedgerValue($0) })
        }
        return result
    }
}
