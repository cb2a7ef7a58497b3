import Foundation

/// Reconcile's lease, run records and event cursors. The lease is a record with an expiry, so
/// that it holds across processes and hosts sharing one ledger and a killed run stops blocking
/// once it expires.
public protocol ReconcileRunStore: Sendable {
    /// Takes the named lease for `ttl` seconds, or throws ``LeaseHeld`` when someone else holds an
    /// unexpired one. Taking a lease one already holds renews it.
    func acquire(_ name: String, holder: String, ttl: Int64, now: Int64) async throws
    /// Extends a held lease; throws ``LeaseHeld`` when it was lost (expired and taken by another).
    func renew(_ name: String, holder: String, ttl: Int64, now: Int64) async throws
    /// Gives the lease up (only if still held by `holder`).
    func release(_ name: String, holder: String) async throws
    /// Records the start of a run; returns its id.
    func start(mode: String, holder: String, dryRun: Bool, now: Int64) async throws -> Int64
    /// Marks runs left `running` by a process that no longer holds the lease as interrupted.
    func markAbandoned(leaseName: String, now: Int64) async throws
    /// Records how a run ended, with its JSON report.
    func finish(_ id: Int64, outcome: ReconcileRunOutcome, totals: ReconcileTotals, error: String?, report: Data?, now: Int64) async throws
    /// The latest finished run of a mode (any outcome) and the latest completed one.
    func latest(mode: String) async throws -> (finished: ReconcileRun?, completed: ReconcileRun?)
    /// The newest runs of every mode, newest first, running ones included.
    func recent(limit: Int) async throws -> [ReconcileRun]
    /// A run's stored JSON report; nil while it runs or when it has none.
    func report(_ id: Int64) async throws -> Data?
    /// The newest `created` a completed walk of an event history reached, and when it completed.
    func eventCursor(account: String, livemode: Bool) async throws -> (created: Int64, walkedAt: Int64)?
    /// Moves the cursor forward (never back).
    func advanceEventCursor(account: String, livemode: Bool, created: Int64, walkedAt: Int64) async throws
}

/// Another run holds the lease.
public struct LeaseHeld: Error, CustomStringConvertible {
    public let holder: String
    public let acquiredAt: Int64
    public let expiresAt: Int64

    public init(holder: String, acquiredAt: Int64, expiresAt: Int64) {
        self.holder = holder
        self.acquiredAt = acquiredAt
        self.expiresAt = expiresAt
    }

    public var description: String {
        "another reconcile run holds the lease (\(holder), since \(UTCTimestamp.string(acquiredAt))); it expires at \(UTCTimestamp.string(expiresAt)) unless renewed"
    }
}

/// How a reconcile run went.
public enum ReconcileRunOutcome: String, Sendable, Codable {
    case running, completed, failed
    /// The process stopped before the run finished (found at the next start).
    case interrupted
}

/// One reconcile run as recorded.
public struct ReconcileRun: Sendable, Equatable {
    public let id: Int64
    public let mode: String
    public let holder: String
    public let startedAt: Int64
    public let finishedAt: Int64?
    public let outcome: ReconcileRunOutcome
    public let dryRun: Bool
    public let drift: Int
    public let repaired: Int
    public let recoveredEvents: Int
    public let objects: Int
    public let error: String?
}

/// The figures a reconcile run ends with.
public struct ReconcileTotals: Sendable, Equatable {
    public var drift = 0
    public var repaired = 0
    public var recoveredEvents = 0
    public var objects = 0

    public init(drift: Int = 0, repaired: Int = 0, recoveredEvents: Int = 0, objects: Int = 0) {
        self.drift = drift
        self.repaired = repaired
        self.recoveredEvents = recoveredEvents
        self.objects = objects
    }
}

extension ReconcileRun {
    /// The columns a run is read from, in order, on either backend.
    static let columns = "id, mode, holder, startedAt, finishedAt, outcome, dryRun, drift, repaired, recoveredEvents, objects, error"
}
