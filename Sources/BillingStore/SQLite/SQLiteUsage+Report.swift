import BillingCore
import Foundation
import GRDB

/// A usage record due for its report to a Stripe Billing Meter.
public struct DueUsageReport: Sendable, Equatable {
    public let seq: Int64
    public let scope: ServiceScope
    public let user: String
    public let meter: String
    /// The Stripe meter's `event_name`.
    public let stripeMeter: String
    public let quantity: Int64
    /// When the usage happened, Unix seconds.
    public let timestamp: Int64
    /// The app's idempotency key of the record.
    public let idempotencyKey: String
    /// When billingd accepted it, Unix seconds.
    public let recordedAt: Int64
    public let state: UsageReportState
    public let attempts: Int
    public let nextAt: Int64
    /// Pinned at the first attempt, so that every retry sends the same event.
    public let stripeCustomer: String?
    /// The earliest attempt whose answer is unknown.
    public let inFlightSince: Int64?
}

/// Where a walk over due records is: the last `(reportNextAt, seq)` read.
public struct UsageReportCursor: Sendable, Equatable {
    public let nextAt: Int64
    public let seq: Int64

    public init(nextAt: Int64, seq: Int64) {
        self.nextAt = nextAt
        self.seq = seq
    }
}

/// One change the reporter makes to a record; a batch of them is one transaction.
public enum UsageReportUpdate: Sendable, Equatable {
    /// About to be sent to `customer`: the customer is pinned and the record in flight since
    /// `at` (unless it already was), before the call, so that a crash leaves a trace.
    case claim(seq: Int64, customer: String, at: Int64)
    /// A claim the run never sent (it stopped): in flight as before.
    case unclaim(seq: Int64, inFlightSince: Int64?)
    /// The result of an attempt, the `attempts`-th.
    case attempted(seq: Int64, attempts: Int, next: MeterEventPolicy.Next, at: Int64)
    /// Not sent now: due again at `until`, with why.
    case wait(seq: Int64, until: Int64, note: String)
    /// Not sent, ever: `failed` or `skipped`, with why.
    case close(seq: Int64, state: UsageReportState, error: String?)
}

/// The report backlog in one mode: what is waiting and what failed.
public struct UsageReportBacklog: Sendable, Equatable {
    /// Pending records due now or later (future timestamps, users awaiting a customer).
    public var pending = 0
    /// Failed records that will be tried again.
    public var retrying = 0
    /// Failed records given up on (`--retry-failed` re-queues them).
    public var failed = 0
    /// When the oldest pending or retrying record was accepted, Unix seconds.
    public var oldestRecordedAt: Int64?

    public init() {}
}

/// A record's report states over a span, for `billingd usage show`.
public struct UsageReportTally: Sendable, Equatable {
    public var records: [UsageReportState: Int] = [:]
    public var quantities: [UsageReportState: Int64] = [:]

    public init() {}
}

/// What the ledger holds for one customer on one Stripe meter over a span, for reconcile.
public struct ReportedUsage: Sendable, Equatable {
    /// The quantity Stripe accepted.
    public var reported: Int64 = 0
    /// The quantity still pending or failed.
    public var unreported: Int64 = 0
    /// When the latest of them was reported, Unix seconds.
    public var lastReportedAt: Int64?
    /// Records an attempt may have delivered without billingd knowing.
    public var inFlight = 0

    public init() {}
}

/// A (user, meter) whose usage went to a Stripe customer, in one scope.
public struct ReportedUsageKey: Sendable, Hashable {
    public let scope: ServiceScope
    public let user: String
    public let meter: String
    public let stripeMeter: String
    public let customer: String

    public init(scope: ServiceScope, user: String, meter: String, stripeMeter: String, customer: String) {
        self.scope = scope
        self.user = user
        self.meter = meter
        self.stripeMeter = stripeMeter
        self.customer = customer
    }
}

extension UsageLedger {
    static let namespaceKey = "usage_meter_event_namespace"

    /// `reportState IN ('pending', 'failed')` spelled as the partial index `usageRecord_due` is,
    /// so that SQLite can use it (bound parameters would not prove the index's condition).
    static let dueCondition = "reportState IN ('\(UsageReportState.pending.rawValue)', '\(UsageReportState.failed.rawValue)')"

    /// The namespace of this database's meter event identifiers, drawn once and kept in `meta`.
    public func meterEventNamespace() async throws -> String {
        try await database.writer.write { db in
            if let existing = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [Self.namespaceKey]) {
                return existing
            }
            var generator = SystemRandomNumberGenerator()
            let namespace = MeterEventIdentifier.newNamespace(using: &generator)
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES (?, ?)", arguments: [Self.namespaceKey, namespace])
            return namespace
        }
    }

    /// Records of one mode due at `now`, in `(reportNextAt, seq)` order after `cursor`.
    public func dueReports(livemode: Bool, now: Int64, after cursor: UsageReportCursor?, limit: Int) async throws -> [DueUsageReport] {
        try await database.writer.read { db in
            let after = cursor ?? UsageReportCursor(nextAt: Int64.min, seq: Int64.min)
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT seq, account, livemode, user, meter, stripeMeter, quantity, timestamp, idempotencyKey, recordedAt, reportState,
                        reportAttempts, reportNextAt, stripeCustomer, reportInFlightSince
                    FROM usageRecord
                    WHERE \(Self.dueCondition) AND reportNextAt >= ? AND reportNextAt <= ? AND (reportNextAt > ? OR seq > ?) AND livemode = ?
                    ORDER BY reportNextAt, seq
                    LIMIT ?
                    """,
                arguments: [after.nextAt, now, after.nextAt, after.seq, livemode, limit]
            ).map { row in
                DueUsageReport(
                    seq: row["seq"], scope: ServiceScope(account: row["account"], livemode: row["livemode"]), user: row["user"],
                    meter: row["meter"], stripeMeter: row["stripeMeter"], quantity: row["quantity"], timestamp: row["timestamp"],
                    idempotencyKey: row["idempotencyKey"], recordedAt: (row["recordedAt"] as Int64) / 1000,
                    state: UsageReportState(rawValue: row["reportState"]) ?? .pending, attempts: row["reportAttempts"],
                    nextAt: row["reportNextAt"], stripeCustomer: row["stripeCustomer"], inFlightSince: row["reportInFlightSince"])
            }
        }
    }

    /// Applies the reporter's changes in one transaction.
    public func updateReports(_ updates: [UsageReportUpdate]) async throws {
        guard !updates.isEmpty else { return }
        try await database.writer.write { db in
            for update in updates {
                switch update {
                case .claim(let seq, let customer, let at):
                    try db.execute(
                        sql: "UPDATE usageRecord SET stripeCustomer = COALESCE(stripeCustomer, ?), reportInFlightSince = COALESCE(reportInFlightSince, ?) WHERE seq = ?",
                        arguments: [customer, at, seq])
                case .unclaim(let seq, let inFlightSince):
                    try db.execute(sql: "UPDATE usageRecord SET reportInFlightSince = ? WHERE seq = ?", arguments: [inFlightSince, seq])
                case .attempted(let seq, let attempts, let next, let at):
                    try db.execute(
                        sql: """
                            UPDATE usageRecord SET reportState = ?, reportAttempts = ?, reportNextAt = ?, reportError = ?,
                                reportInFlightSince = ?, reportedAt = ?
                            WHERE seq = ?
                            """,
                        arguments: [
                            next.state.rawValue, attempts, next.nextAt, next.error, next.inFlightSince,
                            next.state == .reported ? at : nil, seq,
                        ])
                case .wait(let seq, let until, let note):
                    try db.execute(sql: "UPDATE usageRecord SET reportNextAt = ?, reportError = ? WHERE seq = ?", arguments: [until, note, seq])
                case .close(let seq, let state, let error):
                    try db.execute(
                        sql: "UPDATE usageRecord SET reportState = ?, reportNextAt = NULL, reportError = ? WHERE seq = ?",
                        arguments: [state.rawValue, error, seq])
                }
            }
        }
    }

    /// Puts records given up on back in the queue, due at `now`, with their attempts counted
    /// anew. Records whose delivery is unconfirmed past Stripe's identifier window stay failed
    /// unless `resendUnconfirmed`, which forgets that an earlier attempt may have delivered them.
    /// - Returns: how many were re-queued.
    public func requeueFailed(livemode: Bool, resendUnconfirmed: Bool, now: Int64) async throws -> Int {
        try await database.writer.write { db in
            let unconfirmed = resendUnconfirmed ? "" : "AND (reportInFlightSince IS NULL OR reportInFlightSince > \(now - MeterEventPolicy.identifierWindow))"
            try db.execute(
                sql: """
                    UPDATE usageRecord SET reportState = ?, reportAttempts = 0, reportNextAt = ?, reportError = NULL
                        \(resendUnconfirmed ? ", reportInFlightSince = NULL" : "")
                    WHERE \(Self.dueCondition) AND reportState = ? AND reportNextAt IS NULL AND livemode = ? \(unconfirmed)
                    """,
                arguments: [UsageReportState.pending.rawValue, now, UsageReportState.failed.rawValue, livemode])
            return db.changesCount
        }
    }

    /// The backlog of one mode.
    public func reportBacklog(livemode: Bool) async throws -> UsageReportBacklog {
        try await database.writer.read { db in
            var backlog = UsageReportBacklog()
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT reportState, reportNextAt IS NULL AS givenUp, COUNT(*) AS records, MIN(recordedAt) AS oldest
                    FROM usageRecord WHERE \(Self.dueCondition) AND livemode = ?
                    GROUP BY 1, 2
                    """,
                arguments: [livemode])
            {
                backlog.add(
                    state: UsageReportState(rawValue: row["reportState"]), givenUp: row["givenUp"], records: row["records"],
                    oldestRecordedAt: row["oldest"])
            }
            return backlog
        }
    }

    /// How a user's records of one meter over `period` were reported.
    public func reportTally(scope: ServiceScope, user: String, meter: String, period: UsagePeriod) async throws -> UsageReportTally {
        try await database.writer.read { db in
            var tally = UsageReportTally()
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT reportState, COUNT(*) AS records, SUM(quantity) AS quantity FROM usageRecord
                    WHERE \(Self.keyCondition) AND timestamp >= ? AND timestamp < ? AND reportState IS NOT NULL
                    GROUP BY reportState
                    """,
                arguments: Key(scope: scope, user: user, meter: meter).arguments + [period.start, period.end])
            {
                guard let state = UsageReportState(rawValue: row["reportState"]) else { continue }
                tally.records[state] = row["records"]
                tally.quantities[state] = row["quantity"]
            }
            return tally
        }
    }

    /// Every (user, meter, Stripe customer) with usage since `since` that was sent, or is being
    /// sent, to a Stripe customer; `account` nil for every account of the mode.
    public func reportedUsageKeys(livemode: Bool, account: String?, since: Int64) async throws -> [ReportedUsageKey] {
        var arguments: StatementArguments = [livemode, since]
        if let account { arguments += [account] }
        return try await database.writer.read { [arguments] db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT account, user, meter, stripeMeter, stripeCustomer FROM usageRecord
                    WHERE livemode = ? AND timestamp >= ? AND stripeCustomer IS NOT NULL \(account == nil ? "" : "AND account = ?")
                    GROUP BY account, user, meter, stripeMeter, stripeCustomer
                    ORDER BY account, stripeCustomer, stripeMeter, user
                    """,
                arguments: arguments
            ).map { row in
                ReportedUsageKey(
                    scope: ServiceScope(account: row["account"], livemode: livemode), user: row["user"], meter: row["meter"],
                    stripeMeter: row["stripeMeter"], customer: row["stripeCustomer"])
            }
        }
    }

    /// What the ledger sent to `key`'s customer over `span`.
    public func reportedUsage(_ key: ReportedUsageKey, span: UsagePeriod) async throws -> ReportedUsage {
        let reported = UsageReportState.reported.rawValue
        return try await database.writer.read { db in
            guard let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(CASE WHEN reportState = '\(reported)' THEN quantity END), 0) AS reported,
                        COALESCE(SUM(CASE WHEN \(Self.dueCondition) THEN quantity END), 0) AS unreported,
                        MAX(CASE WHEN reportState = '\(reported)' THEN reportedAt END) AS lastReportedAt,
                        COUNT(reportInFlightSince) AS inFlight
                    FROM usageRecord
                    WHERE \(Self.keyCondition) AND timestamp >= ? AND timestamp < ? AND stripeCustomer = ? AND stripeMeter = ?
                    """,
                arguments: Key(scope: key.scope, user: key.user, meter: key.meter).arguments + [span.start, span.end, key.customer, key.stripeMeter])
            else { return ReportedUsage() }
            var usage = ReportedUsage()
            usage.reported = row["reported"]
            usage.unreported = row["unreported"]
            usage.lastReportedAt = row["lastReportedAt"]
            usage.inFlight = row["inFlight"]
            return usage
        }
    }
}
