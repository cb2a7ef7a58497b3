import BillingCore

/// What one run of ``BodyRetentionStore/compressLedgerJSON(batchSize:dryRun:progress:)`` did.
public struct LedgerJSONCompressResult: Sendable, Equatable {
    /// Objects whose raw JSON was stored verbatim, read (dry run: found).
    public var objects = 0
    /// Those now stored compressed; JSON that compressing would not shrink stays verbatim.
    public var compressed = 0
    /// Their raw JSON's bytes before, and after (dry run: before).
    public var bytesBefore: Int64 = 0
    public var bytesAfter: Int64 = 0
    /// An earlier run went through every table: nothing was read. Every row billingd writes since
    /// raw JSON is compressed is stored compressed, so one complete pass is all a ledger needs.
    public var alreadyDone = false

    public init() {}
}

/// The migration of objects' raw JSON written before it was compressed (``StoredJSON``), the same
/// on both backends: which columns, in which batches, and the statements (`?` placeholders,
/// which PostgreSQL's side numbers). A batch is read in its table's key order after the last key
/// of the batch before, so a run reads each row once; each row is rewritten only if it still holds
/// the bytes read (a write by serve meanwhile wins), so a run stopped anywhere leaves every row
/// readable and the next run goes on. A complete run that was not a dry run records itself in
/// `meta`, and later runs read nothing.
enum LedgerJSONCompression {
    /// A column of raw JSON and its table's key.
    struct Column: Sendable {
        let table: String
        let keys: [String]
        let column: String
    }

    static let columns: [Column] =
        LedgerObjectKind.allCases.filter(\.keepsRawJSON).map { Column(table: LedgerRows.table($0), keys: ["account", "livemode", "id"], column: "raw") }
        + [
            Column(table: "appStoreTransaction", keys: ["environment", "transactionID"], column: "raw"),
            Column(table: "appStoreSubscription", keys: ["environment", "originalTransactionID"], column: "renewalRaw"),
        ]

    /// The `meta` key a complete run sets.
    static let doneKey = "ledgerJSONCompressed"
    static let doneSQL = "SELECT value FROM meta WHERE key = '\(doneKey)'"
    static let markDoneSQL = "INSERT INTO meta (key, value) VALUES ('\(doneKey)', '1') ON CONFLICT (key) DO UPDATE SET value = excluded.value"

    /// The next batch of a column's rows: the key's values, then the stored JSON; `after` binds
    /// the previous batch's last key (none for the first batch), then the batch's size.
    static func batchSQL(_ column: Column, after: Bool) -> String {
        let keys = column.keys.joined(separator: ", ")
        let bound = after ? " AND (\(keys)) > (\(column.keys.map { _ in "?" }.joined(separator: ", ")))" : ""
        return "SELECT \(keys), \(column.column) FROM \(column.table) WHERE \(column.column) IS NOT NULL\(bound) ORDER BY \(keys) LIMIT ?"
    }

    /// Rewrites one row's JSON: binds the new bytes, the key's values, then the bytes read.
    static func updateSQL(_ column: Column) -> String {
        let key = column.keys.map { "\($0) = ?" }.joined(separator: " AND ")
        return "UPDATE \(column.table) SET \(column.column) = ? WHERE \(key) AND \(column.column) = ?"
    }

    /// A backend's side of a run: its reads and writes, each in its own transaction.
    struct Backend {
        /// Whether a complete run is recorded (``doneSQL`` found a row).
        let isDone: () async throws -> Bool
        /// Runs ``batchSQL(_:after:)`` with `values` (read on a reader where there is one).
        let read: (_ sql: String, _ values: [LedgerValue]) async throws -> [[LedgerValue]]
        /// Runs ``updateSQL(_:)`` once per row of values, in one transaction.
        let write: (_ sql: String, _ rows: [[LedgerValue]]) async throws -> Void
        /// Runs ``markDoneSQL``.
        let markDone: () async throws -> Void
    }

    /// A whole run over every column, the same on both backends.
    static func run(
        _ backend: Backend, batchSize: Int, dryRun: Bool, progress: @Sendable (LedgerJSONCompressResult) -> Void
    ) async throws -> LedgerJSONCompressResult {
        var total = LedgerJSONCompressResult()
        if try await backend.isDone() {
            total.alreadyDone = true
            return total
        }
        for column in columns {
            var last: [LedgerValue]?
            while true {
                // Compressed between the read and the write, outside any write transaction.
                let rows = try await backend.read(batchSQL(column, after: last != nil), (last ?? []) + [.integer(Int64(batchSize))])
                guard let final = rows.last else { break }
                last = Array(final.dropLast())
                let updates = rewrites(rows, dryRun: dryRun, tally: &total)
                if !updates.isEmpty { try await backend.write(updateSQL(column), updates) }
                progress(total)
                if rows.count < batchSize { break }
            }
        }
        if !dryRun { try await backend.markDone() }
        return total
    }

    /// One batch's rows (the key's values, then the stored bytes): the verbatim ones counted, and
    /// the statements' values for those compressing shrinks (none in a dry run).
    static func rewrites(_ rows: [[LedgerValue]], dryRun: Bool, tally: inout LedgerJSONCompressResult) -> [[LedgerValue]] {
        var updates: [[LedgerValue]] = []
        for row in rows {
            guard case .blob(let stored) = row.last, !StoredJSON.isCompressed(stored) else { continue }
            tally.objects += 1
            tally.bytesBefore += Int64(stored.count)
            let compressed = dryRun ? Array(stored) : StoredJSON.encode(stored)
            tally.bytesAfter += Int64(compressed.count)
            guard compressed.count < stored.count else { continue }
            tally.compressed += 1
            updates.append([.blob(compressed[...])] + row.dropLast() + [.blob(stored)])
        }
        return updates
    }
}
