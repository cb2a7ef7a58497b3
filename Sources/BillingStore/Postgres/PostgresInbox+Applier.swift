import BillingCore
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The applier's side of the PostgreSQL inbox: claims of due work shared by several replicas,
/// final-state inserts of group commits, and outcomes. Same type as ``PostgresInbox``, so that
/// `inboxEvent` keeps one owner; apart, so that the applier's SQL reads on its own.
///
/// A claim is two columns: `claimedBy` names the drain pass that took the event, and
/// `nextAttemptAt` is pushed to when the claim expires, so that the work query skips a claimed
/// event until then without a column of its own. A replica killed after claiming leaves events
/// that fall due again at expiry, for any replica; a replica that applies after its claim was
/// taken over finds `claimedBy` changed and leaves the event alone.
extension PostgresInbox {
    /// The migration adding the claim column (the only PostgreSQL-only column of the inbox).
    static let claimMigration = PostgresMigrations.Migration(
        version: "v2-applier-claims", statements: ["ALTER TABLE inboxEvent ADD COLUMN claimedBy text"])

    /// Claims up to `limit` events due at `now` for the drain pass `pass`, until `until`; never
    /// one another transaction is claiming (`SKIP LOCKED`) nor one this pass already tried.
    /// Returned in inbox position order.
    static func claim(pass: String, now: Int64, until: Int64, limit: Int, client: PostgresClient, logger: Logger) async throws -> [DueEvent] {
        let rows = try await client.query(
            """
            UPDATE inboxEvent e SET claimedBy = \(pass), nextAttemptAt = \(until)
            FROM (
                SELECT seq FROM inboxEvent
                WHERE status IN (\(unescaped: InboxStatus.sqlList(InboxStatus.waiting)))
                    AND (nextAttemptAt IS NULL OR nextAttemptAt <= \(now)) AND claimedBy IS DISTINCT FROM \(pass)
                ORDER BY seq LIMIT \(limit)
                FOR UPDATE SKIP LOCKED) AS due
            WHERE e.seq = due.seq
            RETURNING e.seq, e.eventID, e.account, e.livemode, e.type, e.created, e.apiVersion, e.attempts, e.source,
                (SELECT b.body FROM inboxBody b WHERE b.seq = e.seq), (SELECT b.encoding FROM inboxBody b WHERE b.seq = e.seq)
            """,
            logger: logger)
        var events: [DueEvent] = []
        for try await (seq, eventID, account, livemode, type, created, apiVersion, attempts, source, body, encoding) in rows.decode(
            (Int64, String, String, Bool, String, Int64, String?, Int, String, ByteBuffer, Int).self)
        {
            events.append(DueEvent(
                seq: seq, eventID: eventID, account: account, livemode: livemode, type: type, created: created,
                apiVersion: apiVersion, attempts: attempts, source: InboxSource(rawValue: source) ?? .webhook,
                body: try StoredBody.decode(Array(body.readableBytesView), encoding: encoding)))
        }
        return events.sorted { $0.seq < $1.seq }
    }

    /// Of the events a pass claimed, those it still holds, locked for the caller's transaction:
    /// not yet done and not taken over by another pass after the claim expired.
    static func stillClaimed(_ seqs: [Int64], pass: String, connection: PostgresConnection, logger: Logger) async throws -> Set<Int64> {
        let rows = try await connection.query(
            """
            SELECT seq FROM inboxEvent
            WHERE seq = ANY(\(seqs)) AND claimedBy = \(pass) AND status IN (\(unescaped: InboxStatus.sqlList(InboxStatus.waiting)))
            ORDER BY seq FOR UPDATE
            """,
            logger: logger)
        var held = Set<Int64>()
        for try await seq in rows.decode(Int64.self) { held.insert(seq) }
        return held
    }

    /// Records, inside the applier's transaction, that an event is done: `applied` (with its
    /// effect) or `ignored`.
    static func recordDone(seq: Int64, status: InboxStatus, effect: ApplyEffect?, at now: Int64, connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            UPDATE inboxEvent SET status = \(status.rawValue), effect = \(effect?.rawValue), processedAt = \(now),
                attempts = attempts + 1, lastError = NULL, nextAttemptAt = NULL, claimedBy = NULL
            WHERE seq = \(seq)
            """,
            logger: logger)
    }

    /// An event a drain pass is done with: `applied` (with its effect) or `ignored`.
    struct Done {
        let seq: Int64
        let status: InboxStatus
        var effect: ApplyEffect?
    }

    /// Records, inside the applier's transaction, that events are done, in one statement.
    static func recordDone(_ done: [Done], at now: Int64, connection: PostgresConnection, logger: Logger) async throws {
        guard !done.isEmpty else { return }
        let statuses = PostgresColumnArray(type: .text, values: done.map { .text($0.status.rawValue) })
        let effects = PostgresColumnArray(type: .text, values: done.map { $0.effect.map { .text($0.rawValue) } ?? .null })
        try await connection.prepared(
            """
            UPDATE inboxEvent e SET status = u.status, effect = u.effect, processedAt = \(now),
                attempts = e.attempts + 1, lastError = NULL, nextAttemptAt = NULL, claimedBy = NULL
            FROM unnest(\(done.map(\.seq))::bigint[], \(statuses)::text[], \(effects)::text[]) AS u (seq, status, effect)
            WHERE e.seq = u.seq
            """,
            logger: logger)
    }

    /// Records, inside the applier's transaction, that applying an event failed: `failed` with
    /// the time of its next try, or `dead` (`retryAt` nil). The claim stays, so the same pass
    /// does not try it again.
    static func recordFailure(
        seq: Int64, attempts: Int, error: String, retryAt: Int64?, at now: Int64, connection: PostgresConnection, logger: Logger
    ) async throws {
        let status = retryAt == nil ? InboxStatus.dead : InboxStatus.failed
        try await connection.query(
            """
            UPDATE inboxEvent SET status = \(status.rawValue), attempts = \(attempts), lastError = \(String(error.prefix(1000))),
                nextAttemptAt = \(retryAt), processedAt = \(now)
            WHERE seq = \(seq)
            """,
            logger: logger)
    }

    /// Whether the inbox holds a delivery's event, inside the caller's transaction.
    static func contains(_ delivery: InboxDelivery, connection: PostgresConnection, logger: Logger) async throws -> Bool {
        !(try await stored([delivery], connection: connection, logger: logger)).isEmpty
    }

    /// An event's identity in the inbox: one row per (event id, account, livemode).
    struct EventKey: Hashable {
        let id: String
        let account: String
        let livemode: Bool

        init(_ delivery: InboxDelivery) {
            (id, account, livemode) = (delivery.envelope.id, delivery.envelope.account ?? "", delivery.envelope.livemode)
        }

        init(id: String, account: String, livemode: Bool) {
            (self.id, self.account, self.livemode) = (id, account, livemode)
        }
    }

    /// Which of `deliveries` the inbox already holds, in one query.
    static func stored(_ deliveries: [InboxDelivery], connection: PostgresConnection, logger: Logger) async throws -> Set<EventKey> {
        let keys = deliveries.map(EventKey.init)
        let rows = try await connection.prepared(
            """
            SELECT e.eventID, e.account, e.livemode FROM inboxEvent e
            JOIN unnest(\(keys.map(\.id))::text[], \(keys.map(\.account))::text[], \(keys.map(\.livemode))::boolean[])
                AS k (eventID, account, livemode)
                ON e.eventID = k.eventID AND e.account = k.account AND e.livemode = k.livemode
            """,
            logger: logger)
        var found: Set<EventKey> = []
        for try await (id, account, livemode) in rows.decode((String, String, Bool).self) {
            found.insert(EventKey(id: id, account: account, livemode: livemode))
        }
        return found
    }

    /// A delivery in its final state, for ``insertFinal(_:connection:logger:)``.
    struct FinalRow {
        let delivery: InboxDelivery
        let status: InboxStatus
        var effect: ApplyEffect?
        let processedAt: Int64?
    }

    /// The PostgreSQL types of ``insertFinal(_:connection:logger:)``'s columns, in their order,
    /// cast explicitly so that a null binds as its column's type in a multi-row insert.
    private static let finalColumnTypes = [
        "text", "text", "boolean", "text", "text", "text", "bigint", "text", "text", "bigint", "text", "bigint", "text", "text",
        "bigint", "bigint",
    ]

    /// Inserts deliveries in their final state inside the caller's transaction (a group commit
    /// that applied them), in two statements whatever their number: the events, positions drawn
    /// in the rows' order, then their bodies. One position per row, in order; nil for a row
    /// whose event was stored meanwhile by a writer that does not take the event's lock
    /// (``insert(_:)``), which the caller must treat as a conflict.
    static func insertFinal(_ rows: [FinalRow], connection: PostgresConnection, logger: Logger) async throws -> [Int64?] {
        guard !rows.isEmpty else { return [] }
        var binds = PostgresBindings(capacity: rows.count * 16)
        var tuples: [String] = []
        tuples.reserveCapacity(rows.count)
        for row in rows {
            let (delivery, envelope) = (row.delivery, row.delivery.envelope)
            let first = binds.count + 1
            binds.append(envelope.id)
            binds.append(envelope.account ?? "")
            binds.append(envelope.livemode)
            binds.append(envelope.type)
            binds.append(delivery.subtype)
            binds.append(envelope.apiVersion)
            binds.append(envelope.created)
            binds.append(envelope.objectID)
            binds.append(envelope.objectType)
            binds.append(delivery.receivedAt)
            binds.append(delivery.source.rawValue)
            binds.append(delivery.secretIndex.map(Int64.init))
            binds.append(row.status.rawValue)
            binds.append(row.effect?.rawValue)
            binds.append(row.processedAt)
            binds.append(Int64(row.processedAt == nil ? 0 : 1))
            tuples.append("(" + finalColumnTypes.enumerated().map { "$\(first + $0.offset)::\($0.element)" }.joined(separator: ", ") + ")")
        }
        var seqs: [EventKey: Int64] = [:]
        let inserted = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO inboxEvent
                        (eventID, account, livemode, type, subtype, apiVersion, created, objectID, objectType, receivedAt, source,
                         secretIndex, status, effect, processedAt, attempts)
                    VALUES \(tuples.joined(separator: ", "))
                    ON CONFLICT (eventID, account, livemode) DO NOTHING
                    RETURNING seq, eventID, account, livemode
                    """,
                binds: binds),
            logger: logger)
        for try await (seq, id, account, livemode) in inserted.decode((Int64, String, String, Bool).self) {
            seqs[EventKey(id: id, account: account, livemode: livemode)] = seq
        }
        let positions = rows.map { seqs[EventKey($0.delivery)] }
        var bodySeqs: [Int64] = [], bodies: [ByteBuffer] = [], encodings: [Int64] = []
        for (row, seq) in zip(rows, positions) {
            guard let seq else { continue }
            bodySeqs.append(seq)
            bodies.append(ByteBuffer(bytes: row.delivery.stored.bytes))
            encodings.append(Int64(row.delivery.stored.encoding.rawValue))
        }
        if !bodySeqs.isEmpty {
            try await connection.prepared(
                """
                INSERT INTO inboxBody (seq, body, encoding)
                SELECT * FROM unnest(\(bodySeqs)::bigint[], \(bodies)::bytea[], \(encodings)::bigint[])
                """, logger: logger)
        }
        return positions
    }

    /// The lock key of an event's identity, for ``PostgresObjectLock``: a group commit holds it
    /// from its duplicate check to its commit, so another replica's commit of the same event
    /// waits and then finds it stored.
    static func lockKey(_ delivery: InboxDelivery) -> String {
        let envelope = delivery.envelope
        return "event/\(envelope.id)/\(envelope.account ?? "")/\(envelope.livemode)"
    }

    /// Inserts one delivery in its final state inside the caller's transaction (a group commit
    /// that applied it). Nil when the event was stored meanwhile by a writer that does not take
    /// the event's lock (``insert(_:)``), which the caller must treat as a conflict.
    static func insertFinal(
        _ delivery: InboxDelivery, status: InboxStatus, effect: ApplyEffect?, processedAt: Int64?, connection: PostgresConnection,
        logger: Logger
    ) async throws -> Int64? {
        let row = FinalRow(delivery: delivery, status: status, effect: effect, processedAt: processedAt)
        return try await insertFinal([row], connection: connection, logger: logger)[0]
    }

    /// Puts every event that still has its body back in the queue, as never tried, inside the
    /// caller's transaction (replay empties the ledger in the same one); one whose body was pruned
    /// keeps its status, as on SQLite.
    static func requeueEverything(connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            UPDATE inboxEvent SET status = \(InboxStatus.pending.rawValue), attempts = 0, nextAttemptAt = NULL, lastError = NULL,
                effect = NULL, processedAt = NULL, claimedBy = NULL
            WHERE EXISTS (SELECT 1 FROM inboxBody b WHERE b.seq = inboxEvent.seq)
            """,
            logger: logger)
    }

    /// The events about one object, in inbox position order, as `inspect` shows them.
    static func events(about objectID: String, client: PostgresClient, logger: Logger) async throws -> [[String: any Sendable]] {
        let rows = try await client.query(
            "SELECT eventID, type, created, status, effect FROM inboxEvent WHERE objectID = \(objectID) ORDER BY seq", logger: logger)
        var events: [[String: any Sendable]] = []
        for try await (eventID, type, created, status, effect) in rows.decode((String, String, Int64, String, String?).self) {
            events.append([
                "event_id": eventID, "type": type, "created": created, "status": status,
                "effect": effect.map { $0 as any Sendable } ?? LedgerJSON(NSNull()),
            ])
        }
        return events
    }
}
