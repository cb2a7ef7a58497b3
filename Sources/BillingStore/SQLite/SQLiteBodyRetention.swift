import BillingCore
import Foundation
import GRDB

/// Body retention on SQLite (``BodyRetentionStore``): the decisions are ``BodyRetentionRows``'s.
/// Each batch is found on a reader and deleted in one short write transaction that checks its
/// bodies again, so `serve`'s group commits wait at most for one batch's deletes.
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
                // The scan on a reader: serve's group commits go on meanwhile.
                let found = try await database.writer.read { db in
                    try Self.candidates(db, BodyRetentionRows.candidatesSQL(table: table), [objectType, cutoff, start, batchSize])
                }
                guard let last = found.last else { break }
                after = last.seq
                let pruned = dryRun ? found : try await database.writer.write { db in
                    let still = try Self.candidates(db, BodyRetentionRows.candidatesSQL(table: table, among: found.map(\.seq)), [objectType, cutoff])
                    if !still.isEmpty { try db.execute(sql: BodyRetentionRows.deleteSQL(still.map(\.seq))) }
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

    public func compressBodies(batchSize: Int, dryRun: Bool, progress: @Sendable (BodyCompressResult) -> Void) async throws
        -> BodyCompressResult
    {
        var total = BodyCompressResult()
        var after: Int64 = 0
        while true {
            let start = after
            // Read on a reader and compressed outside the write lock: serve's commits wait
            // only for each batch's updates.
            let rows = try await database.writer.read { db in
                try Row.fetchAll(db, sql: BodyRetentionRows.verbatimSQL, arguments: [start, batchSize])
                    .map { (seq: $0[0] as Int64, body: Array($0[1] as Data)) }
            }
            guard let last = rows.last else { break }
            after = last.seq
            let rewrites = total.compress(rows, dryRun: dryRun)
            if !rewrites.isEmpty {
                try await database.writer.write { db in
                    let update = try db.cachedStatement(sql: BodyRetentionRows.compressSQL)
                    for rewrite in rewrites {
                        try update.execute(arguments: [Data(rewrite.stored.bytes), rewrite.stored.encoding.rawValue, rewrite.seq])
                    }
                }
            }
            progress(total)
            if rows.count < batchSize { break }
        }
        return total
    }

    public func compressLedgerJSON(batchSize: Int, dryRun: Bool, progress: @Sendable (LedgerJSONCompressResult) -> Void) async throws
        -> LedgerJSONCompressResult
    {
        let database = database
        let backend = LedgerJSONCompression.Backend(
            isDone: { try await database.writer.read { db in try String.fetchOne(db, sql: LedgerJSONCompression.doneSQL) } != nil },
            read: { sql, values in
                try await database.writer.read { db in
                    try Row.fetchAll(db, sql: sql, arguments: StatementArguments(values.map(\.databaseValue)))
                        .map { row in (0..<row.count).map { LedgerValue(row[$0] as DatabaseValue) } }
                }
            },
            write: { sql, rows in
                try await database.writer.write { db in
                    let update = try db.cachedStatement(sql: sql)
                    for values in rows { try update.execute(arguments: StatementArguments(values.map(\.databaseValue))) }
                }
            },
            markDone: { try await database.writer.write { db in try db.execute(sql: LedgerJSONCompression.markDoneSQL) } })
        return try await LedgerJSONCompression.run(backend, batchSize: batchSize, dryRun: dryRun, progress: progress)
    }

    private static func candidates(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws -> [(seq: Int64, bytes: Int64)] {
        try Row.fetchAll(db, sql: sql, arguments: arguments).map { (seq: $0["seq"], bytes: $0["bytes"]) }
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

extension SQLiteMigrations {
    /// The bodies' `encoding` (``BodyEncoding``, `v17-inbox-body-encoding` on PostgreSQL): rows
    /// written before it are verbatim (0) and stay readable as they are; `billingd compact`
    /// compresses them in batches.
    static func registerBodyEncodingMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v19-inbox-body-encoding") { db in
            try db.execute(sql: "ALTER TABLE inboxBody ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0")
        }
    }
}
