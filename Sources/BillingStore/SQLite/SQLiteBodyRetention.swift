import BillingCore
import GRDB

/// Body retention on SQLite (``BodyRetentionStore``): the decisions are ``BodyRetentionRows``'s.
/// Each batch is one write transaction, so `serve`'s group commits wait at most one batch.
public struct SQLiteBodyRetention: BodyRetentionStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    public func eventCounts() async throws -> [String: InboxEventCount] {
        try await database.writer.read { db in
            BodyRetentionRows.counts(
                try Row.fetchAll(db, sql: BodyRetentionRows.countsSQL).map { ($0["store"], $0["events"], $0["bodies"]) })
        }
    }

    public func pruneBodies(
        olderThan cutoff: Int64, batchSize: Int, dryRun: Bool, progress: @Sendable (BodyPruneResult) -> Void
    ) async throws -> BodyPruneResult {
        var total = BodyPruneResult()
        for (objectType, table) in BodyRetentionRows.supersedable {
            var after: Int64 = 0
            while true {
                let start = after
                let batch: [(seq: Int64, bytes: Int64)] = try await database.writer.write { db in
                    let rows = try Row.fetchAll(
                        db, sql: BodyRetentionRows.candidatesSQL(table: table), arguments: [objectType, cutoff, start, batchSize]
                    ).map { (seq: $0["seq"] as Int64, bytes: $0["bytes"] as Int64) }
                    if !dryRun, !rows.isEmpty { try db.execute(sql: BodyRetentionRows.deleteSQL(rows.map(\.seq))) }
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

    /// `PRAGMA incremental_vacuum` returns the free pages to the file system on a ledger created
    /// with `auto_vacuum=INCREMENTAL` (every new one, see ``SQLiteDatabase/open(path:busyTimeout:)``)
    /// and does nothing on an older one; `full` runs `VACUUM` after setting the mode, which
    /// rewrites the file (it needs as much free disk again, and holds the write lock throughout)
    /// and so converts an older ledger.
    public func reclaimSpace(full: Bool) async throws {
        try await database.writer.writeWithoutTransaction { db in
            if full {
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                try db.execute(sql: "VACUUM")
            } else {
                try db.execute(sql: "PRAGMA incremental_vacuum")
            }
            // The WAL holds the pages written meanwhile: give them back too, unless a reader
            // (serve's) still needs it, in which case SQLite reuses it from its start.
            _ = try? db.checkpoint(.truncate)
        }
    }
}
