import BillingCore
import Foundation
import GRDB

/// The inbox on SQLite: durable deliveries, deduplicated by (event id, account, livemode).
public struct InboxStore: InboxWriting {
    let database: LedgerDatabase

    public init(database: LedgerDatabase) {
        self.database = database
    }

    private static let insertSQL = """
        INSERT INTO inboxEvent
            (eventID, account, livemode, type, subtype, apiVersion, created, objectID, objectType,
             receivedAt, source, secretIndex, status)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (eventID, account, livemode) DO NOTHING
        """

    public func insert(_ deliveries: [InboxDelivery]) async throws -> [InboxInsertOutcome] {
        try await database.writer.write { db in try Self.insert(deliveries, status: .pending, db: db) }
    }

    /// Inserts deliveries inside the caller's transaction, deduplicating by key. `status` is
    /// `pending` for the applier, or `applied` for a caller that applies them in the same
    /// transaction (and then records the effect with ``recordApplied(seq:effect:at:db:)``).
    static func insert(_ deliveries: [InboxDelivery], status: InboxStatus, db: Database) throws -> [InboxInsertOutcome] {
        let statement = try db.cachedStatement(sql: Self.insertSQL)
        let insertBody = try db.cachedStatement(sql: "INSERT INTO inboxBody (seq, body) VALUES (?, ?)")
        var outcomes: [InboxInsertOutcome] = []
        outcomes.reserveCapacity(deliveries.count)
        for delivery in deliveries {
            let envelope = delivery.envelope
            try statement.execute(arguments: [
                envelope.id, envelope.account ?? "", envelope.livemode, envelope.type, delivery.subtype,
                envelope.apiVersion, envelope.created, envelope.objectID, envelope.objectType,
                delivery.receivedAt, delivery.source.rawValue, delivery.secretIndex, status.rawValue,
            ])
            if db.changesCount == 1 {
                let seq = db.lastInsertedRowID
                try insertBody.execute(arguments: [seq, Data(delivery.body)])
                outcomes.append(.stored(seq: seq))
            } else {
                outcomes.append(.duplicate)
            }
        }
        return outcomes
    }

    /// Records the outcome of an event applied by the caller inside its transaction.
    static func recordApplied(seq: Int64, effect: ApplyEffect, at now: Int64, db: Database) throws {
        try db.cachedStatement(sql: "UPDATE inboxEvent SET status = ?, effect = ?, processedAt = ?, attempts = attempts + 1 WHERE seq = ?")
            .execute(arguments: [InboxStatus.applied.rawValue, effect.rawValue, now, seq])
    }

    /// Filters for ``list(_:)``.
    public struct Filter: Sendable {
        public var statuses: [InboxStatus] = []
        public var type: String?
        public var objectID: String?
        public var afterSeq: Int64?
        public var limit: Int = 100

        public init(statuses: [InboxStatus] = [], type: String? = nil, objectID: String? = nil, afterSeq: Int64? = nil, limit: Int = 100) {
            self.statuses = statuses
            self.type = type
            self.objectID = objectID
            self.afterSeq = afterSeq
            self.limit = limit
        }
    }

    static let summaryColumns = """
        seq, eventID, account, livemode, type, subtype, apiVersion, created, objectID, objectType,
        receivedAt, source, status, attempts, lastError, effect
        """

    /// Lists stored events in commit order, without their bodies.
    public func list(_ filter: Filter) async throws -> [InboxEvent] {
        try await database.writer.read { db in
            var clauses: [String] = []
            var arguments: StatementArguments = []
            if !filter.statuses.isEmpty {
                clauses.append("status IN (\(filter.statuses.map { _ in "?" }.joined(separator: ",")))")
                for status in filter.statuses { _ = arguments.append(contentsOf: [status.rawValue]) }
            }
            if let type = filter.type {
                clauses.append("type = ?")
                _ = arguments.append(contentsOf: [type])
            }
            if let objectID = filter.objectID {
                clauses.append("objectID = ?")
                _ = arguments.append(contentsOf: [objectID])
            }
            if let after = filter.afterSeq {
                clauses.append("seq > ?")
                _ = arguments.append(contentsOf: [after])
            }
            let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
            let rows = try Row.fetchAll(
                db, sql: "SELECT \(Self.summaryColumns) FROM inboxEvent \(whereClause) ORDER BY seq LIMIT ?",
                arguments: arguments + [filter.limit])
            return rows.map(Self.event(from:))
        }
    }

    /// The raw body of a stored event.
    public func body(eventID: String) async throws -> [UInt8]? {
        try await database.writer.read { db in
            try Data.fetchOne(db, sql: "SELECT b.body FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq WHERE e.eventID = ? ORDER BY e.seq LIMIT 1", arguments: [eventID]).map { Array($0) }
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
        try await database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM inboxEvent") ?? 0 }
    }

    /// Whether an event id is already stored (any account or mode).
    public func contains(eventID: String, account: String?, livemode: Bool) async throws -> Bool {
        try await database.writer.read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS(SELECT 1 FROM inboxEvent WHERE eventID = ? AND account = ? AND livemode = ?)",
                arguments: [eventID, account ?? "", livemode]) ?? false
        }
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

extension InboxStore {
    /// Inbox depth for metrics: events per status of the work queue, and when the oldest
    /// pending one arrived (Unix ms).
    public struct Depth: Sendable {
        public var counts: [InboxStatus: Int]
        public var oldestPendingReceivedAt: Int64?
    }

    public func depth() async throws -> Depth {
        try await database.writer.read { db in
            var counts: [InboxStatus: Int] = [.pending: 0, .failed: 0, .dead: 0]
            for row in try Row.fetchAll(
                db, sql: "SELECT status, COUNT(*) AS n FROM inboxEvent WHERE status IN ('pending', 'failed', 'dead') GROUP BY status")
            {
                if let status = InboxStatus(rawValue: row["status"]) { counts[status] = row["n"] }
            }
            // Commit order is arrival order: the lowest waiting seq is the oldest, found
            // through the work index instead of a scan of the whole inbox.
            let oldest = try Int64.fetchOne(
                db, sql: "SELECT receivedAt FROM inboxEvent WHERE status IN ('pending', 'failed') ORDER BY seq LIMIT 1")
            return Depth(counts: counts, oldestPendingReceivedAt: oldest)
        }
    }
}
