import BillingCore
import Foundation
import Logging
import PostgresNIO

/// The usage side of the ledger on PostgreSQL (``UsageStore`` and ``UsageReportStore``), with
/// the rows and rules of SQLite/SQLiteUsage.swift on SQLite: ``UsageRecordDecision`` decides each record,
/// this type only reads and writes. Replicas share the counters, so a batch first takes a
/// transaction-scoped advisory lock per (account, mode, user, meter) it records for, in one
/// order: concurrent consumes on any replicas queue on it and never overshoot a hard limit
/// (invariant 11). A transaction lock ends with its COMMIT, so it holds behind PgBouncer too.
struct PostgresUsage: UsageStore, UsageReportStore {
    let client: PostgresClient
    let logger: Logger
    /// Announces `usage.limit_reached` in the transaction that reaches the limit; nil: not at all.
    var outbox: OutboxPolicy? = nil

    /// A counter's or gauge's row key: bound as `$1`…`$4` of ``keyed(_:_:_:)``'s queries.
    struct Key: Hashable, Comparable {
        let account: String
        let livemode: Bool
        let user: String
        let meter: String

        init(scope: ServiceScope, user: String, meter: String) {
            (account, livemode, self.user, self.meter) = (scope.account, scope.livemode, user, meter)
        }

        /// An unambiguous text of the key, for its advisory lock.
        var lockText: String {
            [account, livemode ? "1" : "0", user, meter].map { "\($0.utf8.count):\($0)" }.joined()
        }

        static func < (a: Key, b: Key) -> Bool { a.lockText < b.lockText }
    }

    static let keyCondition = #"account = $1 AND livemode = $2 AND "user" = $3 AND meter = $4"#

    /// `sql` with the key bound as `$1`…`$4` and `extra` after it as `$5`….
    static func keyed(_ sql: String, _ key: Key, _ extra: (inout PostgresBindings) throws -> Void = { _ in }) rethrows -> PostgresQuery {
        var binds = PostgresBindings()
        binds.append(key.account)
        binds.append(key.livemode)
        binds.append(key.user)
        binds.append(key.meter)
        try extra(&binds)
        return PostgresQuery(unsafeSQL: sql, binds: binds)
    }

    // MARK: UsageStore

    /// The most batches of several operations (each a savepoint, a subtransaction) in one
    /// transaction: past 64 subtransactions a backend's cache of them overflows, and every
    /// snapshot on the server gets slower.
    static let savepointsPerTransaction = 32

    /// Applies batches in order, in one transaction per ``savepointsPerTransaction`` batches of
    /// several operations; a refused batch is undone to a savepoint.
    func apply(batches: [[UsageOperation]], now: Int64) async throws -> [Result<[UsageOutcome], UsageRefusal>] {
        var results: [Result<[UsageOutcome], UsageRefusal>] = []
        var start = 0
        while start < batches.count {
            var end = start
            var savepoints = 0
            while end < batches.count, savepoints < Self.savepointsPerTransaction || batches[end].count <= 1 {
                if batches[end].count > 1 { savepoints += 1 }
                end += 1
            }
            results += try await applyInOneTransaction(Array(batches[start..<end]), now: now)
            start = end
        }
        return results
    }

    private func applyInOneTransaction(_ batches: [[UsageOperation]], now: Int64) async throws -> [Result<[UsageOutcome], UsageRefusal>] {
        let keys = Set(batches.joined().compactMap { operation in
            operation.recording.map { Key(scope: $0.input.scope, user: $0.input.user, meter: $0.input.meter.id) }
        }).sorted()
        return try await client.transaction(logger: logger) { connection in
            for key in keys {
                try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(key.lockText), 0))", logger: logger)
            }
            var results: [Result<[UsageOutcome], UsageRefusal>] = []
            results.reserveCapacity(batches.count)
            for operations in batches {
                let run = {
                    try await UsageBatch.run(operations) { operation in
                        try await Self.apply(operation, outbox: outbox, now: now, connection: connection, logger: logger)
                    }
                }
                // A lone operation is refused before it writes anything: no savepoint needed.
                guard operations.count > 1 else {
                    results.append(try await run())
                    continue
                }
                try await connection.query("SAVEPOINT usage_batch", logger: logger)
                let result = try await run()
                if UsageBatch.refused(result) { try await connection.query("ROLLBACK TO SAVEPOINT usage_batch", logger: logger) }
                try await connection.query("RELEASE SAVEPOINT usage_batch", logger: logger)
                results.append(result)
            }
            return results
        }
    }

    /// One operation, and the outbox event it causes.
    private static func apply(
        _ operation: UsageOperation, outbox: OutboxPolicy?, now: Int64, connection: PostgresConnection, logger: Logger
    ) async throws -> UsageOutcome {
        let outcome = try await apply(operation, now: now, connection: connection, logger: logger)
        if case .refused(let state) = outcome {
            for try await _ in try await connection.run(
                UsageMarkRows.limitHitSQL, UsageMarkRows.limitHitArguments(state, scope: operation.scope, user: operation.user, now: now),
                logger: logger) {}
        }
        if let outbox, case .recorded(let state, duplicate: false) = outcome {
            try await PostgresOutbox.announceUsage(
                state, scope: operation.scope, user: operation.user, policy: outbox, now: now, connection: connection, logger: logger)
        }
        return outcome
    }

    private static func apply(_ operation: UsageOperation, now: Int64, connection: PostgresConnection, logger: Logger) async throws -> UsageOutcome {
        if let (input, source, refuses) = operation.recording {
            let key = Key(scope: input.scope, user: input.user, meter: input.meter.id)
            let used = try await currentTotal(key, period: input.period, connection: connection, logger: logger)
            let recordedQuantity = try await connection.single(
                keyed("SELECT quantity FROM usageRecord WHERE \(keyCondition) AND idempotencyKey = $5", key) { $0.append(input.idempotencyKey) },
                as: Int64.self, logger: logger)
            var besidePeriodUsed: Int64?
            if recordedQuantity == nil, let span = input.besidePeriod {
                besidePeriodUsed = try await sum(key, period: span, connection: connection, logger: logger)
            }
            let decision = try UsageRecordDecision(
                input, used: used, recordedQuantity: recordedQuantity, refusesOverLimit: refuses, besidePeriodUsed: besidePeriodUsed)
            guard decision.writes else { return decision.outcome }
            let report = UsageRecordReportColumns(input.meter, now: now)
            try await connection.query(
                """
                INSERT INTO usageRecord (account, livemode, "user", meter, quantity, timestamp, idempotencyKey, source, recordedAt,
                    stripeMeter, reportState, reportNextAt)
                VALUES (\(key.account), \(key.livemode), \(key.user), \(key.meter), \(input.quantity), \(input.timestamp),
                    \(input.idempotencyKey), \(source), \(now), \(report.stripeMeter), \(report.state), \(report.nextAt))
                """, logger: logger)
            if let total = decision.newTotal {
                try await connection.query(keyed("UPDATE usageTotal SET used = $5 WHERE \(keyCondition)", key) { $0.append(total) }, logger: logger)
            }
            return decision.outcome
        }
        guard case .setGauge(let scope, let user, let meter, let value, let limit) = operation else { preconditionFailure("a gauge") }
        try await connection.query(
            """
            INSERT INTO usageGauge (account, livemode, "user", meter, value, updatedAt)
            VALUES (\(scope.account), \(scope.livemode), \(user), \(meter.id), \(value), \(now))
            ON CONFLICT (account, livemode, "user", meter) DO UPDATE SET value = excluded.value, updatedAt = excluded.updatedAt
            """, logger: logger)
        return .recorded(UsageMeterState(meter: meter, used: value, limit: limit, period: nil), duplicate: false)
    }

    /// The counter's total over `period`, from its cached row when that row is of this period;
    /// else added up from the records and cached.
    private static func currentTotal(_ key: Key, period: UsagePeriod, connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let cached = try await cachedTotal(key, connection: connection, logger: logger)
        if let used = UsageRecordDecision.cachedUsed(cached, in: period) {
            return used
        }
        if let mark = UsageMarkRows.periodResetArguments(
            cached: cached, period: period, scope: ServiceScope(account: key.account, livemode: key.livemode), user: key.user, meter: key.meter)
        {
            for try await _ in try await connection.run(UsageMarkRows.periodResetSQL, mark, logger: logger) {}
        }
        let used = try await sum(key, period: period, connection: connection, logger: logger)
        try await connection.query(
            """
            INSERT INTO usageTotal (account, livemode, "user", meter, periodStart, periodEnd, used)
            VALUES (\(key.account), \(key.livemode), \(key.user), \(key.meter), \(period.start), \(period.end), \(used))
            ON CONFLICT (account, livemode, "user", meter) DO UPDATE
                SET periodStart = excluded.periodStart, periodEnd = excluded.periodEnd, used = excluded.used
            """, logger: logger)
        return used
    }

    private static func cachedTotal(_ key: Key, connection: PostgresConnection, logger: Logger) async throws -> (period: UsagePeriod, used: Int64)? {
        let rows = try await connection.query(
            keyed("SELECT periodStart, periodEnd, used FROM usageTotal WHERE \(keyCondition)", key), logger: logger)
        for try await (start, end, used) in rows.decode((Int64, Int64, Int64).self) { return (UsagePeriod(start: start, end: end), used) }
        return nil
    }

    private static func sum(_ key: Key, period: UsagePeriod, connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        try await connection.single(
            // SUM of bigint is numeric: held at the largest bigint before the cast, never an error.
            keyed("SELECT LEAST(COALESCE(SUM(quantity), 0), 9223372036854775807)::bigint FROM usageRecord WHERE \(keyCondition) AND timestamp >= $5 AND timestamp < $6", key) {
                $0.append(period.start)
                $0.append(period.end)
            }, as: Int64.self, logger: logger) ?? 0
    }

    /// The states of `meters` for a user, each counter over its period (nil for gauges), read
    /// on one connection.
    func states(
        scope: ServiceScope, user: String, meters: [(meter: UsageMeter, period: UsagePeriod?, limit: EntitlementLimit?)]
    ) async throws -> [UsageMeterState] {
        try await client.withConnection { connection in
            var states: [UsageMeterState] = []
            for entry in meters {
                let key = Key(scope: scope, user: user, meter: entry.meter.id)
                switch entry.meter.kind {
                case .gauge:
                    let level = try await connection.single(
                        Self.keyed("SELECT value FROM usageGauge WHERE \(Self.keyCondition)", key), as: Int64.self, logger: logger)
                    states.append(UsageMeterState(meter: entry.meter, used: level ?? 0, limit: entry.limit, period: nil))
                case .counter:
                    let period = entry.period ?? .calendarMonth(containing: Int64(Date().timeIntervalSince1970))
                    var used = UsageRecordDecision.cachedUsed(
                        try await Self.cachedTotal(key, connection: connection, logger: logger), in: period)
                    if used == nil { used = try await Self.sum(key, period: period, connection: connection, logger: logger) }
                    states.append(UsageMeterState(meter: entry.meter, used: used!, limit: entry.limit, period: period))
                }
            }
            return states
        }
    }

    /// The total of a counter over any span, from the records.
    public func total(scope: ServiceScope, user: String, meter: String, period: UsagePeriod) async throws -> Int64 {
        try await client.withConnection { connection in
            try await Self.sum(Key(scope: scope, user: user, meter: meter), period: period, connection: connection, logger: logger)
        }
    }
}
