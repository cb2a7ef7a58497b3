import BillingCore
import Logging
import PostgresNIO

/// Body retention on PostgreSQL (``BodyRetentionStore``), the decisions ``BodyRetentionRows``'s as
/// on SQLite: batched deletes, each batch its own transaction so that no replica's commit waits
/// long, then a `VACUUM` of the bodies' table (its TOAST included) so that the space is reused.
struct PostgresBodyRetention: BodyRetentionStore {
    let client: PostgresClient
    let logger: Logger

    func eventCounts() async throws -> [String: InboxEventCount] {
        var rows: [(store: String, events: Int, bodies: Int)] = []
        for try await (store, events, bodies) in try await client.query(PostgresQuery(unsafeSQL: BodyRetentionRows.countsSQL), logger: logger)
            .decode((String, Int64, Int64).self)
        {
            rows.append((store, Int(events), Int(bodies)))
        }
        return BodyRetentionRows.counts(rows)
    }

    func pruneBodies(
        olderThan cutoff: Int64, batchSize: Int, dryRun: Bool, progress: @Sendable (BodyPruneResult) -> Void
    ) async throws -> BodyPruneResult {
        var total = BodyPruneResult()
        for (objectType, table) in BodyRetentionRows.supersedable {
            var after: Int64 = 0
            while true {
                let sql = BodyRetentionRows.candidatesSQL(table: table)
                let (logger, start) = (logger, after)
                let batch: [(seq: Int64, bytes: Int64)] = try await client.transaction(logger: logger) { connection in
                    var rows: [(seq: Int64, bytes: Int64)] = []
                    let found = try await connection.runOnce(
                        sql, [.text(objectType), .integer(cutoff), .integer(start), .integer(Int64(batchSize))], logger: logger)
                    for try await (seq, bytes) in found.decode((Int64, Int64).self) { rows.append((seq, bytes)) }
                    if !dryRun, !rows.isEmpty {
                        try await connection.query(PostgresQuery(unsafeSQL: BodyRetentionRows.deleteSQL(rows.map(\.seq))), logger: logger)
                    }
                    return rows
                }
                guard let last = batch.last else { break }
                after = last.seq
                total.bodies += batch.count
                total.bytes += batch.reduce(0) { $0 + $1.bytes }
                progress(total)
                if batch.count < batchSize { break }
            }
        }
        return total
    }

    /// `VACUUM` makes the deleted bodies' space reusable inside the table (and its TOAST); `full`
    /// runs `VACUUM FULL`, which gives it back to the file system but locks the table (deliveries
    /// wait) while it rewrites it.
    func reclaimSpace(full: Bool) async throws {
        try await client.query(PostgresQuery(unsafeSQL: full ? "VACUUM FULL inboxBody" : "VACUUM inboxBody"), logger: logger)
    }
}
