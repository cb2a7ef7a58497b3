import BillingCore
import Logging
import PostgresNIO

/// The reads of Stripe reconcile on PostgreSQL that need no ledger writer: the customers to walk,
/// their attached payment methods and entitlement summaries, and the re-fetch queue, as
/// ``LedgerReconciliation`` reads them on SQLite (ids in byte order). The rest of
/// ``LedgerReconciliationStore`` (comparing and repairing pages, tombstones, fetched objects)
/// applies snapshots through the PostgreSQL ledger writer, and joins these when it lands.
package struct PostgresLedgerReconciliationReads: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Customer ids in the ledger (not deleted), in id order, `limit` at a time after `after`.
    package func customerIDs(account: String, livemode: Bool, after: String?, limit: Int) async throws -> [String] {
        try await ids(
            """
            SELECT id FROM customer WHERE account = \(account) AND livemode = \(livemode) AND NOT vDeleted
                AND id > \(after ?? "") COLLATE "C"
            ORDER BY id COLLATE "C" LIMIT \(limit)
            """)
    }

    /// Payment methods the ledger holds as attached to a customer.
    package func attachedPaymentMethods(customer: String, account: String, livemode: Bool) async throws -> [String] {
        try await ids(
            """
            SELECT id FROM paymentMethod WHERE account = \(account) AND livemode = \(livemode) AND customer = \(customer)
                AND NOT vDeleted AND NOT vTerminal
            ORDER BY id COLLATE "C"
            """)
    }

    /// Whether the ledger holds an entitlement summary for the customer.
    package func hasEntitlementSummary(customer: String, account: String, livemode: Bool) async throws -> Bool {
        try await client.single(
            "SELECT EXISTS (SELECT 1 FROM entitlementSummary WHERE account = \(account) AND livemode = \(livemode) AND id = \(customer))",
            as: Bool.self, logger: logger) ?? false
    }

    /// Objects the applier marked for re-fetch, kind by kind, at most `limit`.
    package func refetchQueue(account: String, livemode: Bool, limit: Int) async throws -> [(kind: LedgerObjectKind, id: String)] {
        var queue: [(kind: LedgerObjectKind, id: String)] = []
        for kind in LedgerObjectKind.allCases where queue.count < limit {
            let ids = try await ids(
                """
                SELECT id FROM \(unescaped: LedgerWriter.table(kind)) WHERE needsRefetch AND account = \(account) AND livemode = \(livemode)
                ORDER BY id COLLATE "C" LIMIT \(limit - queue.count)
                """)
            queue += ids.map { (kind, $0) }
        }
        return queue
    }

    private func ids(_ query: PostgresQuery) async throws -> [String] {
        var ids: [String] = []
        for try await id in try await client.query(query, logger: logger).decode(String.self) { ids.append(id) }
        return ids
    }
}
