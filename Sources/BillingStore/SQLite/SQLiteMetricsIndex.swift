import BillingCore
import Foundation
import GRDB

/// The SQLite metrics index: executes ``MetricsIndexRows``'s statements. A refresh is one write
/// transaction per batch of marked subscriptions, so the ingest's group commits wait at most one
/// batch; a read is one read transaction.
struct SQLiteMetricsIndex {
    let database: SQLiteDatabase

    /// The subscriptions rebuilt per transaction.
    static let batch = 500

    /// Brings the index up to date with the facts under `catalog`: everything rebuilt when the
    /// catalog (or the rules) changed, else the marked subscriptions.
    func refresh(catalog: PlanCatalog) async throws {
        let fingerprint = catalog.metricsFingerprint
        let (stored, marked) = try await database.writer.read { db in
            (
                try String.fetchOne(db, sql: MetricsIndexRows.stateSQL, arguments: [MetricsIndexRows.fingerprintName]),
                try Int.fetchOne(db, sql: MetricsIndexRows.anyDirtySQL) ?? 0
            )
        }
        if stored != fingerprint {
            try await database.writer.write { db in
                guard try String.fetchOne(db, sql: MetricsIndexRows.stateSQL, arguments: [MetricsIndexRows.fingerprintName]) != fingerprint
                else { return }
                for statement in MetricsIndexRows.clearSQL { try db.execute(sql: statement) }
                for select in MetricsIndexRows.everySubscriptionSQL {
                    try db.execute(sql: "INSERT OR IGNORE INTO metricsIndexDirty (store, account, livemode, subscription, seq) SELECT *, 0 FROM (\(select))")
                }
                try db.execute(sql: MetricsIndexRows.setStateSQL, arguments: [MetricsIndexRows.fingerprintName, fingerprint])
            }
        } else if marked == 0 {
            return
        }
        while try await database.writer.write({ db in try Self.refreshBatch(catalog: catalog, db: db) }) {}
    }

    /// Rebuilds one batch of marked subscriptions; false when none was marked.
    static func refreshBatch(catalog: PlanCatalog, db: Database) throws -> Bool {
        let marks = try rows(MetricsIndexRows.marksSQL, [.integer(Int64(batch))], db: db).compactMap(MetricsIndexRows.mark)
        guard !marks.isEmpty else { return false }
        for (group, groupMarks) in Dictionary(grouping: marks, by: \.group) {
            let subscriptions = groupMarks.map(\.subscription)
            let reads = MetricsIndexRows.reads(group, subscriptions: subscriptions)
            let facts = try reads.facts.map { try rows($0.0, $0.1, db: db) }
            let oldSpans = try rows(reads.spans.0, reads.spans.1, db: db)
            for (sql, values) in MetricsIndexRows.writes(group, subscriptions: subscriptions, facts: facts, oldSpans: oldSpans, catalog: catalog) {
                try db.cachedStatement(sql: sql).execute(arguments: arguments(values))
            }
        }
        for mark in marks {
            try db.cachedStatement(sql: MetricsIndexRows.unmarkSQL).execute(arguments: arguments(MetricsIndexRows.unmarkArguments(mark)))
        }
        return true
    }

    private static func rows(_ sql: String, _ values: [LedgerValue], db: Database) throws -> [[LedgerValue]] {
        try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments(values)).map { row in row.databaseValues.map(LedgerValue.init) }
    }

    private static func arguments(_ values: [LedgerValue]) -> StatementArguments {
        StatementArguments(values.map(\.databaseValue))
    }

    /// The reads of one scope, each in one read transaction.
    struct Reads: MetricsIndexReads {
        let database: SQLiteDatabase
        let groups: [MetricsIndexRows.Group]

        func sums(before day: Int64) async throws -> [MetricsTallyKey: MetricsTally] {
            try await database.writer.read { db in
                var sums: [MetricsTallyKey: MetricsTally] = [:]
                for group in groups {
                    for row in try rows(MetricsIndexRows.sumsSQL, group.values + [.integer(day)], db: db) {
                        let (key, tally) = MetricsIndexRows.sum(row, store: group.store)
                        sums[key, default: .zero] += tally
                    }
                }
                return sums
            }
        }

        func boundaryChanges(from: Int64, through: Int64) async throws -> [MetricsTallyKey: MetricsTally] {
            try await database.writer.read { db in
                var changes = MetricsIndexing.BoundaryChanges(from: from, through: through)
                for group in groups {
                    let values = MetricsIndexRows.boundarySpansArguments(group, from: from, through: through)
                    let cursor = try Row.fetchCursor(db.cachedStatement(sql: MetricsIndexRows.boundarySpansSQL), arguments: arguments(values))
                    while let row = try cursor.next() {
                        if let span = MetricsIndexRows.span(row.databaseValues.map(LedgerValue.init), store: group.store) { changes.add(span) }
                    }
                }
                return changes.tallies
            }
        }

        func changedHistories(after: Int64, through: Int64) async throws -> [SubscriptionHistory] {
            try await database.writer.read { db in
                try groups.flatMap { group in
                    let values = MetricsIndexRows.changedSpansArguments(group, after: after, through: through)
                    return MetricsIndexRows.histories(try rows(MetricsIndexRows.changedSpansSQL, values, db: db), store: group.store)
                }
            }
        }

        func trials(from: Int64, to: Int64, now: Int64) async throws -> [JudgedTrial] {
            try await database.writer.read { db in
                try groups.flatMap { group in
                    let values: [LedgerValue] = [.integer(now), .integer(now)] + group.values + [.integer(from), .integer(to)]
                    return MetricsIndexRows.judgedTrials(try rows(MetricsIndexRows.trialsSQL, values, db: db), store: group.store, now: now)
                }
            }
        }
    }
}

extension SQLiteMigrations {
    /// The metrics index (`v10-metrics-index` on PostgreSQL): its tables, and the triggers that
    /// mark a subscription when its facts change. Empty until the first refresh, which finds no
    /// catalog fingerprint and builds it from every fact.
    static func registerMetricsIndexMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v12-metrics-index") { db in
            for statement in MetricsIndexRows.createTablesSQL(types: MetricsIndexRows.sqliteTypes, dirtySeq: "INTEGER NOT NULL DEFAULT 0") {
                try db.execute(sql: statement)
            }
            for marking in MetricsIndexRows.markings {
                for statement in SQLiteMetricsIndex.triggers(marking) { try db.execute(sql: statement) }
            }
        }
    }
}

extension SQLiteMigrations {
    /// The spans clustered by subscription (`WITHOUT ROWID`: a subscription's spans are read
    /// where its key is, not from the table row by row) and the span indexes carrying the
    /// subscription (`v16-metrics-span-covering` on PostgreSQL): the movement and churn of a
    /// month at 1,000,000 subscriptions read two index ranges and the changed subscriptions'
    /// keys, not every span. The rows are copied, so the index is not rebuilt.
    static func registerMetricsSpanMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v18-metrics-span-clustered") { db in
            try db.execute(sql: """
                CREATE TABLE metricsIndexSpanClustered (
                    store TEXT NOT NULL, account TEXT NOT NULL, livemode BOOLEAN NOT NULL, subscription TEXT NOT NULL,
                    spanStart INTEGER NOT NULL, spanEnd INTEGER, kind TEXT NOT NULL, plan TEXT NOT NULL,
                    currency TEXT NOT NULL, monthly INTEGER NOT NULL,
                    PRIMARY KEY (store, account, livemode, subscription, spanStart)
                ) WITHOUT ROWID
                """)
            try db.execute(sql: """
                INSERT INTO metricsIndexSpanClustered
                SELECT store, account, livemode, subscription, spanStart, spanEnd, kind, plan, currency, monthly FROM metricsIndexSpan
                """)
            try db.execute(sql: "DROP TABLE metricsIndexSpan")
            try db.execute(sql: "ALTER TABLE metricsIndexSpanClustered RENAME TO metricsIndexSpan")
            for statement in MetricsIndexRows.coveringSpanIndexesSQL { try db.execute(sql: statement) }
        }
    }
}

extension SQLiteMetricsIndex {
    /// A fact table's triggers: after an insert (the new row), a delete (the old one) and, for
    /// tables whose rows change, an update (both), the subscriptions the row touches are marked.
    static func triggers(_ marking: MetricsIndexRows.Marking) -> [String] {
        var events: [(name: String, event: String, rows: [String])] = [("insert", "INSERT", ["NEW"]), ("delete", "DELETE", ["OLD"])]
        if marking.onUpdate { events.append(("update", "UPDATE", ["OLD", "NEW"])) }
        return events.map { name, event, rows in
            let inserts = rows.map { row in
                let select = marking.select.replacingOccurrences(of: "ROW.", with: "\(row).")
                let condition = marking.when?.replacingOccurrences(of: "ROW.", with: "\(row).") ?? "1"
                // An upsert, not INSERT OR IGNORE: the statement that fires the trigger imposes its
                // own conflict algorithm (ABORT) on an OR clause in the trigger, not on an upsert's.
                return """
                    INSERT INTO metricsIndexDirty (store, account, livemode, subscription, seq)
                    SELECT *, 0 FROM (\(select)) AS marked WHERE \(condition) ON CONFLICT DO NOTHING;
                    """
            }
            return """
                CREATE TRIGGER metricsIndex_\(marking.table)_\(name) AFTER \(event) ON \(marking.table) BEGIN
                \(inserts.joined(separator: "\n"))
                END
                """
        }
    }
}
