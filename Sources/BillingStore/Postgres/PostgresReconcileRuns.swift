import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Reconcile's lease, run records and event cursors on PostgreSQL: the same rows and rules as
/// SQLite/SQLiteReconcileRuns.swift on SQLite. The lease is a row with an expiry, never a session advisory lock
/// (PgBouncer's transaction pooling hands a session's server connection to other clients), so
/// exactly one replica or cron run holds it at a time, and a holder killed mid-run stops blocking
/// once its expiry passes.
struct PostgresReconcileRuns: ReconcileRunStore {
    let client: PostgresClient
    let logger: Logger

    /// Takes the named lease for `ttl` seconds, or throws ``LeaseHeld``. Contenders queue on the
    /// row's lock (`FOR UPDATE`), and ``LeaseRow/yields(to:now:)`` decides as on SQLite; when
    /// there is no row yet, the first insert wins and the others read its row on their next turn.
    func acquire(_ name: String, holder: String, ttl: Int64, now: Int64) async throws {
        let lease = LeaseRow.taken(by: holder, now: now, ttl: ttl)
        while true {
            let taken = try await client.transaction(logger: logger) { connection -> Bool in
                if let current = try await Self.lease(name, lock: true, connection: connection, logger: logger) {
                    guard current.yields(to: holder, now: now) else { throw LeaseRow.refusal(current) }
                    try await connection.query(
                        """
                        UPDATE lease SET holder = \(lease.holder), acquiredAt = \(lease.acquiredAt), expiresAt = \(lease.expiresAt)
                        WHERE name = \(name)
                        """, logger: logger)
                    return true
                }
                let inserted = try await connection.single(
                    """
                    INSERT INTO lease (name, holder, acquiredAt, expiresAt)
                    VALUES (\(name), \(lease.holder), \(lease.acquiredAt), \(lease.expiresAt))
                    ON CONFLICT (name) DO NOTHING RETURNING 1
                    """, as: Int.self, logger: logger)
                return inserted != nil
            }
            // Another contender inserted the first row meanwhile: its row decides, on the next turn.
            if taken { return }
        }
    }

    /// Extends a held lease; throws ``LeaseHeld`` when it was lost (expired and taken by another).
    func renew(_ name: String, holder: String, ttl: Int64, now: Int64) async throws {
        try await client.transaction(logger: logger) { connection in
            let renewed = try await connection.single(
                "UPDATE lease SET expiresAt = \(now + ttl) WHERE name = \(name) AND holder = \(holder) RETURNING 1",
                as: Int.self, logger: logger)
            if renewed == nil {
                throw LeaseRow.refusal(try await Self.lease(name, lock: false, connection: connection, logger: logger))
            }
        }
    }

    /// Gives the lease up (only if still held by `holder`).
    func release(_ name: String, holder: String) async throws {
        try await client.query("DELETE FROM lease WHERE name = \(name) AND holder = \(holder)", logger: logger)
    }

    private static func lease(_ name: String, lock: Bool, connection: PostgresConnection, logger: Logger) async throws -> LeaseRow? {
        let rows = try await connection.query(
            "SELECT holder, acquiredAt, expiresAt FROM lease WHERE name = \(name) \(unescaped: lock ? "FOR UPDATE" : "")",
            logger: logger)
        for try await (holder, acquiredAt, expiresAt) in rows.decode((String, Int64, Int64).self) {
            return LeaseRow(holder: holder, acquiredAt: acquiredAt, expiresAt: expiresAt)
        }
        return nil
    }

    // MARK: Runs

    /// Records the start of a run; returns its id.
    func start(mode: String, holder: String, dryRun: Bool, now: Int64) async throws -> Int64 {
        try await client.single(
            """
            INSERT INTO reconcileRun (mode, holder, startedAt, outcome, dryRun)
            VALUES (\(mode), \(holder), \(now), \(ReconcileRunOutcome.running.rawValue), \(dryRun))
            RETURNING id
            """, as: Int64.self, logger: logger)!
    }

    /// Marks runs left `running` by a process that no longer holds the lease as interrupted.
    func markAbandoned(leaseName: String, now: Int64) async throws {
        try await client.query(
            """
            UPDATE reconcileRun SET outcome = \(ReconcileRunOutcome.interrupted.rawValue), finishedAt = \(now)
            WHERE outcome = \(ReconcileRunOutcome.running.rawValue) AND holder IS DISTINCT FROM
                (SELECT holder FROM lease WHERE name = \(leaseName) AND expiresAt > \(now))
            """, logger: logger)
    }

    /// Records how a run ended, with its JSON report.
    func finish(_ id: Int64, outcome: ReconcileRunOutcome, totals: ReconcileTotals, error: String?, report: Data?, now: Int64) async throws {
        try await client.query(
            """
            UPDATE reconcileRun SET finishedAt = \(now), outcome = \(outcome.rawValue), drift = \(totals.drift),
                repaired = \(totals.repaired), recoveredEvents = \(totals.recoveredEvents), objects = \(totals.objects),
                error = \(error), report = \(report.map { ByteBuffer(bytes: $0) })
            WHERE id = \(id)
            """, logger: logger)
    }

    /// The latest finished run of a mode (any outcome) and the latest completed one.
    func latest(mode: String) async throws -> (finished: ReconcileRun?, completed: ReconcileRun?) {
        let running = ReconcileRunOutcome.running.rawValue, completed = ReconcileRunOutcome.completed.rawValue
        let columns = ReconcileRun.columns
        return (
            try await run(
                "SELECT \(unescaped: columns) FROM reconcileRun WHERE mode = \(mode) AND outcome <> \(running) ORDER BY id DESC LIMIT 1"),
            try await run(
                "SELECT \(unescaped: columns) FROM reconcileRun WHERE mode = \(mode) AND outcome = \(completed) ORDER BY id DESC LIMIT 1")
        )
    }

    /// The newest runs of every mode, newest first, running ones included.
    func recent(limit: Int) async throws -> [ReconcileRun] {
        try await runs("SELECT \(unescaped: ReconcileRun.columns) FROM reconcileRun ORDER BY id DESC LIMIT \(limit)")
    }

    /// A run's stored JSON report.
    func report(_ id: Int64) async throws -> Data? {
        let rows = try await client.query("SELECT report FROM reconcileRun WHERE id = \(id)", logger: logger)
        for try await report in rows.decode(ByteBuffer?.self) { return report.map { Data($0.readableBytesView) } }
        return nil
    }

    private func run(_ query: PostgresQuery) async throws -> ReconcileRun? {
        try await runs(query).first
    }

    private func runs(_ query: PostgresQuery) async throws -> [ReconcileRun] {
        var runs: [ReconcileRun] = []
        for try await row in try await client.query(query, logger: logger) {
            let (id, mode, holder, startedAt, finishedAt, outcome, dryRun, drift, repaired, recovered, objects, error) = try row.decode(
                (Int64, String, String, Int64, Int64?, String, Bool, Int, Int, Int, Int, String?).self)
            runs.append(ReconcileRun(
                id: id, mode: mode, holder: holder, startedAt: startedAt, finishedAt: finishedAt,
                outcome: ReconcileRunOutcome(rawValue: outcome) ?? .failed, dryRun: dryRun, drift: drift, repaired: repaired,
                recoveredEvents: recovered, objects: objects, error: error))
        }
        return runs
    }

    // MARK: Event cursor

    /// The newest `event.created` a completed walk of `/v1/events` reached, and when it completed.
    func eventCursor(account: String, livemode: Bool) async throws -> (created: Int64, walkedAt: Int64)? {
        let rows = try await client.query(
            "SELECT created, walkedAt FROM eventCursor WHERE account = \(account) AND livemode = \(livemode)", logger: logger)
        for try await (created, walkedAt) in rows.decode((Int64, Int64).self) { return (created, walkedAt) }
        return nil
    }

    /// Moves the cursor forward (never back).
    func advanceEventCursor(account: String, livemode: Bool, created: Int64, walkedAt: Int64) async throws {
        try await client.query(
            """
            INSERT INTO eventCursor (account, livemode, created, walkedAt) VALUES (\(account), \(livemode), \(created), \(walkedAt))
            ON CONFLICT (account, livemode) DO UPDATE
                SET created = greatest(eventCursor.created, excluded.created), walkedAt = excluded.walkedAt
            """, logger: logger)
    }
}
