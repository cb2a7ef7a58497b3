import BillingCore
import Logging
import PostgresNIO

/// The report queue to Stripe's meters on PostgreSQL: SQLite/SQLiteUsage.swift's report side, row for row.
extension PostgresUsage {
    /// The namespace of this database's meter event identifiers, drawn once and kept in `meta`;
    /// replicas drawing at once keep the first committed.
    func meterEventNamespace() async throws -> String {
        var generator = SystemRandomNumberGenerator()
        let drawn = MeterEventIdentifier.newNamespace(using: &generator)
        try await client.query(
            "INSERT INTO meta (key, value) VALUES (\(UsageReportRows.namespaceKey), \(drawn)) ON CONFLICT (key) DO NOTHING", logger: logger)
        return try await client.single("SELECT value FROM meta WHERE key = \(UsageReportRows.namespaceKey)", as: String.self, logger: logger)!
    }

    /// Records of one mode due at `now`, in `(reportNextAt, seq)` order after `cursor`.
    func dueReports(livemode: Bool, now: Int64, after cursor: UsageReportCursor?, limit: Int) async throws -> [DueUsageReport] {
        let after = cursor ?? UsageReportCursor(nextAt: Int64.min, seq: Int64.min)
        let rows = try await client.query(
            """
            SELECT seq, account, livemode, "user", meter, stripeMeter, quantity, timestamp, idempotencyKey, recordedAt, reportState,
                reportAttempts, reportNextAt, stripeCustomer, reportInFlightSince
            FROM usageRecord
            WHERE \(unescaped: UsageReportRows.dueCondition) AND reportNextAt >= \(after.nextAt) AND reportNextAt <= \(now)
                AND (reportNextAt > \(after.nextAt) OR seq > \(after.seq)) AND livemode = \(livemode)
            ORDER BY reportNextAt, seq
            LIMIT \(limit)
            """, logger: logger)
        var due: [DueUsageReport] = []
        for try await row in rows {
            let (seq, account, livemode, user, meter, stripeMeter, quantity, timestamp, key, recordedAt, state, attempts, nextAt, customer, inFlight) =
                try row.decode(
                    (Int64, String, Bool, String, String, String, Int64, Int64, String, Int64, String, Int, Int64, String?, Int64?).self)
            due.append(DueUsageReport(
                seq: seq, scope: ServiceScope(account: account, livemode: livemode), user: user, meter: meter, stripeMeter: stripeMeter,
                quantity: quantity, timestamp: timestamp, idempotencyKey: key, recordedAt: recordedAt / 1000,
                state: UsageReportState(rawValue: state) ?? .pending, attempts: attempts, nextAt: nextAt, stripeCustomer: customer,
                inFlightSince: inFlight))
        }
        return due
    }

    /// Applies the reporter's changes in one transaction.
    func updateReports(_ updates: [UsageReportUpdate]) async throws {
        guard !updates.isEmpty else { return }
        try await client.transaction(logger: logger) { connection in
            for update in updates {
                let query: PostgresQuery =
                    switch update {
                    case .claim(let seq, let customer, let at):
                        """
                        UPDATE usageRecord SET stripeCustomer = COALESCE(stripeCustomer, \(customer)),
                            reportInFlightSince = COALESCE(reportInFlightSince, \(at)) WHERE seq = \(seq)
                        """
                    case .unclaim(let seq, let inFlightSince):
                        "UPDATE usageRecord SET reportInFlightSince = \(inFlightSince) WHERE seq = \(seq)"
                    case .attempted(let seq, let attempts, let next, let at):
                        """
                        UPDATE usageRecord SET reportState = \(next.state.rawValue), reportAttempts = \(attempts),
                            reportNextAt = \(next.nextAt), reportError = \(next.error), reportInFlightSince = \(next.inFlightSince),
                            reportedAt = \(next.state == .reported ? at : nil)
                        WHERE seq = \(seq)
                        """
                    case .wait(let seq, let until, let note):
                        "UPDATE usageRecord SET reportNextAt = \(until), reportError = \(note) WHERE seq = \(seq)"
                    case .close(let seq, let state, let error):
                        "UPDATE usageRecord SET reportState = \(state.rawValue), reportNextAt = NULL, reportError = \(error) WHERE seq = \(seq)"
                    }
                try await connection.query(query, logger: logger)
            }
        }
    }

    /// Puts records given up on back in the queue, due at `now`, with their attempts counted
    /// anew; records unconfirmed past Stripe's identifier window only with `resendUnconfirmed`.
    func requeueFailed(livemode: Bool, resendUnconfirmed: Bool, now: Int64) async throws -> Int {
        let windowStart: Int64? = resendUnconfirmed ? nil : now - MeterEventPolicy.identifierWindow
        return try await client.single(
            """
            WITH requeued AS (
                UPDATE usageRecord SET reportState = \(UsageReportState.pending.rawValue), reportAttempts = 0, reportNextAt = \(now),
                    reportError = NULL,
                    reportInFlightSince = CASE WHEN \(resendUnconfirmed) THEN NULL ELSE reportInFlightSince END
                WHERE \(unescaped: UsageReportRows.dueCondition) AND reportState = \(UsageReportState.failed.rawValue)
                    AND reportNextAt IS NULL AND livemode = \(livemode)
                    AND (\(windowStart)::bigint IS NULL OR reportInFlightSince IS NULL OR reportInFlightSince > \(windowStart))
                RETURNING 1)
            SELECT count(*) FROM requeued
            """, as: Int.self, logger: logger) ?? 0
    }

    /// The backlog of one mode.
    func reportBacklog(livemode: Bool) async throws -> UsageReportBacklog {
        let rows = try await client.query(
            """
            SELECT reportState, reportNextAt IS NULL, count(*), min(recordedAt)
            FROM usageRecord WHERE \(unescaped: UsageReportRows.dueCondition) AND livemode = \(livemode)
            GROUP BY 1, 2
            """, logger: logger)
        var backlog = UsageReportBacklog()
        for try await (state, givenUp, records, oldest) in rows.decode((String, Bool, Int, Int64?).self) {
            backlog.add(state: UsageReportState(rawValue: state), givenUp: givenUp, records: records, oldestRecordedAt: oldest)
        }
        return backlog
    }

    /// How a user's records of one meter over `period` were reported.
    func reportTally(scope: ServiceScope, user: String, meter: String, period: UsagePeriod) async throws -> UsageReportTally {
        let rows = try await client.query(
            Self.keyed(
                """
                SELECT reportState, count(*), SUM(quantity)::bigint FROM usageRecord
                WHERE \(Self.keyCondition) AND timestamp >= $5 AND timestamp < $6 AND reportState IS NOT NULL
                GROUP BY reportState
                """, Key(scope: scope, user: user, meter: meter)
            ) {
                $0.append(period.start)
                $0.append(period.end)
            }, logger: logger)
        var tally = UsageReportTally()
        for try await (state, records, quantity) in rows.decode((String, Int, Int64).self) {
            guard let state = UsageReportState(rawValue: state) else { continue }
            tally.records[state] = records
            tally.quantities[state] = quantity
        }
        return tally
    }

    /// Every (user, meter, Stripe customer) with usage since `since` sent, or being sent, to a
    /// Stripe customer; `account` nil for every account of the mode.
    func reportedUsageKeys(livemode: Bool, account: String?, since: Int64) async throws -> [ReportedUsageKey] {
        let rows = try await client.query(
            """
            SELECT account, "user", meter, stripeMeter, stripeCustomer FROM usageRecord
            WHERE livemode = \(livemode) AND timestamp >= \(since) AND stripeCustomer IS NOT NULL
                AND (\(account)::text IS NULL OR account = \(account))
            GROUP BY account, "user", meter, stripeMeter, stripeCustomer
            ORDER BY account COLLATE "C", stripeCustomer COLLATE "C", stripeMeter COLLATE "C", "user" COLLATE "C"
            """, logger: logger)
        var keys: [ReportedUsageKey] = []
        for try await (account, user, meter, stripeMeter, customer) in rows.decode((String, String, String, String, String).self) {
            keys.append(ReportedUsageKey(
                scope: ServiceScope(account: account, livemode: livemode), user: user, meter: meter, stripeMeter: stripeMeter,
                customer: customer))
        }
        return keys
    }

    /// What the ledger sent to `key`'s customer over `span`.
    func reportedUsage(_ key: ReportedUsageKey, span: UsagePeriod) async throws -> ReportedUsage {
        let reported = UsageReportState.reported.rawValue
        let rows = try await client.query(
            Self.keyed(
                """
                SELECT COALESCE(SUM(CASE WHEN reportState = '\(reported)' THEN quantity END), 0)::bigint,
                    COALESCE(SUM(CASE WHEN \(UsageReportRows.dueCondition) THEN quantity END), 0)::bigint,
                    MAX(CASE WHEN reportState = '\(reported)' THEN reportedAt END),
                    COUNT(reportInFlightSince)
                FROM usageRecord
                WHERE \(Self.keyCondition) AND timestamp >= $5 AND timestamp < $6 AND stripeCustomer = $7 AND stripeMeter = $8
                """, Key(scope: key.scope, user: key.user, meter: key.meter)
            ) {
                $0.append(span.start)
                $0.append(span.end)
                $0.append(key.customer)
                $0.append(key.stripeMeter)
            }, logger: logger)
        var usage = ReportedUsage()
        for try await (sent, unsent, lastReportedAt, inFlight) in rows.decode((Int64, Int64, Int64?, Int).self) {
            usage.reported = sent
            usage.unreported = unsent
            usage.lastReportedAt = lastReportedAt
            usage.inFlight = inFlight
        }
        return usage
    }
}
