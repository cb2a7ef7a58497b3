import BillingCore

/// What one run of ``BodyRetentionStore/compressLedgerJSON(batchSize:dryRun:progress:)`` did.
public struct LedgerJSONCompressResult: Sendable, Equatable {
    /// Objects whose raw JSON was stored verbatim, read (dry run: found).
    public var objects = 0
    /// Those now stored compressed; JSON that compressing would not shrink stays verbatim.
    public var compressed = 0
    /// Objects whose JSON (verbatim or compressed) is byte for byte `data.object` of the body of the
    /// event that wrote their row, now kept only there (dry run: found). Counted apart from
    /// ``objects``: a verbatim object kept in its event's body is not compressed.
    public var inEventBodies = 0
    /// The raw JSON's bytes as stored before, and after, of the objects counted in ``objects`` and
    /// ``inEventBodies`` (dry run: before, and what it would be).
    public var bytesBefore: Int64 = 0
    public var bytesAfter: Int64 = 0
    /// An earlier run went through every table: nothing was read. Every row billingd writes since
    /// is stored compressed or in its event's body, so one complete pass is all a ledger needs.
    public var alreadyDone = false

    public init() {}
}

/// The migration of objects' raw JSON written before it was kept once (``StoredJSON``), the same
/// on both backends: which columns, in which batches, and the statements (`?` placeholders,
/// which PostgreSQL's side numbers). A Stripe object whose row an event wrote keeps its JSON in
/// that event's body when the two are byte for byte the same (the row then stores
/// ``StoredJSON/inEventBody``); any other JSON (an object read from the API, App Store rows) is
/// compressed. A batch is read in its table's key order after the last key of the batch before, so
/// a run reads each row once; each row is rewritten only if it still holds the bytes read and names
/// the same event (a write by serve meanwhile wins), so a run stopped anywhere leaves every row
/// readable and the next run goes on. A complete run that was not a dry run records itself in
/// `meta`, and later runs read nothing.
enum LedgerJSONCompression {
    /// A column of raw JSON and its table's key.
    struct Column: Sendable {
        let table: String
        let keys: [String]
        let column: String
        /// A Stripe object table: its rows name the event that wrote them (`vEventID`), whose body may hold their JSON.
        var eventBodies = false
    }

    static let columns: [Column] =
        LedgerObjectKind.allCases.filter(\.keepsRawJSON).map {
            Column(table: LedgerRows.table($0), keys: ["account", "livemode", "id"], column: "raw", eventBodies: true)
        }
        + [
            Column(table: "appStoreTransaction", keys: ["environment", "transactionID"], column: "raw"),
            Column(table: "appStoreSubscription", keys: ["environment", "originalTransactionID"], column: "renewalRaw"),
        ]

    /// The `meta` key a complete run sets. (`ledgerJSONCompressed` recorded the run of a billingd
    /// that only compressed; a ledger it marked is read once more, for the event bodies.)
    static let doneKey = "ledgerJSONKeptOnce"
    static let doneSQL = "SELECT value FROM meta WHERE key = '\(doneKey)'"
    static let markDoneSQL = "INSERT INTO meta (key, value) VALUES ('\(doneKey)', '1') ON CONFLICT (key) DO UPDATE SET value = excluded.value"

    /// The next batch of a column's rows holding JSON: the key's values, the stored JSON, and for a
    /// Stripe table the row's `vEventID` and the stored body of that event (NULL when the inbox
    /// holds none); `after` binds the previous batch's last key (none for the first batch), then
    /// the batch's size.
    static func batchSQL(_ column: Column, after: Bool) -> String {
        let keys = column.keys.map { "r.\($0)" }.joined(separator: ", ")
        let bound = after ? " AND (\(keys)) > (\(column.keys.map { _ in "?" }.joined(separator: ", ")))" : ""
        let event = column.eventBodies
            ? """
            , r.vEventID, (SELECT b.body FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
                WHERE e.eventID = r.vEventID AND e.account = r.account AND e.livemode = r.livemode)
            """ : ""
        return "SELECT \(keys), r.\(column.column)\(event) FROM \(column.table) r WHERE length(r.\(column.column)) > 0\(bound) ORDER BY \(keys) LIMIT ?"
    }

    /// Rewrites one row's JSON: binds the new bytes, the key's values, the bytes read, then (for a
    /// Stripe table) the event the row named.
    static func updateSQL(_ column: Column) -> String {
        let key = column.keys.map { "\($0) = ?" }.joined(separator: " AND ")
        return "UPDATE \(column.table) SET \(column.column) = ? WHERE \(key) AND \(column.column) = ?" + (column.eventBodies ? " AND vEventID = ?" : "")
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
                last = Array(final.prefix(column.keys.count))
                let updates = rewrites(rows, column: column, dryRun: dryRun, tally: &total)
                if !updates.isEmpty { try await backend.write(updateSQL(column), updates) }
                progress(total)
                if rows.count < batchSize { break }
            }
        }
        if !dryRun { try await backend.markDone() }
        return total
    }

    /// One batch's rows (``batchSQL(_:after:)``'s columns): the statements' values for the rows to
    /// rewrite (none in a dry run), each tallied. A Stripe object's JSON that is its event's
    /// data.object is kept there; other verbatim JSON compressed where that shrinks it.
    static func rewrites(_ rows: [[LedgerValue]], column: Column, dryRun: Bool, tally: inout LedgerJSONCompressResult) -> [[LedgerValue]] {
        var updates: [[LedgerValue]] = []
        let keyCount = column.keys.count
        for row in rows {
            guard case .blob(let stored) = row[keyCount], !stored.isEmpty else { continue }
            let key = Array(row[..<keyCount])
            let compare: [LedgerValue] = [.blob(stored)] + (column.eventBodies ? [row[keyCount + 1]] : [])
            if column.eventBodies, case .blob(let body) = row[keyCount + 2],
                let json = try? StoredJSON.decode(stored), let object = try? StoredJSON.json(stored: StoredJSON.inEventBody, eventBody: Array(body)),
                json == object
            {
                tally.inEventBodies += 1
                tally.bytesBefore += Int64(stored.count)
                if !dryRun { updates.append([.blob(StoredJSON.inEventBody[...])] + key + compare) }
                continue
            }
            guard !StoredJSON.isCompressed(stored) else { continue }
            tally.objects += 1
            tally.bytesBefore += Int64(stored.count)
            let compressed = dryRun ? Array(stored) : StoredJSON.encode(stored)
            tally.bytesAfter += Int64(compressed.count)
            guard compressed.count < stored.count else { continue }
            tally.compressed += 1
            updates.append([.blob(compressed[...])] + key + compare)
        }
        return updates
    }
}
