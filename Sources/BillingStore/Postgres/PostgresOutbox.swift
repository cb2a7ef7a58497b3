import BillingCore
import Logging
import NIOCore
import PostgresNIO

/// The outbox on PostgreSQL: the twin of SQLite/SQLiteOutbox.swift, one owner of the outbox tables, with
/// the same announcing step (``OutboxAnnouncer`` decides, this type reads and writes) run inside
/// the ledger transaction of the change.
///
/// Several replicas send from one outbox. Each takes due rows with `FOR UPDATE SKIP LOCKED` and
/// pushes their `nextAttemptAt` a lease ahead in the same statement, so two replicas never send
/// one row at once; a replica killed mid-send leaves rows that fall due again when the lease
/// runs out (at least once, as the app's receiver expects). A user's next event still waits for
/// the previous one to be delivered or dead, whichever replica sends it.
struct PostgresOutbox: OutboxStore {
    let client: PostgresClient
    let logger: Logger
    /// How the store's ledger transactions announce; the review of lapsed views uses it too.
    var policy: OutboxPolicy?
    /// How long a replica holds the rows it took before another may send them (Unix ms): longer
    /// than the sender's request timeout, so that a slow endpoint is not sent to twice.
    var sendLease: Int64 = 120_000

    // MARK: - Announcing, inside the caller's transaction

    /// For each user `touches` reaches, diffs their view with the last announced one, keeps the
    /// new state and queues the events. `now` is Unix ms.
    static func announce(
        _ touches: OutboxTouches, policy: OutboxPolicy, now: Int64, connection: PostgresConnection, logger: Logger
    ) async throws {
        guard !touches.isEmpty else { return }
        var users = touches.users
        var usersOfCustomer: [OutboxTouches.Customer: [String]] = [:]
        let reader = PostgresUsers.Reader(connection: connection, logger: logger)
        for (scope, customers) in Dictionary(grouping: touches.customers, by: \.scope) {
            // The app's users of a Stripe customer: by its metadata, and by Checkout's links.
            var found = Array(repeating: [String](), count: customers.count)
            try await reader.forEachRow(
                """
                SELECT appUserID FROM customer WHERE account = ? AND livemode = ? AND id = ? AND appUserID IS NOT NULL AND appUserID <> ''
                UNION SELECT appUserID FROM userLink WHERE account = ? AND livemode = ? AND customer = ?
                """,
                [.text(scope.account), .boolean(scope.livemode), nil, .text(scope.account), .boolean(scope.livemode), nil],
                forEach: customers.map(\.id)
            ) { index, row in
                if let user = row.string(0) { found[index].append(user) }
            }
            for (customer, found) in zip(customers, found) {
                usersOfCustomer[customer] = found
                for user in found { users.insert(.init(scope: scope, user: user)) }
            }
        }
        for purchase in touches.purchases {
            let scope = ServiceScope(livemode: purchase.environment == "Production")
            let rows = try await connection.prepared(
                """
                SELECT appUserID FROM appStoreOwner
                WHERE environment = \(purchase.environment) AND originalTransactionID = \(purchase.originalTransactionID)
                """, logger: logger)
            for try await user in rows.decode(String.self) { users.insert(.init(scope: scope, user: user)) }
        }
        // A stable order, so that events of one transaction are queued the same way each time,
        // and two transactions lock users' state rows in one order.
        let ordered = users.sorted {
            ($0.scope.livemode ? 1 : 0, $0.scope.account, $0.user) < ($1.scope.livemode ? 1 : 0, $1.scope.account, $1.user)
        }
        try await announce(users: ordered, policy: policy, now: now, connection: connection, logger: logger)
        // A refund is a fact, not a change of view: announced after the views, to the users of
        // the charge's customer as found above (whose locks were taken; a link committed since
        // is not read again), when the ledger's invoice is a subscription's.
        guard !policy.endpoints.isEmpty else { return }
        for refund in touches.refunds {
            let (account, livemode) = (refund.scope.account, refund.scope.livemode)
            var subscription: String?
            for try await row in try await connection.prepared(
                "SELECT subscription FROM invoice WHERE account = \(account) AND livemode = \(livemode) AND id = \(refund.invoice)",
                logger: logger)
            {
                subscription = try row.decode(String?.self)
            }
            guard let subscription, !subscription.isEmpty else { continue }
            for user in (usersOfCustomer[OutboxTouches.Customer(scope: refund.scope, id: refund.customer)] ?? []).sorted() {
                let billing = try await reader.billing(of: user, in: refund.scope)
                let event = OutboxAnnouncer.refunded(refund, subscription: subscription, billing: billing, policy: policy, nowMilliseconds: now)
                _ = try await insert(event, endpoints: policy.endpoints, connection: connection, logger: logger)
            }
        }
    }

    /// Announces one user's change (see ``announce(users:policy:now:connection:logger:)``).
    static func announce(
        user: String, scope: ServiceScope, policy: OutboxPolicy, now: Int64, connection: PostgresConnection, logger: Logger
    ) async throws {
        try await announce(users: [.init(scope: scope, user: user)], policy: policy, now: now, connection: connection, logger: logger)
    }

    /// Announces users' changes, in a number of statements that does not grow with theirs. Each
    /// user's state row is locked first, in `users`' order, so that two replicas changing one
    /// user's view announce one after the other, each diffing with what the other announced.
    static func announce(
        users: [OutboxTouches.User], policy: OutboxPolicy, now: Int64, connection: PostgresConnection, logger: Logger
    ) async throws {
        guard !users.isEmpty else { return }
        // An aggregate over unnest calls the lock function row after row, in the array's order.
        try await connection.prepared(
            """
            SELECT count(pg_advisory_xact_lock(hashtextextended(k, 1)))
            FROM unnest(\(users.map { OutboxAnnouncer.userKey(scope: $0.scope, user: $0.user) })::text[]) AS k
            """, logger: logger)
        var states = Rows(), reviews = Rows(), changes: [[LedgerValue]] = [], events: [OutboxDraft] = []
        var scopes: [ServiceScope] = []
        var usersIn: [ServiceScope: [String]] = [:]
        for touched in users {
            if usersIn[touched.scope] == nil { scopes.append(touched.scope) }
            usersIn[touched.scope, default: []].append(touched.user)
        }
        for scope in scopes {
            let names = usersIn[scope] ?? []
            var kept: [String: (state: String, reviewAt: Int64?)] = [:]
            for try await (user, state, reviewAt) in try await connection.prepared(
                """
                SELECT "user", state, reviewAt FROM outboxUserState
                WHERE account = \(scope.account) AND livemode = \(scope.livemode) AND "user" = ANY(\(names)::text[])
                """, logger: logger
            ).decode((String, String, Int64?).self) { kept[user] = (state, reviewAt) }
            let billings = try await PostgresUsers.Reader(connection: connection, logger: logger).billings(of: names, in: scope)
            for (user, billing) in zip(names, billings) {
                let announced = OutboxAnnouncer.announce(billing: billing, kept: kept[user]?.state, policy: policy, nowMilliseconds: now)
                let key: [LedgerValue] = [.text(scope.account), .boolean(scope.livemode), .text(user)]
                if announced.changed {
                    states.rows.append(key + [.text(announced.text), .integer(now), announced.reviewAt.map(LedgerValue.integer) ?? .null])
                } else if let held = kept[user], held.reviewAt != announced.reviewAt {
                    reviews.rows.append(key + [announced.reviewAt.map(LedgerValue.integer) ?? .null])
                }
                if announced.entitlementChanged {
                    changes.append(TimelineRows.entitlementChangeArguments(announced, user: user, scope: scope, now: now))
                }
                events += announced.events
            }
        }
        if !states.rows.isEmpty {
            let columns = states.columns([.text, .boolean, .text, .text, .bigint, .bigint])
            try await connection.prepared(
                """
                INSERT INTO outboxUserState (account, livemode, "user", state, updatedAt, reviewAt)
                SELECT * FROM unnest(\(columns[0])::text[], \(columns[1])::boolean[], \(columns[2])::text[], \(columns[3])::text[],
                    \(columns[4])::bigint[], \(columns[5])::bigint[])
                ON CONFLICT (account, livemode, "user") DO UPDATE
                    SET state = excluded.state, updatedAt = excluded.updatedAt, reviewAt = excluded.reviewAt
                """, logger: logger)
        }
        if !reviews.rows.isEmpty {
            let columns = reviews.columns([.text, .boolean, .text, .bigint])
            try await connection.prepared(
                """
                UPDATE outboxUserState o SET reviewAt = r.reviewAt
                FROM unnest(\(columns[0])::text[], \(columns[1])::boolean[], \(columns[2])::text[], \(columns[3])::bigint[])
                    AS r (account, livemode, "user", reviewAt)
                WHERE o.account = r.account AND o.livemode = r.livemode AND o."user" = r."user"
                """, logger: logger)
        }
        try await PostgresLedgerBatch.Inserter(connection: connection, logger: logger).insert(
            into: "entitlementChange", columns: TimelineRows.entitlementChangeColumns, rows: changes,
            then: TimelineRows.entitlementChangeConflict)
        try await insert(events, endpoints: policy.endpoints, connection: connection, logger: logger)
    }

    /// Rows of ledger values bound as one array per column.
    private struct Rows {
        var rows: [[LedgerValue]] = []

        func columns(_ types: [PostgresColumnType]) -> [PostgresColumnArray] {
            types.enumerated().map { index, type in PostgresColumnArray(type: type, values: rows.map { $0[index] }) }
        }
    }

    /// The review of what time alone changed (see ``OutboxStore/announceLapsed(now:limit:)``).
    /// Users are locked in the order ledger transactions lock them, so that a review never
    /// deadlocks with a change; two replicas reviewing one user announce once, the second
    /// finding the first's state.
    func announceLapsed(now: Int64, limit: Int) async throws -> Int {
        guard let policy else { return 0 }
        return try await client.transaction(logger: logger) { connection in
            var due: [OutboxTouches.User] = []
            for try await (account, livemode, user) in try await connection.query(
                """
                SELECT account, livemode, "user" FROM outboxUserState WHERE reviewAt <= \(policy.now() * 1000)
                ORDER BY reviewAt LIMIT \(limit)
                """, logger: logger
            ).decode((String, Bool, String).self) {
                due.append(.init(scope: ServiceScope(account: account, livemode: livemode), user: user))
            }
            var touches = OutboxTouches()
            touches.users = Set(due)
            try await Self.announce(touches, policy: policy, now: now, connection: connection, logger: logger)
            return due.count
        }
    }

    func nextReview() async throws -> Int64? {
        try await client.single("SELECT MIN(reviewAt) FROM outboxUserState", as: Int64?.self, logger: logger) ?? nil
    }

    /// Queues `usage.limit_reached` when a meter's state is at its limit for the first time in
    /// its period; a gauge back under its limit may announce again.
    static func announceUsage(
        _ state: UsageMeterState, scope: ServiceScope, user: String, policy: OutboxPolicy, now: Int64, connection: PostgresConnection,
        logger: Logger
    ) async throws {
        guard state.limitCount != nil else { return }
        let (meter, periodStart) = (state.meter.id, state.period?.start ?? 0)
        guard OutboundEventRules.limitReached(state) else {
            if state.period == nil {
                try await connection.query(
                    """
                    DELETE FROM outboxUsageLimit WHERE account = \(scope.account) AND livemode = \(scope.livemode) AND "user" = \(user)
                        AND meter = \(meter) AND periodStart = \(periodStart)
                    """, logger: logger)
            }
            return
        }
        let inserted = try await connection.single(
            """
            INSERT INTO outboxUsageLimit (account, livemode, "user", meter, periodStart, reachedAt)
            VALUES (\(scope.account), \(scope.livemode), \(user), \(meter), \(periodStart), \(now))
            ON CONFLICT DO NOTHING RETURNING 1
            """, as: Int.self, logger: logger) != nil
        guard inserted, !policy.endpoints.isEmpty else { return }
        _ = try await insert(
            OutboxAnnouncer.limitReached(state, scope: scope, user: user, policy: policy, nowMilliseconds: now),
            endpoints: policy.endpoints, connection: connection, logger: logger)
    }

    /// Queues `events` for every endpoint in one statement: event by event, endpoint by
    /// endpoint, in that order of `seq`.
    static func insert(_ events: [OutboxDraft], endpoints: [String], connection: PostgresConnection, logger: Logger) async throws {
        guard !events.isEmpty, !endpoints.isEmpty else { return }
        _ = try await connection.prepared(
            """
            INSERT INTO outboxEvent (id, endpoint, type, account, livemode, "user", userKey, createdAt, payload, status, nextAttemptAt)
            SELECT e.id, p.endpoint, e.type, e.account, e.livemode, e."user", e.userKey, e.createdAt, e.payload,
                \(OutboxStatus.pending.rawValue), e.createdAt
            FROM unnest(\(events.map(\.id))::text[], \(events.map(\.type))::text[], \(events.map(\.scope.account))::text[],
                \(events.map(\.scope.livemode))::boolean[], \(events.map(\.user))::text[],
                \(events.map { OutboxAnnouncer.userKey(scope: $0.scope, user: $0.user) })::text[], \(events.map(\.createdAt))::bigint[],
                \(PostgresColumnArray(type: .bytea, values: events.map { .blob($0.payload[...]) }))::bytea[])
                WITH ORDINALITY AS e (id, type, account, livemode, "user", userKey, createdAt, payload, n)
            CROSS JOIN unnest(\(endpoints)::text[]) WITH ORDINALITY AS p (endpoint, m)
            ORDER BY e.n, p.m
            """, logger: logger)
    }

    static func insert(_ event: OutboxDraft, endpoints: [String], connection: PostgresConnection, logger: Logger) async throws -> [Int64] {
        var seqs: [Int64] = []
        let userKey = OutboxAnnouncer.userKey(scope: event.scope, user: event.user)
        for endpoint in endpoints {
            let rows = try await connection.prepared(
                """
                INSERT INTO outboxEvent (id, endpoint, type, account, livemode, "user", userKey, createdAt, payload, status, nextAttemptAt)
                VALUES (\(event.id), \(endpoint), \(event.type), \(event.scope.account), \(event.scope.livemode), \(event.user),
                    \(userKey), \(event.createdAt), \(ByteBuffer(bytes: event.payload)), \(OutboxStatus.pending.rawValue),
                    \(event.createdAt))
                RETURNING seq
                """, logger: logger)
            for try await row in rows { seqs.append(try row.decode(Int64.self)) }
        }
        return seqs
    }

    // MARK: - The queue

    static let columns = """
        seq, id, endpoint, type, account, livemode, "user", createdAt, payload, status, attempts, nextAttemptAt, lastError, deliveredAt
        """

    private func messages(_ query: PostgresQuery, connection: PostgresConnection? = nil) async throws -> [OutboxMessage] {
        let rows = if let connection {
            try await connection.query(query, logger: logger)
        } else {
            try await client.query(query, logger: logger)
        }
        var messages: [OutboxMessage] = []
        for try await (seq, id, endpoint, type, account, livemode, user, createdAt, payload, status, attempts, next, error, delivered)
            in rows.decode((Int64, String, String, String, String, Bool, String, Int64, ByteBuffer, String, Int, Int64?, String?, Int64?).self)
        {
            messages.append(OutboxMessage(
                seq: seq,
                event: OutboxDraft(
                    id: id, type: type, scope: ServiceScope(account: account, livemode: livemode), user: user, createdAt: createdAt,
                    payload: Array(payload.readableBytesView)),
                endpoint: endpoint, status: OutboxStatus(rawValue: status) ?? .pending, attempts: attempts, nextAttemptAt: next,
                lastError: error, deliveredAt: delivered))
        }
        return messages
    }

    /// The next event of each (endpoint, user) whose earlier events are all delivered or dead,
    /// due at `now`, taken for this replica until the send lease runs out; oldest due first.
    func due(now: Int64, limit: Int, excluding: Set<String>) async throws -> [OutboxMessage] {
        try await client.transaction(logger: logger) { connection in
            // The endpoints with events waiting that are not disabled: one index lookup each.
            var endpoints: [String] = []
            for try await url in try await connection.prepared(
                """
                WITH RECURSIVE waiting(url) AS (
                    SELECT MIN(endpoint) FROM outboxEvent WHERE status IN ('pending', 'failed')
                    UNION ALL
                    SELECT (SELECT MIN(endpoint) FROM outboxEvent WHERE status IN ('pending', 'failed') AND endpoint > waiting.url)
                    FROM waiting WHERE waiting.url IS NOT NULL)
                SELECT url FROM waiting WHERE url IS NOT NULL AND url NOT IN (SELECT url FROM outboxEndpoint)
                """, logger: logger
            ).decode(String.self) { if !excluding.contains(url) { endpoints.append(url) } }
            // Each endpoint its share of the pass (what is taken is leased, so none is taken to
            // be dropped); each user's oldest waiting event only.
            let share = max(1, limit / max(1, endpoints.count))
            var taken: [OutboxMessage] = []
            for endpoint in endpoints {
                taken += try await messages(
                    """
                    UPDATE outboxEvent t SET nextAttemptAt = \(now + sendLease)
                    FROM (
                        SELECT e.seq FROM outboxEvent e
                        WHERE e.endpoint = \(endpoint) AND e.status IN ('pending', 'failed') AND e.nextAttemptAt <= \(now)
                            AND NOT EXISTS (
                                SELECT 1 FROM outboxEvent f
                                WHERE f.endpoint = e.endpoint AND f.userKey = e.userKey AND f.status IN ('pending', 'failed') AND f.seq < e.seq)
                        ORDER BY e.nextAttemptAt, e.seq
                        LIMIT \(share)
                        FOR UPDATE SKIP LOCKED) AS due
                    WHERE t.seq = due.seq
                    RETURNING t.seq, t.id, t.endpoint, t.type, t.account, t.livemode, t."user", t.createdAt, t.payload, t.status,
                        t.attempts, \(now)::bigint, t.lastError, t.deliveredAt
                    """, connection: connection)
            }
            return taken.sorted { ($0.nextAttemptAt ?? 0, $0.seq) < ($1.nextAttemptAt ?? 0, $1.seq) }
        }
    }

    func record(_ attempts: [OutboxAttempt]) async throws {
        guard !attempts.isEmpty else { return }
        try await client.transaction(logger: logger) { connection in
            // Deliveries, nearly every attempt, in one statement: a pass of 512 is one round
            // trip, not 512.
            let delivered = attempts.filter { $0.outcome == .delivered }.sorted { $0.seq < $1.seq }
            if !delivered.isEmpty {
                try await connection.prepared(
                    """
                    UPDATE outboxEvent SET status = 'delivered', attempts = attempts + 1, nextAttemptAt = NULL, lastError = NULL,
                        deliveredAt = d.at
                    FROM unnest(\(delivered.map(\.seq))::bigint[], \(delivered.map(\.at))::bigint[]) AS d (seq, at)
                    WHERE outboxEvent.seq = d.seq
                    """, logger: logger)
            }
            for attempt in attempts.sorted(by: { $0.seq < $1.seq }) {
                switch attempt.outcome {
                case .delivered:
                    continue
                case .failed(let error, let retryAt):
                    try await update(attempt.seq, status: .failed, next: retryAt, error: error, delivered: nil, connection)
                case .dead(let error):
                    try await update(attempt.seq, status: .dead, next: nil, error: error, delivered: nil, connection)
                case .gone:
                    // Not an attempt of the event's: it waits, pending, for the endpoint to come
                    // back (due at once then, not at the end of the send lease).
                    try await connection.query(
                        """
                        UPDATE outboxEvent SET lastError = '410 Gone: endpoint disabled', nextAttemptAt = \(attempt.at)
                        WHERE seq = \(attempt.seq)
                        """, logger: logger)
                }
            }
        }
    }

    private func update(
        _ seq: Int64, status: OutboxStatus, next: Int64?, error: String?, delivered: Int64?, _ connection: PostgresConnection
    ) async throws {
        try await connection.query(
            """
            UPDATE outboxEvent SET status = \(status.rawValue), attempts = attempts + 1, nextAttemptAt = \(next),
                lastError = \(error), deliveredAt = \(delivered)
            WHERE seq = \(seq)
            """, logger: logger)
    }

    func list(status: OutboxStatus?, limit: Int) async throws -> [OutboxMessage] {
        if let status {
            return try await messages(
                "SELECT \(unescaped: Self.columns) FROM outboxEvent WHERE status = \(status.rawValue) ORDER BY seq DESC LIMIT \(limit)")
        }
        return try await messages("SELECT \(unescaped: Self.columns) FROM outboxEvent ORDER BY seq DESC LIMIT \(limit)")
    }

    func retry(id: String, now: Int64) async throws -> Int {
        try await count(
            "UPDATE outboxEvent SET status = 'pending', nextAttemptAt = \(now) WHERE id = \(id) AND status IN ('failed', 'dead') RETURNING 1")
    }

    func retryAllDead(now: Int64) async throws -> Int {
        try await count("UPDATE outboxEvent SET status = 'pending', nextAttemptAt = \(now) WHERE status = 'dead' RETURNING 1")
    }

    private func count(_ query: PostgresQuery) async throws -> Int {
        var count = 0
        for try await _ in try await client.query(query, logger: logger) { count += 1 }
        return count
    }

    func depth() async throws -> OutboxDepth {
        var counts: [OutboxStatus: Int] = [:]
        for try await (status, count) in try await client.query(
            "SELECT status, COUNT(*) FROM outboxEvent GROUP BY status", logger: logger
        ).decode((String, Int).self) {
            if let status = OutboxStatus(rawValue: status) { counts[status] = count }
        }
        let oldest = try await client.single(PostgresQuery(unsafeSQL: OutboxDepth.oldestWaitingSQL), as: Int64?.self, logger: logger) ?? nil
        return OutboxDepth(counts: counts, oldestUndeliveredAt: oldest)
    }

    func disableEndpoint(_ url: String, at: Int64, reason: String) async throws {
        try await client.query(
            "INSERT INTO outboxEndpoint (url, disabledAt, reason) VALUES (\(url), \(at), \(reason)) ON CONFLICT (url) DO NOTHING",
            logger: logger)
    }

    func enableEndpoint(_ url: String) async throws -> Bool {
        try await count("DELETE FROM outboxEndpoint WHERE url = \(url) RETURNING 1") > 0
    }

    func disabledEndpoints() async throws -> [String: Int64] {
        var endpoints: [String: Int64] = [:]
        for try await (url, at) in try await client.query("SELECT url, disabledAt FROM outboxEndpoint", logger: logger).decode((String, Int64).self) {
            endpoints[url] = at
        }
        return endpoints
    }

    func enqueue(_ event: OutboxDraft, endpoints: [String], now: Int64) async throws -> [OutboxMessage] {
        try await client.transaction(logger: logger) { connection in
            let seqs = try await Self.insert(event, endpoints: endpoints, connection: connection, logger: logger)
            return try await messages(
                "SELECT \(unescaped: Self.columns) FROM outboxEvent WHERE seq = ANY(\(seqs)) ORDER BY seq", connection: connection)
        }
    }
}
