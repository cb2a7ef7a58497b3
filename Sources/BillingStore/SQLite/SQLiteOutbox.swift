import BillingCore
import Foundation
import GRDB

/// The SQLite ``OutboxStore``, and the announcing step every ledger transaction runs before it
/// commits (``announce(_:policy:now:db:)``). One owner of the outbox tables.
public struct SQLiteOutbox: OutboxStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    // MARK: - Announcing, inside the caller's transaction

    /// For each user `touches` reaches, diffs their view with the last announced one, keeps the
    /// new state and queues the events. `now` is Unix ms.
    static func announce(_ touches: OutboxTouches, policy: OutboxPolicy, now: Int64, db: Database) throws {
        guard !touches.isEmpty else { return }
        var users = touches.users
        let byCustomer = try db.cachedStatement(sql: """
            SELECT appUserID FROM customer WHERE account = ? AND livemode = ? AND id = ? AND appUserID IS NOT NULL AND appUserID <> ''
            UNION SELECT appUserID FROM userLink WHERE account = ? AND livemode = ? AND customer = ?
            """)
        var usersOfCustomer: [OutboxTouches.Customer: [String]] = [:]
        for customer in touches.customers {
            let (account, livemode) = (customer.scope.account, customer.scope.livemode)
            let found = try String.fetchAll(byCustomer, arguments: [account, livemode, customer.id, account, livemode, customer.id])
            usersOfCustomer[customer] = found
            for user in found { users.insert(.init(scope: customer.scope, user: user)) }
        }
        let byPurchase = try db.cachedStatement(
            sql: "SELECT appUserID FROM appStoreOwner WHERE environment = ? AND originalTransactionID = ?")
        for purchase in touches.purchases {
            let scope = ServiceScope(livemode: purchase.environment == "Production")
            for user in try String.fetchAll(byPurchase, arguments: [purchase.environment, purchase.originalTransactionID]) {
                users.insert(.init(scope: scope, user: user))
            }
        }
        // A stable order, so that events of one transaction are queued the same way each time.
        for touched in users.sorted(by: { ($0.scope.livemode ? 1 : 0, $0.scope.account, $0.user) < ($1.scope.livemode ? 1 : 0, $1.scope.account, $1.user) }) {
            try announce(user: touched.user, scope: touched.scope, policy: policy, now: now, db: db)
        }
        // A refund is a fact, not a change of view: announced after the views, to the users of
        // the charge's customer as found above, when the ledger's invoice is a subscription's.
        guard !policy.endpoints.isEmpty else { return }
        let invoiceSubscription = try db.cachedStatement(sql: "SELECT subscription FROM invoice WHERE account = ? AND livemode = ? AND id = ?")
        for refund in touches.refunds {
            let (account, livemode) = (refund.scope.account, refund.scope.livemode)
            guard let subscription = try String.fetchOne(invoiceSubscription, arguments: [account, livemode, refund.invoice]),
                !subscription.isEmpty
            else { continue }
            for user in (usersOfCustomer[OutboxTouches.Customer(scope: refund.scope, id: refund.customer)] ?? []).sorted() {
                let billing = try SQLiteUsers.billing(of: user, in: refund.scope, db: db)
                let event = OutboxAnnouncer.refunded(refund, subscription: subscription, billing: billing, policy: policy, nowMilliseconds: now)
                _ = try insert(event, endpoints: policy.endpoints, db: db)
            }
        }
    }

    static func announce(user: String, scope: ServiceScope, policy: OutboxPolicy, now: Int64, db: Database) throws {
        let key: StatementArguments = [scope.account, scope.livemode, user]
        let kept = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT state, reviewAt FROM outboxUserState WHERE account = ? AND livemode = ? AND user = ?"),
            arguments: key)
        let billing = try SQLiteUsers.billing(of: user, in: scope, db: db)
        let announced = OutboxAnnouncer.announce(billing: billing, kept: kept?[0], policy: policy, nowMilliseconds: now)
        if announced.changed {
            try db.cachedStatement(sql: """
                INSERT INTO outboxUserState (account, livemode, user, state, updatedAt, reviewAt) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (account, livemode, user) DO UPDATE
                    SET state = excluded.state, updatedAt = excluded.updatedAt, reviewAt = excluded.reviewAt
                """).execute(arguments: key + [announced.text, now, announced.reviewAt])
        } else if let kept, (kept[1] as Int64?) != announced.reviewAt {
            try db.cachedStatement(sql: "UPDATE outboxUserState SET reviewAt = ? WHERE account = ? AND livemode = ? AND user = ?")
                .execute(arguments: [announced.reviewAt] + key)
        }
        if announced.entitlementChanged {
            try db.cachedStatement(sql: TimelineRows.insertEntitlementChangeSQL).execute(
                arguments: StatementArguments(TimelineRows.entitlementChangeArguments(announced, user: user, scope: scope, now: now).map(\.databaseValue)))
        }
        for event in announced.events {
            _ = try insert(event, endpoints: policy.endpoints, db: db)
        }
    }

    /// Announces what time alone changed: each user whose kept view was due for review by the
    /// policy's clock is resolved again, in one transaction per batch. Returns how many users
    /// were looked at (fewer than `limit`: none is left due).
    static func announceLapsed(policy: OutboxPolicy, now: Int64, limit: Int, db: Database) throws -> Int {
        let due = try Row.fetchAll(
            db.cachedStatement(sql: """
                SELECT account, livemode, user FROM outboxUserState WHERE reviewAt <= ?
                ORDER BY reviewAt, livemode, account, user LIMIT ?
                """),
            arguments: [policy.now() * 1000, limit])
        for row in due {
            try announce(user: row[2], scope: ServiceScope(account: row[0], livemode: row[1]), policy: policy, now: now, db: db)
        }
        return due.count
    }

    /// Queues `usage.limit_reached` when a meter's state is at its limit for the first time in
    /// its period; a gauge back under its limit may announce again.
    static func announceUsage(_ state: UsageMeterState, scope: ServiceScope, user: String, policy: OutboxPolicy, now: Int64, db: Database) throws {
        guard state.limitCount != nil else { return }
        let key: StatementArguments = [scope.account, scope.livemode, user, state.meter.id, state.period?.start ?? 0]
        guard OutboundEventRules.limitReached(state) else {
            if state.period == nil {
                try db.cachedStatement(
                    sql: "DELETE FROM outboxUsageLimit WHERE account = ? AND livemode = ? AND user = ? AND meter = ? AND periodStart = ?"
                ).execute(arguments: key)
            }
            return
        }
        try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO outboxUsageLimit (account, livemode, user, meter, periodStart, reachedAt) VALUES (?, ?, ?, ?, ?, ?)"
        ).execute(arguments: key + [now])
        guard db.changesCount > 0, !policy.endpoints.isEmpty else { return }
        _ = try insert(
            OutboxAnnouncer.limitReached(state, scope: scope, user: user, policy: policy, nowMilliseconds: now), endpoints: policy.endpoints,
            db: db)
    }

    static func insert(_ event: OutboxDraft, endpoints: [String], db: Database) throws -> [Int64] {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO outboxEvent (id, endpoint, type, account, livemode, user, userKey, createdAt, payload, status, nextAttemptAt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        var seqs: [Int64] = []
        for endpoint in endpoints {
            try statement.execute(arguments: [
                event.id, endpoint, event.type, event.scope.account, event.scope.livemode, event.user,
                OutboxAnnouncer.userKey(scope: event.scope, user: event.user), event.createdAt, Data(event.payload),
                OutboxStatus.pending.rawValue, event.createdAt,
            ])
            seqs.append(db.lastInsertedRowID)
        }
        return seqs
    }

    // MARK: - The queue

    static let columns = """
        seq, id, endpoint, type, account, livemode, user, createdAt, payload, status, attempts, nextAttemptAt, lastError, deliveredAt
        """

    static func message(_ row: Row) -> OutboxMessage {
        OutboxMessage(
            seq: row[0],
            event: OutboxDraft(
                id: row[1], type: row[3], scope: ServiceScope(account: row[4], livemode: row[5]), user: row[6], createdAt: row[7],
                payload: (row[8] as Data?).map { Array($0) } ?? []),
            endpoint: row[2], status: OutboxStatus(rawValue: row[9]) ?? .pending, attempts: row[10], nextAttemptAt: row[11],
            lastError: row[12], deliveredAt: row[13])
    }

    /// The endpoints with events waiting that are not disabled: a skip over `outboxEvent_due`,
    /// one index lookup per endpoint however long its backlog.
    static let sendableEndpoints = """
        WITH RECURSIVE waiting(url) AS (
            SELECT MIN(endpoint) FROM outboxEvent INDEXED BY outboxEvent_due WHERE status IN ('pending', 'failed')
            UNION ALL
            SELECT (SELECT MIN(endpoint) FROM outboxEvent INDEXED BY outboxEvent_due
                    WHERE status IN ('pending', 'failed') AND endpoint > waiting.url)
            FROM waiting WHERE waiting.url IS NOT NULL)
        SELECT url FROM waiting WHERE url IS NOT NULL AND url NOT IN (SELECT url FROM outboxEndpoint)
        """

    public func due(now: Int64, limit: Int, excluding: Set<String>) async throws -> [OutboxMessage] {
        try await database.writer.read { db in
            let endpoints = try String.fetchAll(db.cachedStatement(sql: Self.sendableEndpoints)).filter { !excluding.contains($0) }
            guard !endpoints.isEmpty else { return [] }
            // Each endpoint its share of the pass; each user's oldest waiting event only.
            let share = max(1, limit / endpoints.count)
            let statement = try db.cachedStatement(sql: """
                SELECT \(Self.columns) FROM outboxEvent e INDEXED BY outboxEvent_due
                WHERE e.endpoint = ? AND e.status IN ('pending', 'failed') AND e.nextAttemptAt <= ?
                    AND NOT EXISTS (
                        SELECT 1 FROM outboxEvent f
                        WHERE f.endpoint = e.endpoint AND f.userKey = e.userKey AND f.status IN ('pending', 'failed') AND f.seq < e.seq)
                ORDER BY e.nextAttemptAt, e.seq
                LIMIT ?
                """)
            var due: [OutboxMessage] = []
            for endpoint in endpoints {
                due += try Row.fetchAll(statement, arguments: [endpoint, now, share]).map(Self.message)
            }
            return due.sorted { ($0.nextAttemptAt ?? 0, $0.seq) < ($1.nextAttemptAt ?? 0, $1.seq) }
        }
    }

    public func record(_ attempts: [OutboxAttempt]) async throws {
        guard !attempts.isEmpty else { return }
        try await database.writer.write { db in
            let update = try db.cachedStatement(sql: """
                UPDATE outboxEvent SET status = ?, attempts = attempts + 1, nextAttemptAt = ?, lastError = ?, deliveredAt = ?
                WHERE seq = ?
                """)
            for attempt in attempts {
                switch attempt.outcome {
                case .delivered:
                    try update.execute(arguments: [OutboxStatus.delivered.rawValue, nil, nil, attempt.at, attempt.seq])
                case .failed(let error, let retryAt):
                    try update.execute(arguments: [OutboxStatus.failed.rawValue, retryAt, error, nil, attempt.seq])
                case .dead(let error):
                    try update.execute(arguments: [OutboxStatus.dead.rawValue, nil, error, nil, attempt.seq])
                case .gone:
                    // Not an attempt of the event's: it waits, pending, for the endpoint to come back.
                    try db.execute(
                        sql: "UPDATE outboxEvent SET lastError = '410 Gone: endpoint disabled' WHERE seq = ?", arguments: [attempt.seq])
                }
            }
        }
    }

    public func list(status: OutboxStatus?, limit: Int) async throws -> [OutboxMessage] {
        try await database.writer.read { db in
            if let status {
                return try Row.fetchAll(
                    db, sql: "SELECT \(Self.columns) FROM outboxEvent WHERE status = ? ORDER BY seq DESC LIMIT ?",
                    arguments: [status.rawValue, limit]
                ).map(Self.message)
            }
            return try Row.fetchAll(db, sql: "SELECT \(Self.columns) FROM outboxEvent ORDER BY seq DESC LIMIT ?", arguments: [limit])
                .map(Self.message)
        }
    }

    public func retry(id: String, now: Int64) async throws -> Int {
        try await database.writer.write { db in
            try db.execute(
                sql: "UPDATE outboxEvent SET status = 'pending', nextAttemptAt = ? WHERE id = ? AND status IN ('failed', 'dead')",
                arguments: [now, id])
            return db.changesCount
        }
    }

    public func retryAllDead(now: Int64) async throws -> Int {
        try await database.writer.write { db in
            try db.execute(sql: "UPDATE outboxEvent SET status = 'pending', nextAttemptAt = ? WHERE status = 'dead'", arguments: [now])
            return db.changesCount
        }
    }

    public func depth() async throws -> OutboxDepth {
        try await database.writer.read { db in
            var counts: [OutboxStatus: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT status, COUNT(*) FROM outboxEvent GROUP BY status") {
                if let status = OutboxStatus(rawValue: row[0]) { counts[status] = row[1] }
            }
            let oldest = try Int64.fetchOne(db, sql: OutboxDepth.oldestWaitingSQL)
            return OutboxDepth(counts: counts, oldestUndeliveredAt: oldest)
        }
    }

    public func disableEndpoint(_ url: String, at: Int64, reason: String) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: "INSERT INTO outboxEndpoint (url, disabledAt, reason) VALUES (?, ?, ?) ON CONFLICT (url) DO NOTHING",
                arguments: [url, at, reason])
        }
    }

    public func enableEndpoint(_ url: String) async throws -> Bool {
        try await database.writer.write { db in
            try db.execute(sql: "DELETE FROM outboxEndpoint WHERE url = ?", arguments: [url])
            return db.changesCount > 0
        }
    }

    public func disabledEndpoints() async throws -> [String: Int64] {
        try await database.writer.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT url, disabledAt FROM outboxEndpoint").map { (row: Row) -> (String, Int64) in (row[0], row[1]) })
        }
    }

    public func announceLapsed(now: Int64, limit: Int) async throws -> Int {
        guard let policy = database.outbox else { return 0 }
        return try await database.writer.write { db in try Self.announceLapsed(policy: policy, now: now, limit: limit, db: db) }
    }

    public func nextReview() async throws -> Int64? {
        try await database.writer.read { db in try Int64.fetchOne(db, sql: "SELECT MIN(reviewAt) FROM outboxUserState") }
    }

    public func enqueue(_ event: OutboxDraft, endpoints: [String], now: Int64) async throws -> [OutboxMessage] {
        try await database.writer.write { db in
            let seqs = try Self.insert(event, endpoints: endpoints, db: db)
            return try seqs.compactMap { seq in
                try Row.fetchOne(db, sql: "SELECT \(Self.columns) FROM outboxEvent WHERE seq = ?", arguments: [seq]).map(Self.message)
            }
        }
    }
}
