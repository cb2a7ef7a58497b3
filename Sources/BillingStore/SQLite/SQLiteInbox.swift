import BillingCore
import Foundation
import GRDB

/// The inbox on SQLite, and the only type that spells its SQL: durable deliveries,
/// deduplicated by (event id, account, livemode), the applier's work queue, and the operator's
/// view of both. Every reader and writer of `inboxEvent` and `inboxBody` goes through it, and
/// ``InboxStatus`` is the only spelling of a status.
public struct SQLiteInbox: EventInbox {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    // MARK: Writing deliveries

    private static let insertSQL = """
        INSERT INTO inboxEvent
            (eventID, account, livemode, type, subtype, apiVersion, created, objectID, objectType,
             receivedAt, source, secretIndex, status, effect, processedAt, attempts)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (eventID, account, livemode) DO NOTHING
        """

    /// Stores deliveries for the applier in one transaction, in order; one outcome per delivery.
    public func insert(_ deliveries: [InboxDelivery]) async throws -> [InboxInsertOutcome] {
        try await database.writer.write { db in try Self.insert(deliveries, status: .pending, db: db) }
    }

    /// Inserts deliveries inside the caller's transaction, deduplicating by key. `status` is
    /// `pending` for the applier, or `applied` for a caller that applies them in the same
    /// transaction (and then records the effect with ``recordApplied(seq:effect:at:db:)``).
    static func insert(_ deliveries: [InboxDelivery], status: InboxStatus, db: Database) throws -> [InboxInsertOutcome] {
        var outcomes: [InboxInsertOutcome] = []
        outcomes.reserveCapacity(deliveries.count)
        for delivery in deliveries {
            outcomes.append(try insert(delivery, status: status, effect: nil, processedAt: nil, db: db))
        }
        return outcomes
    }

    /// Inserts one delivery inside the caller's transaction, with the status it already has: a
    /// delivery the caller applied in this transaction is stored done, and never rewritten.
    static func insert(
        _ delivery: InboxDelivery, status: InboxStatus, effect: ApplyEffect?, processedAt: Int64?, db: Database
    ) throws -> InboxInsertOutcome {
        let envelope = delivery.envelope
        try db.cachedStatement(sql: Self.insertSQL).execute(arguments: [
            envelope.id, envelope.account ?? "", envelope.livemode, envelope.type, delivery.subtype,
            envelope.apiVersion, envelope.created, envelope.objectID, envelope.objectType,
            delivery.receivedAt, delivery.source.rawValue, delivery.secretIndex, status.rawValue,
            effect?.rawValue, processedAt, processedAt == nil ? 0 : 1,
        ])
        guard db.changesCount == 1 else { return .duplicate }
        let seq = db.lastInsertedRowID
        try db.cachedStatement(sql: "INSERT INTO inboxBody (seq, body, encoding) VALUES (?, ?, ?)")
            .execute(arguments: [seq, Data(delivery.stored.bytes), delivery.stored.encoding.rawValue])
        return .stored(seq: seq)
    }

    /// Whether the inbox already holds a delivery's event (its id, account and mode), inside
    /// the caller's transaction.
    static func contains(_ delivery: InboxDelivery, db: Database) throws -> Bool {
        let envelope = delivery.envelope
        return try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS(SELECT 1 FROM inboxEvent WHERE eventID = ? AND account = ? AND livemode = ?)"),
            arguments: [envelope.id, envelope.account ?? "", envelope.livemode]) ?? false
    }

    /// Records the outcome of an event applied by the caller inside its transaction.
    static func recordApplied(seq: Int64, effect: ApplyEffect, at now: Int64, db: Database) throws {
        try db.cachedStatement(sql: "UPDATE inboxEvent SET status = ?, effect = ?, processedAt = ?, attempts = attempts + 1 WHERE seq = ?")
            .execute(arguments: [InboxStatus.applied.rawValue, effect.rawValue, now, seq])
    }

    // MARK: The applier's work queue

    /// Up to `limit` events that wait to be applied and are due at `now` (Unix ms), after inbox
    /// position `seq`, in commit order.
    ///
    /// Each waiting status is read apart, as a range of the partial index `inboxEvent_work` in
    /// `seq` order, and the two ranges merged: asked for `status IN ('pending', 'failed')`,
    /// SQLite cannot match the index (its WHERE term is spelled differently) and walked the inbox
    /// from `seq` on, every applied row of it — a second of one core's time per drain pass, which
    /// runs every second, on a ledger of 1.5 million events with nothing to apply.
    func due(now: Int64, after seq: Int64, limit: Int) async throws -> [DueEvent] {
        try await database.writer.read { db in
            try Row.fetchAll(
                db.cachedStatement(sql: """
                    SELECT e.seq, e.eventID, e.account, e.livemode, e.type, e.created, e.apiVersion, e.attempts, e.source, b.body, b.encoding
                    FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
                    WHERE e.seq IN (
                        SELECT seq FROM (
                            SELECT seq FROM inboxEvent
                            WHERE \(Self.workIndexTerm) AND status = 'pending' AND seq > ?2
                            ORDER BY seq LIMIT ?3)
                        UNION ALL
                        SELECT seq FROM (
                            SELECT seq FROM inboxEvent
                            WHERE \(Self.workIndexTerm) AND status = 'failed' AND (nextAttemptAt IS NULL OR nextAttemptAt <= ?1) AND seq > ?2
                            ORDER BY seq LIMIT ?3))
                    ORDER BY e.seq LIMIT ?3
                    """),
                arguments: [now, seq, limit]
            ).map { row in
                DueEvent(
                    seq: row["seq"], eventID: row["eventID"], account: row["account"], livemode: row["livemode"],
                    type: row["type"], created: row["created"], apiVersion: row["apiVersion"], attempts: row["attempts"],
                    source: InboxSource(rawValue: row["source"]) ?? .webhook,
                    body: try StoredBody.decode(Array(row["body"] as Data), encoding: row["encoding"]))
            }
        }
    }

    /// Records, inside the applier's transaction, that an event is done: `applied` (with its
    /// effect) or `ignored`.
    static func recordDone(seq: Int64, status: InboxStatus, effect: ApplyEffect?, at now: Int64, db: Database) throws {
        try db.cachedStatement(
            sql: "UPDATE inboxEvent SET status = ?, effect = ?, processedAt = ?, attempts = attempts + 1, lastError = NULL, nextAttemptAt = NULL WHERE seq = ?"
        ).execute(arguments: [status.rawValue, effect?.rawValue, now, seq])
    }

    /// Records, inside the applier's transaction, that applying an event failed: `failed` with
    /// the time of its next try, or `dead` (`retryAt` nil).
    static func recordFailure(seq: Int64, attempts: Int, error: String, retryAt: Int64?, at now: Int64, db: Database) throws {
        try db.cachedStatement(
            sql: "UPDATE inboxEvent SET status = ?, attempts = ?, lastError = ?, nextAttemptAt = ?, processedAt = ? WHERE seq = ?"
        ).execute(arguments: [
            (retryAt == nil ? InboxStatus.dead : InboxStatus.failed).rawValue, attempts, String(error.prefix(1000)), retryAt, now, seq,
        ])
    }

    /// Puts every event that still has its body back in the queue, as never tried, inside the
    /// caller's transaction (replay empties the ledger in the same one). An event whose body was
    /// pruned (``BodyRetentionStore``) keeps its status: its snapshot was superseded, and the
    /// applier could not read it.
    static func requeueEverything(db: Database) throws {
        try db.execute(
            sql: """
                UPDATE inboxEvent SET status = ?, attempts = 0, nextAttemptAt = NULL, lastError = NULL, effect = NULL, processedAt = NULL
                WHERE EXISTS (SELECT 1 FROM inboxBody b WHERE b.seq = inboxEvent.seq)
                """,
            arguments: [InboxStatus.pending.rawValue])
    }

    // MARK: Operator actions

    /// Re-queues one failed or dead event of an account and mode (invariant 4: an id alone may
    /// name events of several); returns whether it was found in such a state.
    public func retry(eventID: String, account: String?, livemode: Bool) async throws -> Bool {
        try await database.writer.write { db in
            try db.execute(
                sql: """
                    UPDATE inboxEvent SET status = ?, attempts = 0, nextAttemptAt = NULL
                    WHERE eventID = ? AND account = ? AND livemode = ? AND status IN (\(InboxStatus.sqlList(InboxStatus.unapplied)))
                    """,
                arguments: [InboxStatus.pending.rawValue, eventID, account ?? "", livemode])
            return db.changesCount > 0
        }
    }

    /// Re-queues every failed and dead event; returns how many.
    public func retryAllFailed() async throws -> Int {
        try await database.writer.write { db in
            try db.execute(
                sql: "UPDATE inboxEvent SET status = ?, attempts = 0, nextAttemptAt = NULL WHERE status IN (\(InboxStatus.sqlList(InboxStatus.unapplied)))",
                arguments: [InboxStatus.pending.rawValue])
            return db.changesCount
        }
    }

    // MARK: Reading

    /// Lists stored events in commit order, without their bodies.
    public func list(_ filter: InboxFilter) async throws -> [InboxEvent] {
        try await database.writer.read { db in
            var clauses: [String] = []
            var arguments: StatementArguments = []
            if !filter.statuses.isEmpty {
                // Spelled as literals, so that SQLite can use the partial work index.
                // In the order of the index's own list: SQLite matches a partial index's WHERE term
                // by its spelling, and without it reads the whole inbox in seq order.
                let statuses = InboxStatus.allCases.filter(filter.statuses.contains)
                clauses.append("status IN (\(InboxStatus.sqlList(statuses)))")
            }
            for (column, value) in [("type", filter.type), ("objectID", filter.objectID), ("eventID", filter.eventID)] {
                guard let value else { continue }
                clauses.append("\(column) = ?")
                _ = arguments.append(contentsOf: [value])
            }
            if let after = filter.afterSeq {
                clauses.append("seq > ?")
                _ = arguments.append(contentsOf: [after])
            }
            let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
            let rows = try Row.fetchAll(
                db, sql: "SELECT \(InboxEvent.columns) FROM inboxEvent \(whereClause) ORDER BY seq LIMIT ?",
                arguments: arguments + [filter.limit])
            return rows.map(Self.event(from:))
        }
    }

    /// The raw body of a stored event of an account and mode.
    public func body(eventID: String, account: String?, livemode: Bool) async throws -> [UInt8]? {
        try await database.writer.read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT b.body, b.encoding FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
                    WHERE e.eventID = ? AND e.account = ? AND e.livemode = ?
                    """,
                arguments: [eventID, account ?? "", livemode]
            ).map { row in try StoredBody.decode(Array(row[0] as Data), encoding: row[1]) }
        }
    }

    /// Number of events in each status.
    public func countsByStatus() async throws -> [InboxStatus: Int] {
        try await database.writer.read { db in
            var counts: [InboxStatus: Int] = [:]
            for status in InboxStatus.allCases { counts[status] = 0 }
            for row in try Row.fetchAll(db, sql: "SELECT status, COUNT(*) AS n FROM inboxEvent GROUP BY status") {
                if let status = InboxStatus(rawValue: row["status"]) { counts[status] = row["n"] }
            }
            return counts
        }
    }

    /// Total number of stored events.
    public func count() async throws -> Int {
        try await database.writer.read { db in try Self.count(db: db) }
    }

    static func count(db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM inboxEvent") ?? 0
    }

    /// Whether an event is already stored for an account and mode.
    public func contains(eventID: String, account: String?, livemode: Bool) async throws -> Bool {
        try await database.writer.read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS(SELECT 1 FROM inboxEvent WHERE eventID = ? AND account = ? AND livemode = ?)",
                arguments: [eventID, account ?? "", livemode]) ?? false
        }
    }

    /// The events about one object, in commit order, as `inspect` shows them.
    static func events(about objectID: String, db: Database) throws -> [Row] {
        try Row.fetchAll(
            db, sql: "SELECT eventID, type, created, status, effect FROM inboxEvent WHERE objectID = ? ORDER BY seq",
            arguments: [objectID])
    }

    /// An SQL condition, for a query of another table, that holds when an event of account
    /// `accountSQL` about object `objectSQL` failed to apply (both are SQL expressions).
    static func hasUnappliedEvent(accountSQL: String, objectSQL: String) -> String {
        """
        EXISTS (SELECT 1 FROM inboxEvent e WHERE e.account = \(accountSQL)
            AND e.objectID = \(objectSQL) AND e.status IN (\(InboxStatus.sqlList(InboxStatus.unapplied))))
        """
    }

    static func event(from row: Row) -> InboxEvent {
        let account: String = row["account"]
        var event = InboxEvent(
            seq: row["seq"], eventID: row["eventID"], account: account.isEmpty ? nil : account,
            livemode: row["livemode"], type: row["type"], apiVersion: row["apiVersion"], created: row["created"],
            objectID: row["objectID"], objectType: row["objectType"], receivedAt: row["receivedAt"],
            source: InboxSource(rawValue: row["source"]) ?? .webhook,
            status: InboxStatus(rawValue: row["status"]) ?? .pending,
            attempts: row["attempts"], lastError: row["lastError"], effect: row["effect"])
        event.subtype = row["subtype"]
        return event
    }
}

extension SQLiteInbox {
    /// The WHERE term of the partial index `inboxEvent_work`, spelled as its migration spells it:
    /// SQLite uses a partial index only for a query that contains that very term.
    static let workIndexTerm = "status IN (\(InboxStatus.sqlList(InboxStatus.waiting + [.dead])))"

    public func depth() async throws -> InboxDepth {
        try await database.writer.read { db in
            let queued = InboxStatus.waiting + [.dead]
            var counts = Dictionary(uniqueKeysWithValues: queued.map { ($0, 0) })
            for row in try Row.fetchAll(
                db, sql: "SELECT status, COUNT(*) AS n FROM inboxEvent WHERE status IN (\(InboxStatus.sqlList(queued))) GROUP BY status")
            {
                if let status = InboxStatus(rawValue: row["status"]) { counts[status] = row["n"] }
            }
            // Commit order is arrival order: the lowest waiting seq is the oldest, found
            // through the work index instead of a scan of the whole inbox. The index's own list
            // of statuses, then dead left out: SQLite uses a partial index only for a query that
            // spells its WHERE term, and read 1.5 million rows for `IN ('pending', 'failed')`.
            let oldest = try Int64.fetchOne(
                db,
                sql: """
                    SELECT receivedAt FROM inboxEvent WHERE \(Self.workIndexTerm) AND status <> 'dead'
                    ORDER BY seq LIMIT 1
                    """)
            return InboxDepth(counts: counts, oldestPendingReceivedAt: oldest)
        }
    }
}

extension InboxStatus {
    /// Statuses of events the applier still has to (re)try.
    static let waiting: [InboxStatus] = [.pending, .failed]
    /// Statuses of events that failed to apply, for an operator to re-queue.
    static let unapplied: [InboxStatus] = [.failed, .dead]

    /// `'pending', 'failed'`: statuses as SQL literals (never user input), which lets SQLite
    /// match a query to the partial index `inboxEvent_work`, as bound parameters would not.
    static func sqlList(_ statuses: [InboxStatus]) -> String {
        statuses.map { "'\($0.rawValue)'" }.joined(separator: ", ")
    }
}
