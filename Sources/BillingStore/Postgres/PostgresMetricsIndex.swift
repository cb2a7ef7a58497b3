import BillingCore
import Foundation
import Logging
import PostgresNIO

/// The PostgreSQL metrics index: the twin of SQLite/SQLiteMetricsIndex.swift, executing
/// ``MetricsIndexRows``'s statements. Refreshes take a transaction-scoped advisory lock, so that
/// replicas refreshing together take turns rather than both adding one subscription's changes to
/// the day sums; a mark whose facts changed again while a refresh read them keeps its newer
/// `seq` and stays for the next refresh.
struct PostgresMetricsIndex {
    let client: PostgresClient
    let logger: Logger

    /// The refresh lock's key: "billmetr" in ASCII.
    static let lockKey: Int64 = 0x6269_6c6c_6d65_7472

    func refresh(catalog: PlanCatalog) async throws {
        let fingerprint = catalog.metricsFingerprint
        let (stored, marked) = try await client.withConnection { connection in
            (
                try await Self.rows(MetricsIndexRows.stateSQL, [.text(MetricsIndexRows.fingerprintName)], connection, logger: logger).first?[0].text,
                try await Self.rows(MetricsIndexRows.anyDirtySQL, [], connection, logger: logger).first?[0].integer ?? 0
            )
        }
        if stored != fingerprint {
            try await client.transaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: logger)
                let current = try await Self.rows(MetricsIndexRows.stateSQL, [.text(MetricsIndexRows.fingerprintName)], connection, logger: logger)
                guard current.first?[0].text != fingerprint else { return }
                for statement in MetricsIndexRows.clearSQL { try await connection.runOnce(statement, [], logger: logger) }
                for select in MetricsIndexRows.everySubscriptionSQL {
                    try await connection.runOnce("\(Self.insertMarks) SELECT *, nextval('metricsIndexDirty_seq') FROM (\(select)) AS marked \(Self.onMarked)", [], logger: logger)
                }
                try await connection.runOnce(MetricsIndexRows.setStateSQL, [.text(MetricsIndexRows.fingerprintName), .text(fingerprint)], logger: logger)
            }
        } else if marked == 0 {
            return
        }
        while try await client.transaction(logger: logger, { connection in try await refreshBatch(catalog: catalog, connection: connection) }) {}
    }

    /// Rebuilds one batch of marked subscriptions; false when none was marked.
    private func refreshBatch(catalog: PlanCatalog, connection: PostgresConnection) async throws -> Bool {
        try await connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: logger)
        let marks = try await Self.rows(MetricsIndexRows.marksSQL, [.integer(Int64(SQLiteMetricsIndex.batch))], connection, logger: logger)
            .compactMap(MetricsIndexRows.mark)
        guard !marks.isEmpty else { return false }
        for (group, groupMarks) in Dictionary(grouping: marks, by: \.group) {
            let subscriptions = groupMarks.map(\.subscription)
            let reads = MetricsIndexRows.reads(group, subscriptions: subscriptions)
            var facts: [[[LedgerValue]]] = []
            for (sql, values) in reads.facts { facts.append(try await Self.rows(sql, values, connection, logger: logger)) }
            let oldSpans = try await Self.rows(reads.spans.0, reads.spans.1, connection, logger: logger)
            for (sql, values) in MetricsIndexRows.writes(group, subscriptions: subscriptions, facts: facts, oldSpans: oldSpans, catalog: catalog) {
                try await Self.execute(sql, values, connection, logger: logger)
            }
        }
        // The marks in one statement (a mark whose seq moved on while the batch was read stays).
        try await connection.prepared(
            """
            DELETE FROM metricsIndexDirty d
            USING unnest(\(marks.map(\.store.rawValue))::text[], \(marks.map(\.account))::text[], \(marks.map(\.livemode))::boolean[],
                \(marks.map(\.subscription))::text[], \(marks.map(\.seq))::bigint[]) AS m (store, account, livemode, subscription, seq)
            WHERE d.store = m.store AND d.account = m.account AND d.livemode = m.livemode AND d.subscription = m.subscription
                AND d.seq = m.seq
            """,
            logger: logger)
        return true
    }

    /// Every row of a statement as ledger values (see ``execute(_:_:_:logger:)``).
    static func rows(_ sql: String, _ values: [LedgerValue], _ connection: PostgresConnection, logger: Logger) async throws -> [[LedgerValue]] {
        var result: [[LedgerValue]] = []
        for try await row in try await execute(sql, values, connection, logger: logger) {
            result.append(try row.map { try LedgerValue($0) })
        }
        return result
    }

    /// Runs a statement, prepared unless its text holds a list of ids: a batch's size varies, and
    /// each length would take one of the process's bounded prepared names.
    @discardableResult
    static func execute(_ sql: String, _ values: [LedgerValue], _ connection: PostgresConnection, logger: Logger) async throws -> PostgresRows {
        MetricsIndexRows.hasIDList(sql)
            ? try await connection.runOnce(sql, values, logger: logger) : try await connection.run(sql, values, logger: logger)
    }

    static let insertMarks = "INSERT INTO metricsIndexDirty (store, account, livemode, subscription, seq)"
    /// A mark made again takes the newer `seq`: a refresh reading the older leaves it.
    static let onMarked = "ON CONFLICT (store, account, livemode, subscription) DO UPDATE SET seq = excluded.seq"

    /// The reads of one scope, each in one repeatable-read transaction.
    struct Reads: MetricsIndexReads {
        let client: PostgresClient
        let logger: Logger
        let groups: [MetricsIndexRows.Group]

        private func read<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws -> Result {
            try await client.transaction(logger: logger) { connection in
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
                return try await body(connection)
            }
        }

        func sums(before day: Int64) async throws -> [MetricsTallyKey: MetricsTally] {
            try await read { connection in
                var sums: [MetricsTallyKey: MetricsTally] = [:]
                for group in groups {
                    for row in try await rows(MetricsIndexRows.sumsSQL, group.values + [.integer(day)], connection, logger: logger) {
                        let (key, tally) = MetricsIndexRows.sum(row, store: group.store)
                        sums[key, default: .zero] += tally
                    }
                }
                return sums
            }
        }

        func boundaryChanges(from: Int64, through: Int64) async throws -> [MetricsTallyKey: MetricsTally] {
            try await read { connection in
                var changes = MetricsIndexing.BoundaryChanges(from: from, through: through)
                for group in groups {
                    let values = MetricsIndexRows.boundarySpansArguments(group, from: from, through: through)
                    // Folded as the rows arrive: never all of a busy day's spans at once.
                    for try await row in try await execute(MetricsIndexRows.boundarySpansSQL, values, connection, logger: logger) {
                        if let span = MetricsIndexRows.span(try row.map { try LedgerValue($0) }, store: group.store) { changes.add(span) }
                    }
                }
                return changes.tallies
            }
        }

        func changedHistories(after: Int64, through: Int64) async throws -> [SubscriptionHistory] {
            try await read { connection in
                var histories: [SubscriptionHistory] = []
                for group in groups {
                    let values = MetricsIndexRows.changedSpansArguments(group, after: after, through: through)
                    histories += MetricsIndexRows.histories(
                        try await rows(MetricsIndexRows.changedSpansSQL, values, connection, logger: logger), store: group.store)
                }
                return histories
            }
        }

        func trials(from: Int64, to: Int64, now: Int64) async throws -> [JudgedTrial] {
            try await read { connection in
                var trials: [JudgedTrial] = []
                for group in groups {
                    let values: [LedgerValue] = [.integer(now), .integer(now)] + group.values + [.integer(from), .integer(to)]
                    trials += MetricsIndexRows.judgedTrials(
                        try await rows(MetricsIndexRows.trialsSQL, values, connection, logger: logger), store: group.store, now: now)
                }
                return trials
            }
        }
    }

    /// The metrics index (`v12-metrics-index` on SQLite): its tables, and a trigger per fact
    /// table that marks a subscription when its facts change.
    /// The span indexes carrying the subscription (`v18-metrics-span-clustered` on SQLite): the
    /// changed subscriptions of a range come from the indexes alone.
    static let coveringMigration = PostgresMigrations.Migration(
        version: "v16-metrics-span-covering",
        statements: ["DROP INDEX metricsIndexSpan_start", "DROP INDEX metricsIndexSpan_end"] + MetricsIndexRows.coveringSpanIndexesSQL)

    static let migration = PostgresMigrations.Migration(
        version: "v10-metrics-index",
        statements: ["CREATE SEQUENCE metricsIndexDirty_seq"]
            + MetricsIndexRows.createTablesSQL(types: MetricsIndexRows.postgresTypes, dirtySeq: "bigint NOT NULL")
            + MetricsIndexRows.markings.flatMap(triggers))

    /// A fact table's trigger function and trigger: the old row's subscriptions marked after an
    /// update or delete, the new row's after an insert or update.
    static func triggers(_ marking: MetricsIndexRows.Marking) -> [String] {
        let function = "metricsIndex_mark_\(marking.table)"
        let mark = { (row: String) -> String in
            let select = marking.select.replacingOccurrences(of: "ROW.", with: "\(row).")
            let insert = "\(insertMarks) SELECT *, nextval('metricsIndexDirty_seq') FROM (\(select)) AS marked \(onMarked);"
            guard let condition = marking.when?.replacingOccurrences(of: "ROW.", with: "\(row).") else { return insert }
            return "IF \(condition) THEN \(insert) END IF;"
        }
        return [
            """
            CREATE FUNCTION \(function)() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP <> 'INSERT' THEN \(mark("OLD")) END IF;
                IF TG_OP <> 'DELETE' THEN \(mark("NEW")) END IF;
                RETURN NULL;
            END $$
            """,
            """
            CREATE TRIGGER metricsIndex_mark AFTER INSERT OR DELETE\(marking.onUpdate ? " OR UPDATE" : "") ON \(marking.table)
            FOR EACH ROW EXECUTE FUNCTION \(function)()
            """,
        ]
    }
}
