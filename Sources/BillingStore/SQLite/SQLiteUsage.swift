import BillingCore
import Foundation
import GRDB

/// The usage side of the ledger on SQLite (``UsageStore`` and ``UsageReportStore``): records,
/// counters' totals per period and gauges, and the queue of reports to Stripe.
///
/// Every write is durable before the caller hears of it, through
/// ``UsageStore/committer(maximumBatch:)``: concurrent requests share a transaction (one fsync),
/// and within it operations run one after another, so concurrent consumes see each other and
/// never overshoot a hard limit.
public struct SQLiteUsage: UsageStore, UsageReportStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Applies batches in order, in one transaction; a refused batch is undone to a savepoint.
    public func apply(batches: [[UsageOperation]], now: Int64) async throws -> [Result<[UsageOutcome], UsageRefusal>] {
        let outbox = database.outbox
        return try await database.writer.write { db in
            try batches.map { operations in
                let run = { try UsageBatch.run(operations) { try Self.apply($0, outbox: outbox, now: now, db: db) } }
                // A lone operation is refused before it writes anything: no savepoint needed.
                guard operations.count > 1 else { return try run() }
                var result: Result<[UsageOutcome], UsageRefusal> = .success([])
                try db.inSavepoint {
                    result = try run()
                    return UsageBatch.refused(result) ? .rollback : .commit
                }
                return result
            }
        }
    }

    /// The states of `meters` for a user, each counter over its period (nil for gauges).
    public func states(
        scope: ServiceScope, user: String, meters: [(meter: UsageMeter, period: UsagePeriod?, limit: EntitlementLimit?)]
    ) async throws -> [UsageMeterState] {
        try await database.writer.read { db in
            try meters.map { entry in
                let key = Key(scope: scope, user: user, meter: entry.meter.id)
                switch entry.meter.kind {
                case .gauge:
                    return UsageMeterState(meter: entry.meter, used: try Self.gauge(key, db: db), limit: entry.limit, period: nil)
                case .counter:
                    let period = entry.period ?? .calendarMonth(containing: Int64(Date().timeIntervalSince1970))
                    let used = try UsageRecordDecision.cachedUsed(Self.cachedTotal(key, db: db), in: period)
                        ?? Self.sum(key, period: period, db: db)
                    return UsageMeterState(meter: entry.meter, used: used, limit: entry.limit, period: period)
                }
            }
        }
    }

    /// The total of a counter over any span, from the records.
    public func total(scope: ServiceScope, user: String, meter: String, period: UsagePeriod) async throws -> Int64 {
        try await database.writer.read { db in try Self.sum(Key(scope: scope, user: user, meter: meter), period: period, db: db) }
    }

    // MARK: - In the transaction

    struct Key {
        let scope: ServiceScope
        let user: String
        let meter: String

        var arguments: StatementArguments { [scope.account, scope.livemode, user, meter] }
    }

    static let keyCondition = "account = ? AND livemode = ? AND user = ? AND meter = ?"

    /// One operation, and the outbox event it causes.
    static func apply(_ operation: UsageOperation, outbox: OutboxPolicy?, now: Int64, db: Database) throws -> UsageOutcome {
        let outcome = try apply(operation, now: now, db: db)
        if case .refused(let state) = outcome {
            try db.cachedStatement(sql: UsageMarkRows.limitHitSQL).execute(
                arguments: arguments(UsageMarkRows.limitHitArguments(state, scope: operation.scope, user: operation.user, now: now)))
        }
        if let outbox, case .recorded(let state, duplicate: false) = outcome {
            try SQLiteOutbox.announceUsage(state, scope: operation.scope, user: operation.user, policy: outbox, now: now, db: db)
        }
        return outcome
    }

    static func apply(_ operation: UsageOperation, now: Int64, db: Database) throws -> UsageOutcome {
        if let (input, source, refuses) = operation.recording {
            return try record(input, source: source, refusesOverLimit: refuses, now: now, db: db)
        }
        guard case .setGauge(let scope, let user, let meter, let value, let limit) = operation else { preconditionFailure() }
        try db.cachedStatement(
            sql: """
                INSERT INTO usageGauge (account, livemode, user, meter, value, updatedAt) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (account, livemode, user, meter) DO UPDATE SET value = excluded.value, updatedAt = excluded.updatedAt
                """
        ).execute(arguments: [scope.account, scope.livemode, user, meter.id, value, now])
        return .recorded(UsageMeterState(meter: meter, used: value, limit: limit, period: nil), duplicate: false)
    }

    static func record(_ input: UsageRecordInput, source: String, refusesOverLimit: Bool, now: Int64, db: Database) throws -> UsageOutcome {
        let key = Key(scope: input.scope, user: input.user, meter: input.meter.id)
        let used = try currentTotal(key, period: input.period, db: db)
        let recordedQuantity = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT quantity FROM usageRecord WHERE \(keyCondition) AND idempotencyKey = ?"),
            arguments: key.arguments + [input.idempotencyKey])
        let besidePeriodUsed = try recordedQuantity == nil ? input.besidePeriod.map { try sum(key, period: $0, db: db) } : nil
        let decision = try UsageRecordDecision(
            input, used: used, recordedQuantity: recordedQuantity, refusesOverLimit: refusesOverLimit, besidePeriodUsed: besidePeriodUsed)
        guard decision.writes else { return decision.outcome }
        let report = UsageRecordReportColumns(input.meter, now: now)
        try db.cachedStatement(
            sql: """
                INSERT INTO usageRecord (account, livemode, user, meter, quantity, timestamp, idempotencyKey, source, recordedAt, stripeMeter, reportState, reportNextAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(
            arguments: key.arguments + [
                input.quantity, input.timestamp, input.idempotencyKey, source, now, report.stripeMeter, report.state, report.nextAt,
            ])
        if let total = decision.newTotal {
            try db.cachedStatement(sql: "UPDATE usageTotal SET used = ? WHERE \(keyCondition)").execute(arguments: [total] + key.arguments)
        }
        return decision.outcome
    }

    /// The counter's total over `period`, from its cached row when that row is of this period;
    /// else added up from the records and cached.
    static func currentTotal(_ key: Key, period: UsagePeriod, db: Database) throws -> Int64 {
        let cached = try cachedTotal(key, db: db)
        if let used = UsageRecordDecision.cachedUsed(cached, in: period) { return used }
        if let mark = UsageMarkRows.periodResetArguments(cached: cached, period: period, scope: key.scope, user: key.user, meter: key.meter) {
            try db.cachedStatement(sql: UsageMarkRows.periodResetSQL).execute(arguments: arguments(mark))
        }
        let used = try sum(key, period: period, db: db)
        try db.cachedStatement(
            sql: """
                INSERT INTO usageTotal (account, livemode, user, meter, periodStart, periodEnd, used) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (account, livemode, user, meter) DO UPDATE
                    SET periodStart = excluded.periodStart, periodEnd = excluded.periodEnd, used = excluded.used
                """
        ).execute(arguments: key.arguments + [period.start, period.end, used])
        return used
    }

    static func cachedTotal(_ key: Key, db: Database) throws -> (period: UsagePeriod, used: Int64)? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT periodStart, periodEnd, used FROM usageTotal WHERE \(keyCondition)"), arguments: key.arguments)
            .map { (UsagePeriod(start: $0[0], end: $0[1]), $0[2]) }
    }

    /// The records' total over `period`, held at `Int64.max`: SQLite's `SUM` raises an error past
    /// it (which would fail the whole group commit), so this adds up with `TOTAL`, exact for every
    /// total below 2^53, far above ``UsageMeter/maximumTotal``.
    static func sum(_ key: Key, period: UsagePeriod, db: Database) throws -> Int64 {
        let total = try Double.fetchOne(
            db.cachedStatement(sql: "SELECT TOTAL(quantity) FROM usageRecord WHERE \(keyCondition) AND timestamp >= ? AND timestamp < ?"),
            arguments: key.arguments + [period.start, period.end]) ?? 0
        return total >= 9.2e18 ? .max : Int64(total)
    }

    static func arguments(_ values: [LedgerValue]) -> StatementArguments {
        StatementArguments(values.map(\.databaseValue))
    }

    static func gauge(_ key: Key, db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM usageGauge WHERE \(keyCondition)"), arguments: key.arguments) ?? 0
    }
}
