import BillingCore
import Foundation
import GRDB

extension SQLiteUsage {
    /// The namespace of this database's meter event identifiers, drawn once and kept in `meta`.
    public func meterEventNamespace() async throws -> String {
        try await database.writer.write { db in
            if let existing = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [UsageReportRows.namespaceKey]) {
                return existing
            }
            var generator = SystemRandomNumberGenerator()
            let namespace = MeterEventIdentifier.newNamespace(using: &generator)
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES (?, ?)", arguments: [UsageReportRows.namespaceKey, namespace])
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
                    WHERE \(UsageReportRows.dueCondition) AND reportNextAt >= ? AND reportNextAt <= ? AND (reportNextAt > ? OR seq > ?) AND livemode = ?
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
                    WHERE \(UsageReportRows.dueCondition) AND reportState = ? AND reportNextAt IS NULL AND livemode = ? \(unconfirmed)
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
                    FROM usageRecord WHERE \(UsageReportRows.dueCondition) AND livemode = ?
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
                        COALESCE(SUM(CASE WHEN \(UsageReportRows.dueCondition) THEN quantity END), 0) AS unreported,
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
