import BillingCore
import Logging
import NIOCore
import PostgresNIO

/// The inbox on PostgreSQL, and the only type that spells its SQL there: the same rows and
/// semantics as SQLite/SQLiteInbox.swift on SQLite (account '' for the platform account, one row per
/// (event id, account, livemode), ``InboxStatus`` the only spelling of a status), shared by every
/// replica: a delivery that reaches two of them is stored once, and both learn it is stored.
///
/// One difference in order: a position (`seq`) is drawn when a row is inserted, not when it is
/// committed, so across concurrent transactions (two replicas, or two group commits) a lower
/// position can become visible after a higher one. Within one insert positions follow arrival;
/// a reader that pages by ``InboxFilter/afterSeq`` while deliveries arrive can miss a row that
/// commits late, which is why the applier to come claims rows instead of walking positions.
struct PostgresInbox: EventInbox {
    let client: PostgresClient
    let logger: Logger

    // MARK: Writing deliveries

    /// Stores deliveries for the applier in one transaction, in order; one outcome per delivery.
    func insert(_ deliveries: [InboxDelivery]) async throws -> [InboxInsertOutcome] {
        guard !deliveries.isEmpty else { return [] }
        return try await client.transaction(logger: logger) { connection in
            try await Self.insert(deliveries, status: .pending, connection: connection, logger: logger)
        }
    }

    /// Inserts deliveries inside the caller's transaction, deduplicating by key.
    ///
    /// Positions (`seq`) are drawn first, in arrival order, and the rows are then written in key
    /// order: two replicas' transactions that hold some of the same events take their row locks
    /// in one order, so they wait for each other instead of deadlocking. Within one call the first
    /// of two deliveries with one key is the one stored, as on SQLite.
    static func insert(
        _ deliveries: [InboxDelivery], status: InboxStatus, connection: PostgresConnection, logger: Logger
    ) async throws -> [InboxInsertOutcome] {
        var seqs: [Int64] = []
        seqs.reserveCapacity(deliveries.count)
        let drawn = try await connection.query(
            "SELECT nextval(pg_get_serial_sequence('inboxEvent', 'seq')) FROM generate_series(1, \(deliveries.count))",
            logger: logger)
        for try await seq in drawn.decode(Int64.self) { seqs.append(seq) }
        seqs.sort()

        let keyOrder = deliveries.indices.sorted { left, right in
            let a = deliveries[left].envelope, b = deliveries[right].envelope
            let keyA = (a.id, a.account ?? "", a.livemode ? 1 : 0), keyB = (b.id, b.account ?? "", b.livemode ? 1 : 0)
            return keyA != keyB ? keyA < keyB : left < right
        }
        var outcomes = [InboxInsertOutcome](repeating: .duplicate, count: deliveries.count)
        for index in keyOrder {
            let delivery = deliveries[index], envelope = delivery.envelope
            let rows = try await connection.query(
                """
                WITH event AS (
                    INSERT INTO inboxEvent
                        (seq, eventID, account, livemode, type, subtype, apiVersion, created, objectID, objectType,
                         receivedAt, source, secretIndex, status, attempts)
                    VALUES (\(seqs[index]), \(envelope.id), \(envelope.account ?? ""), \(envelope.livemode), \(envelope.type),
                        \(delivery.subtype), \(envelope.apiVersion), \(envelope.created), \(envelope.objectID),
                        \(envelope.objectType), \(delivery.receivedAt), \(delivery.source.rawValue),
                        \(delivery.secretIndex.map(Int64.init)), \(status.rawValue), 0)
                    ON CONFLICT (eventID, account, livemode) DO NOTHING
                    RETURNING seq)
                INSERT INTO inboxBody (seq, body, encoding)
                    SELECT seq, \(ByteBuffer(bytes: delivery.stored.bytes)), \(delivery.stored.encoding.rawValue) FROM event
                RETURNING seq
                """,
                logger: logger)
            for try await seq in rows.decode(Int64.self) { outcomes[index] = .stored(seq: seq) }
        }
        return outcomes
    }

    // MARK: Operator actions

    /// Re-queues one failed or dead event of an account and mode (invariant 4: an id alone may
    /// name events of several); returns whether it was found in such a state.
    func retry(eventID: String, account: String?, livemode: Bool) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE inboxEvent SET status = \(InboxStatus.pending.rawValue), attempts = 0, nextAttemptAt = NULL
            WHERE eventID = \(eventID) AND account = \(account ?? "") AND livemode = \(livemode)
                AND status IN (\(unescaped: InboxStatus.sqlList(InboxStatus.unapplied)))
            RETURNING seq
            """,
            logger: logger)
        var found = false
        for try await _ in rows { found = true }
        return found
    }

    /// Re-queues every failed and dead event; returns how many.
    func retryAllFailed() async throws -> Int {
        try await single(
            """
            WITH requeued AS (
                UPDATE inboxEvent SET status = \(InboxStatus.pending.rawValue), attempts = 0, nextAttemptAt = NULL
                WHERE status IN (\(unescaped: InboxStatus.sqlList(InboxStatus.unapplied)))
                RETURNING 1)
            SELECT count(*) FROM requeued
            """, as: Int.self) ?? 0
    }

    // MARK: Reading

    /// Lists stored events in commit order, without their bodies.
    func list(_ filter: InboxFilter) async throws -> [InboxEvent] {
        var clauses: [String] = []
        var binds = PostgresBindings()
        if !filter.statuses.isEmpty {
            // Literals from InboxStatus, never input, so that the planner can use the partial work index.
            clauses.append("status IN (\(InboxStatus.sqlList(filter.statuses)))")
        }
        for (column, value) in [("type", filter.type), ("objectID", filter.objectID), ("eventID", filter.eventID)] {
            guard let value else { continue }
            binds.append(value)
            clauses.append("\(column) = $\(binds.count)")
        }
        if let after = filter.afterSeq {
            binds.append(after)
            clauses.append("seq > $\(binds.count)")
        }
        binds.append(filter.limit)
        let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
        let rows = try await client.query(
            PostgresQuery(
                unsafeSQL: "SELECT \(InboxEvent.columns) FROM inboxEvent \(whereClause) ORDER BY seq LIMIT $\(binds.count)",
                binds: binds),
            logger: logger)
        var events: [InboxEvent] = []
        for try await row in rows { events.append(try Self.event(from: row)) }
        return events
    }

    /// The raw body of a stored event of an account and mode, byte for byte as received.
    func body(eventID: String, account: String?, livemode: Bool) async throws -> [UInt8]? {
        let rows = try await client.query(
            """
            SELECT b.body, b.encoding FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
            WHERE e.eventID = \(eventID) AND e.account = \(account ?? "") AND e.livemode = \(livemode)
            """,
            logger: logger)
        for try await (body, encoding) in rows.decode((ByteBuffer, Int).self) {
            return try StoredBody.decode(Array(body.readableBytesView), encoding: encoding)
        }
        return nil
    }

    /// Number of events in each status.
    func countsByStatus() async throws -> [InboxStatus: Int] {
        var counts = Dictionary(uniqueKeysWithValues: InboxStatus.allCases.map { ($0, 0) })
        let rows = try await client.query("SELECT status, count(*) FROM inboxEvent GROUP BY status", logger: logger)
        for try await (status, count) in rows.decode((String, Int).self) {
            if let status = InboxStatus(rawValue: status) { counts[status] = count }
        }
        return counts
    }

    /// Total number of stored events.
    func count() async throws -> Int {
        try await single("SELECT count(*) FROM inboxEvent", as: Int.self) ?? 0
    }

    /// Whether an event is already stored for an account and mode.
    func contains(eventID: String, account: String?, livemode: Bool) async throws -> Bool {
        try await single(
            """
            SELECT EXISTS (SELECT 1 FROM inboxEvent WHERE eventID = \(eventID) AND account = \(account ?? "") AND livemode = \(livemode))
            """, as: Bool.self) ?? false
    }

    /// The work queue's depth, for metrics.
    func depth() async throws -> InboxDepth {
        let queued = InboxStatus.waiting + [.dead]
        var counts = Dictionary(uniqueKeysWithValues: queued.map { ($0, 0) })
        let rows = try await client.query(
            "SELECT status, count(*) FROM inboxEvent WHERE status IN (\(unescaped: InboxStatus.sqlList(queued))) GROUP BY status",
            logger: logger)
        for try await (status, count) in rows.decode((String, Int).self) {
            if let status = InboxStatus(rawValue: status) { counts[status] = count }
        }
        // The lowest waiting seq is the oldest arrival, found through the work index.
        let oldest = try await single(
            """
            SELECT receivedAt FROM inboxEvent WHERE status IN (\(unescaped: InboxStatus.sqlList(InboxStatus.waiting)))
            ORDER BY seq LIMIT 1
            """, as: Int64.self)
        return InboxDepth(counts: counts, oldestPendingReceivedAt: oldest)
    }

    // MARK: Rows

    /// The first column of the first row, if any.
    private func single<Value: PostgresDecodable>(_ query: PostgresQuery, as type: Value.Type) async throws -> Value? {
        let rows = try await client.query(query, logger: logger)
        for try await value in rows.decode(Value.self) { return value }
        return nil
    }

    /// An event from the columns of ``InboxEvent/columns``, in their order.
    static func event(from row: PostgresRow) throws -> InboxEvent {
        let (
            seq, eventID, account, livemode, type, subtype, apiVersion, created, objectID, objectType, receivedAt, source,
            status, attempts, lastError, effect
        ) = try row.decode(
            (Int64, String, String, Bool, String, String?, String?, Int64, String?, String?, Int64, String, String, Int,
             String?, String?).self)
        var event = InboxEvent(
            seq: seq, eventID: eventID, account: account.isEmpty ? nil : account, livemode: livemode, type: type,
            apiVersion: apiVersion, created: created, objectID: objectID, objectType: objectType, receivedAt: receivedAt,
            source: InboxSource(rawValue: source) ?? .webhook, status: InboxStatus(rawValue: status) ?? .pending,
            attempts: attempts, lastError: lastError, effect: effect)
        event.subtype = subtype
        return event
    }
}
