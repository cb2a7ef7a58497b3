import BillingCore
import Logging
import PostgresNIO

/// Body retention on PostgreSQL (``BodyRetentionStore``), the decisions ``BodyRetentionRows``'s as
/// on SQLite: each batch found outside a transaction, then checked again and deleted in a short
/// one, so that no replica's commit waits long; then a `VACUUM` of the bodies' table (its TOAST included) so that the space is reused.
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
        let logger = logger
        for (objectType, table) in BodyRetentionRows.supersedable {
            var after: Int64 = 0
            while true {
                let found = try await client.withConnection { connection in
                    try await Self.candidates(
                        connection, BodyRetentionRows.candidatesSQL(table: table),
                        [.text(objectType), .integer(cutoff), .integer(after), .integer(Int64(batchSize))], logger: logger)
                }
                guard let last = found.last else { break }
                after = last.seq
                let pruned = dryRun ? found : try await client.transaction(logger: logger) { connection in
                    let still = try await Self.candidates(
                        connection, BodyRetentionRows.candidatesSQL(table: table, among: found.map(\.seq)),
                        [.text(objectType), .integer(cutoff)], logger: logger)
                    if !still.isEmpty {
                        try await connection.query(PostgresQuery(unsafeSQL: BodyRetentionRows.deleteSQL(still.map(\.seq))), logger: logger)
                    }
                    return still
                }
                total.bodies += pruned.count
                total.bytes += pruned.reduce(0) { $0 + $1.bytes }
                progress(total)
                if found.count < batchSize { break }
            }
        }
        return total
    }

    func compressBodies(batchSize: Int, dryRun: Bool, progress: @Sendable (BodyCompressResult) -> Void) async throws
        -> BodyCompressResult
    {
        var total = BodyCompressResult()
        var after: Int64 = 0
        let logger = logger
        while true {
            let start = after
            let rows = try await client.withConnection { connection in
                var rows: [(seq: Int64, body: [UInt8])] = []
                let found = try await connection.runOnce(
                    BodyRetentionRows.verbatimSQL, [.integer(start), .integer(Int64(batchSize))], logger: logger)
                for try await (seq, body) in found.decode((Int64, ByteBuffer).self) { rows.append((seq, Array(body.readableBytesView))) }
                return rows
            }
            guard let last = rows.last else { break }
            after = last.seq
            let rewrites = total.compress(rows, dryRun: dryRun)
            if !rewrites.isEmpty {
                try await client.transaction(logger: logger) { connection in
                    for rewrite in rewrites {
                        try await connection.runOnce(
                            BodyRetentionRows.compressSQL,
                            [.blob(rewrite.stored.bytes[...]), .integer(Int64(rewrite.stored.encoding.rawValue)), .integer(rewrite.seq)],
                            logger: logger)
                    }
                }
            }
            progress(total)
            if rows.count < batchSize { break }
        }
        return total
    }

    func compressLedgerJSON(batchSize: Int, dryRun: Bool, progress: @Sendable (LedgerJSONCompressResult) -> Void) async throws
        -> LedgerJSONCompressResult
    {
        let (client, logger) = (client, logger)
        let backend = LedgerJSONCompression.Backend(
            isDone: {
                try await client.withConnection { connection in
                    var found = false
                    for try await _ in try await connection.runOnce(LedgerJSONCompression.doneSQL, [], logger: logger) { found = true }
                    return found
                }
            },
            read: { sql, values in
                try await client.withConnection { connection in
                    var rows: [[LedgerValue]] = []
                    for try await row in try await connection.runOnce(sql, values, logger: logger) { rows.append(try row.map { try LedgerValue($0) }) }
                    return rows
                }
            },
            write: { sql, rows in
                try await client.transaction(logger: logger) { connection in
                    for values in rows { try await connection.runOnce(sql, values, logger: logger) }
                }
            },
            markDone: { try await client.query(PostgresQuery(unsafeSQL: LedgerJSONCompression.markDoneSQL), logger: logger) })
        return try await LedgerJSONCompression.run(backend, batchSize: batchSize, dryRun: dryRun, progress: progress)
    }

    private static func candidates(
        _ connection: PostgresConnection, _ sql: String, _ values: [LedgerValue], logger: Logger
    ) async throws -> [(seq: Int64, bytes: Int64)] {
        var rows: [(seq: Int64, bytes: Int64)] = []
        for try await (seq, bytes) in try await connection.runOnce(sql, values, logger: logger).decode((Int64, Int64).self) {
            rows.append((seq, bytes))
        }
        return rows
    }

    /// `VACUUM` makes the deleted bodies' space reusable inside the table (and its TOAST); `full`
    /// runs `VACUUM FULL`, which gives it back to the file system but locks the table (deliveries
    /// wait) while it rewrites it.
    /// The bodies' `encoding` (``BodyEncoding``, `v19-inbox-body-encoding` on SQLite): a column
    /// with a constant default, added without rewriting the table; rows written before it are
    /// verbatim (0), and `billingd compact` compresses them in batches.
    static let encodingMigration = PostgresMigrations.Migration(
        version: "v17-inbox-body-encoding",
        statements: ["ALTER TABLE inboxBody ADD COLUMN encoding bigint NOT NULL DEFAULT 0"])

    func reclaimSpace(full: Bool) async throws {
        try await client.query(PostgresQuery(unsafeSQL: full ? "VACUUM FULL inboxBody" : "VACUUM inboxBody"), logger: logger)
    }
}
