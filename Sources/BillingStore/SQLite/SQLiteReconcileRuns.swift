import Foundation
import GRDB

/// The SQLite ``ReconcileRunStore``: the lease, run records and event cursor of reconcile. The
/// lease is a row with an expiry rather than a file lock so that it also holds across processes and
/// hosts sharing one ledger, and so that a run killed with `kill -9` stops blocking once it
/// expires.
public struct SQLiteReconcileRuns: ReconcileRunStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Takes the named lease for `ttl` seconds, or throws ``LeaseHeld`` when someone else holds an
    /// unexpired one. Taking a lease one already holds renews it.
    public func acquire(_ name: String, holder: String, ttl: Int64, now: Int64) async throws {
        try await database.writer.write { db in
            if let current = try Self.lease(name, db: db), !current.yields(to: holder, now: now) {
                throw LeaseRow.refusal(current)
            }
            let lease = LeaseRow.taken(by: holder, now: now, ttl: ttl)
            try db.execute(
                sql: """
                    INSERT INTO lease (name, holder, acquiredAt, expiresAt) VALUES (?, ?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, acquiredAt = excluded.acquiredAt, expiresAt = excluded.expiresAt
                    """,
                arguments: [name, lease.holder, lease.acquiredAt, lease.expiresAt])
        }
    }

    /// Extends a held lease; throws ``LeaseHeld`` when it was lost (expired and taken by another).
    public func renew(_ name: String, holder: String, ttl: Int64, now: Int64) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: "UPDATE lease SET expiresAt = ? WHERE name = ? AND holder = ?", arguments: [now + ttl, name, holder])
            if db.changesCount == 0 { throw LeaseRow.refusal(try Self.lease(name, db: db)) }
        }
    }

    private static func lease(_ name: String, db: Database) throws -> LeaseRow? {
        try Row.fetchOne(db, sql: "SELECT holder, acquiredAt, expiresAt FROM lease WHERE name = ?", arguments: [name]).map {
            LeaseRow(holder: $0["holder"], acquiredAt: $0["acquiredAt"], expiresAt: $0["expiresAt"])
        }
    }

    /// Gives the lease up (only if still held by `holder`).
    public func release(_ name: String, holder: String) async throws {
        try await database.writer.write { db in
            try db.execute(sql: "DELETE FROM lease WHERE name = ? AND holder = ?", arguments: [name, holder])
        }
    }

    // MARK: Runs

    /// Records the start of a run. Runs of this holder's earlier lives that never finished are
    /// marked interrupted first.
    public func start(mode: String, holder: String, dryRun: Bool, now: Int64) async throws -> Int64 {
        try await database.writer.write { db in
            try db.execute(
                sql: "INSERT INTO reconcileRun (mode, holder, startedAt, outcome, dryRun) VALUES (?, ?, ?, ?, ?)",
                arguments: [mode, holder, now, ReconcileRunOutcome.running.rawValue, dryRun])
            return db.lastInsertedRowID
        }
    }

    /// Marks runs left `running` by a process that no longer holds the lease as interrupted.
    public func markAbandoned(leaseName: String, now: Int64) async throws {
        try await database.writer.write { db in
            let holder = try String.fetchOne(
                db, sql: "SELECT holder FROM lease WHERE name = ? AND expiresAt > ?", arguments: [leaseName, now])
            try db.execute(
                sql: "UPDATE reconcileRun SET outcome = 'interrupted', finishedAt = ? WHERE outcome = 'running' AND holder IS NOT ?",
                arguments: [now, holder])
        }
    }

    /// Records how a run ended, with its JSON report.
    public func finish(_ id: Int64, outcome: ReconcileRunOutcome, totals: ReconcileTotals, error: String?, report: Data?, now: Int64) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: """
                    UPDATE reconcileRun SET finishedAt = ?, outcome = ?, drift = ?, repaired = ?, recoveredEvents = ?,
                        objects = ?, error = ?, report = ? WHERE id = ?
                    """,
                arguments: [now, outcome.rawValue, totals.drift, totals.repaired, totals.recoveredEvents, totals.objects, error, report, id])
        }
    }

    /// The latest finished run of a mode (any outcome) and the latest completed one.
    public func latest(mode: String) async throws -> (finished: ReconcileRun?, completed: ReconcileRun?) {
        try await database.writer.read { db in
            let columns = ReconcileRun.columns
            let finished = try Row.fetchOne(
                db, sql: "SELECT \(columns) FROM reconcileRun WHERE mode = ? AND outcome != 'running' ORDER BY id DESC LIMIT 1",
                arguments: [mode])
            let completed = try Row.fetchOne(
                db, sql: "SELECT \(columns) FROM reconcileRun WHERE mode = ? AND outcome = 'completed' ORDER BY id DESC LIMIT 1",
                arguments: [mode])
            return (finished.map(Self.run), completed.map(Self.run))
        }
    }

    /// The newest runs of every mode, newest first, running ones included.
    public func recent(limit: Int) async throws -> [ReconcileRun] {
        try await database.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT \(ReconcileRun.columns) FROM reconcileRun ORDER BY id DESC LIMIT ?", arguments: [limit]).map(Self.run)
        }
    }

    /// The stored JSON report of a run.
    public func report(_ id: Int64) async throws -> Data? {
        try await database.writer.read { db in
            try Data.fetchOne(db, sql: "SELECT report FROM reconcileRun WHERE id = ?", arguments: [id])
        }
    }

    /// The columns a ``ReconcileRun`` is read from, in its initialiser's order (both backends).

    private static func run(_ row: Row) -> ReconcileRun {
        ReconcileRun(
            id: row["id"], mode: row["mode"], holder: row["holder"], startedAt: row["startedAt"], finishedAt: row["finishedAt"],
            outcome: ReconcileRunOutcome(rawValue: row["outcome"]) ?? .failed, dryRun: row["dryRun"], drift: row["drift"],
            repaired: row["repaired"], recoveredEvents: row["recoveredEvents"], objects: row["objects"], error: row["error"])
    }

    // MARK: Event cursor

    /// The newest `event.created` a completed walk of `/v1/events` reached, and when it completed.
    public func eventCursor(account: String, livemode: Bool) async throws -> (created: Int64, walkedAt: Int64)? {
        try await database.writer.read { db in
            try Row.fetchOne(
                db, sql: "SELECT created, walkedAt FROM eventCursor WHERE account = ? AND livemode = ?", arguments: [account, livemode]
            ).map { ($0["created"], $0["walkedAt"]) }
        }
    }

    /// Moves the cursor forward (never back).
    public func advanceEventCursor(account: String, livemode: Bool, created: Int64, walkedAt: Int64) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO eventCursor (account, livemode, created, walkedAt) VALUES (?, ?, ?, ?)
                    ON CONFLICT (account, livemode) DO UPDATE SET created = max(created, excluded.created), walkedAt = excluded.walkedAt
                    """,
                arguments: [account, livemode, created, walkedAt])
        }
    }
}
