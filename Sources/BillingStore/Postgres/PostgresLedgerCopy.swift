import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Moves a ledger (a SQLite one, through ``LedgerCopySource``) into an empty PostgreSQL one
/// (`billingd copy`): every table the PostgreSQL schema has, table by table in primary-key
/// order, a batch of rows at a time (read in one short read of the source, written as one
/// multi-row insert), so memory stays flat whatever the
/// ledger's size. All of it is one PostgreSQL transaction: a copy that fails leaves the target
/// empty, so it can simply be run again. The copy is then verified by row counts per table.
///
/// Values keep their bytes: SQLite's INTEGER becomes `bigint` (or `boolean` where PostgreSQL's
/// column is one), TEXT `text`, BLOB `bytea`. Positions (inbox `seq`, run ids) are kept, and
/// the identity sequences are moved past them.
public enum PostgresLedgerCopy {
    /// One table's rows in the source and in the target after the copy.
    public struct TableCount: Sendable, Equatable {
        public let table: String
        public let source: Int
        public let target: Int
    }

    /// What was copied; ``isVerified`` when every table's counts agree.
    public struct Report: Sendable {
        public let tables: [TableCount]
        public var isVerified: Bool { tables.allSatisfy { $0.source == $0.target } }
        public var rows: Int { tables.reduce(0) { $0 + $1.target } }
    }

    /// Why a copy was refused or failed; nothing was written to the target.
    public enum Failure: Error, CustomStringConvertible, Equatable {
        /// The target already holds rows (the tables named, with their counts).
        case targetNotEmpty([String])
        /// The source has tables or columns the target's schema lacks: copying would drop them.
        case sourceNotCovered([String])

        public var description: String {
            switch self {
            case .targetNotEmpty(let tables):
                """
                The target database is not empty (\(tables.joined(separator: ", "))): billingd copy only fills an empty \
                ledger. Copy into a new database, or drop this one's tables if it is a failed try you want to repeat.
                """
            case .sourceNotCovered(let names):
                """
                The SQLite ledger has \(names.joined(separator: ", ")), which the PostgreSQL schema lacks: this billingd \
                cannot copy them without losing data. Use a billingd built from the same version as the ledger.
                """
            }
        }
    }

    /// PostgreSQL's tables that are not ledger data and SQLite has no twin of: the migration
    /// record, and reconcile's scratch list of the ids a run saw.
    static let postgresOnlyTables = "'schemamigration', 'reconcileseen'"

    /// Copies `source` into `target`, which must be empty; `progress` hears each table's name and
    /// the rows copied of it so far, after each batch.
    public static func copy(
        from source: some LedgerCopySource, to target: PostgresLedgerStore, batchSize: Int = 1000,
        progress: @escaping @Sendable (String, Int) -> Void = { _, _ in }
    ) async throws -> Report {
        let logger = target.logger
        let tables = try await target.client.withConnection { connection in
            try await targetTables(connection, logger: logger)
        }
        try await checkCovered(source, by: tables)
        try await target.client.transaction(logger: logger) { connection in
            var occupied: [String] = []
            for table in tables {
                let rows = try await connection.single(
                    PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(quoted(table.name))"), as: Int.self, logger: logger) ?? 0
                if rows > 0 { occupied.append("\(table.name): \(rows) rows") }
            }
            guard occupied.isEmpty else { throw Failure.targetNotEmpty(occupied) }
            for table in tables {
                try await copy(table, from: source, batchSize: batchSize, connection: connection, logger: logger) {
                    progress(table.name, $0)
                }
            }
        }
        var counts: [TableCount] = []
        for table in tables {
            let sourceRows = try await source.copyRowCount(of: table.name)
            let targetRows = try await target.client.single(
                PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(quoted(table.name))"), as: Int.self, logger: logger) ?? 0
            counts.append(TableCount(table: table.name, source: sourceRows, target: targetRows))
        }
        return Report(tables: counts)
    }

    /// What a copy holds compared with its source beyond row counts (see
    /// ``compare(_:with:replaying:progress:)``).
    public struct Comparison: Sendable {
        /// The first ledger table whose rows differ from the source's; nil when every row matches.
        public let firstDifference: String?
        /// The replay of the copied inbox on PostgreSQL; nil when it was not run.
        public let replay: ReplayComparison?

        /// Whether the target's ledger rows, and the ledger its replay rebuilt when there was
        /// one, equal the source's.
        public var isIdentical: Bool { firstDifference == nil && replay?.firstDifference == nil }
    }

    /// The copied inbox replayed on PostgreSQL, compared with the source's ledger.
    public struct ReplayComparison: Sendable {
        /// What the replay did.
        public let pass: ApplyPass
        /// The first ledger table whose rebuilt rows differ from the source's; nil when the
        /// rebuilt ledger is the source's, row for row.
        public let firstDifference: String?
    }

    /// Compares a finished copy with its source, row for row (the backends' dumps are written
    /// alike for this): first the ledger as copied, then, with `replaying`, the ledger that the
    /// PostgreSQL applier rebuilds from the copied inbox, which proves the target derives the
    /// same ledger from the same events. The replay announces nothing to the app.
    ///
    /// A replay can only rebuild what events made: rows that reconcile repaired from Stripe's
    /// lists, with no event behind them, are missing from it. So when the rebuilt ledger differs,
    /// the ledger tables are copied from the source again, in one transaction, and the target is
    /// left as copied either way.
    public static func compare(
        _ source: some LedgerCopySource, with target: PostgresLedgerStore, replaying configuration: ApplierConfiguration?,
        progress: @Sendable (Int) -> Void = { _ in }
    ) async throws -> Comparison {
        let expected = try await source.copyDump()
        let maintenance = target.maintenance
        let copied = firstDifference(expected, try await maintenance.dump())
        guard let configuration else { return Comparison(firstDifference: copied, replay: nil) }
        let pass = try await maintenance.replay(applier: target.applier(configuration), progress: progress)
        let rebuilt = firstDifference(expected, try await maintenance.dump())
        if rebuilt != nil { try await recopyLedger(from: source, to: target) }
        return Comparison(firstDifference: copied, replay: ReplayComparison(pass: pass, firstDifference: rebuilt))
    }

    /// The table of the first line in which two dumps differ; nil when they are equal.
    static func firstDifference(_ expected: String, _ actual: String) -> String? {
        guard expected != actual else { return nil }
        var left = expected.split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
        var right = actual.split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
        while true {
            let (a, b) = (left.next(), right.next())
            if a == b, a != nil { continue }
            // A dump line starts with its table's name.
            let line = a ?? b ?? ""
            return line.split(separator: " ", maxSplits: 1).first.map(String.init) ?? "(empty)"
        }
    }

    /// Copies the source's ledger tables (and the metrics' subscription facts, which replay
    /// rewrites too) over the target's again, in one transaction.
    static func recopyLedger(from source: some LedgerCopySource, to target: PostgresLedgerStore) async throws {
        let logger = target.logger
        let ledger = Set(LedgerRows.dumpTables.map { $0.lowercased() })
        try await target.client.transaction(logger: logger) { connection in
            let tables = try await targetTables(connection, logger: logger).filter { ledger.contains($0.name) }
            // Those that reference others last, so that they are emptied first.
            for table in tables.reversed() {
                try await connection.query(PostgresQuery(unsafeSQL: "DELETE FROM \(quoted(table.name))"), logger: logger)
            }
            for table in tables {
                try await copy(table, from: source, batchSize: 1000, connection: connection, logger: logger) { _ in }
            }
        }
    }

    /// A target table: its name and columns (lower case, as PostgreSQL folds them), each column's
    /// type, its primary key, and its identity column if any.
    struct Table {
        let name: String
        let columns: [(name: String, type: String)]
        let primaryKey: [String]
        let identity: String?
    }

    /// The ledger's tables in the target, those another references first (inboxEvent before
    /// inboxBody), the migration record and the metrics index (rebuilt from the copied facts)
    /// left out.
    static func targetTables(_ connection: PostgresConnection, logger: Logger) async throws -> [Table] {
        var columns: [String: [(name: String, type: String)]] = [:]
        var identities: [String: String] = [:]
        let rows = try await connection.query(
            """
            SELECT table_name::text, column_name::text, data_type::text, is_identity::text FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name NOT IN (\(unescaped: postgresOnlyTables))
                AND table_name NOT LIKE 'metricsindex%'
            ORDER BY table_name, ordinal_position
            """, logger: logger)
        for try await (table, column, type, identity) in rows.decode((String, String, String, String).self) {
            columns[table, default: []].append((column, type))
            if identity == "YES" { identities[table] = column }
        }
        var keys: [String: [String]] = [:]
        let keyRows = try await connection.query(
            """
            SELECT c.relname::text, a.attname::text FROM pg_index i
            JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, position) ON true
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
            WHERE i.indisprimary AND n.nspname = current_schema()
            ORDER BY c.relname, k.position
            """, logger: logger)
        for try await (table, column) in keyRows.decode((String, String).self) { keys[table, default: []].append(column) }
        var references: [(from: String, to: String)] = []
        let referenceRows = try await connection.query(
            """
            SELECT c.relname::text, r.relname::text FROM pg_constraint k
            JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE k.contype = 'f' AND n.nspname = current_schema()
            """, logger: logger)
        for try await (from, to) in referenceRows.decode((String, String).self) { references.append((from, to)) }
        // Referenced tables first: a table waits for every table it references.
        var ordered: [String] = []
        var remaining = columns.keys.sorted()
        while !remaining.isEmpty {
            let ready = remaining.filter { table in
                references.allSatisfy { $0.from != table || $0.to == table || ordered.contains($0.to) }
            }
            let next = ready.isEmpty ? remaining : ready
            ordered += next
            remaining.removeAll { next.contains($0) }
        }
        return ordered.map { Table(name: $0, columns: columns[$0]!, primaryKey: keys[$0] ?? [], identity: identities[$0]) }
    }

    /// Refuses a source whose tables or columns the target lacks.
    static func checkCovered(_ source: some LedgerCopySource, by tables: [Table]) async throws {
        let targetColumns = Dictionary(uniqueKeysWithValues: tables.map { ($0.name, Set($0.columns.map(\.name))) })
        var missing: [String] = []
        for (name, sourceColumns) in try await source.copyTables() {
            guard let columns = targetColumns[name.lowercased()] else {
                missing.append("the table \(name)")
                continue
            }
            for column in sourceColumns where !columns.contains(column.lowercased()) {
                missing.append("the column \(name).\(column)")
            }
        }
        guard missing.isEmpty else { throw Failure.sourceNotCovered(missing) }
    }

    /// Copies one table in primary-key order, `batchSize` rows (fewer for wide tables) per read
    /// and insert, then moves its identity sequence past the copied values.
    static func copy(
        _ table: Table, from source: some LedgerCopySource, batchSize: Int, connection: PostgresConnection, logger: Logger,
        progress: (Int) -> Void
    ) async throws {
        let present = try await source.copyColumns(of: table.name)
        let columns = table.columns.filter { present.contains($0.name) }
        guard !columns.isEmpty else { return }
        let keyOffset = columns.count
        let rowsPerBatch = max(1, min(batchSize, 30_000 / columns.count))
        var after: [LedgerCopyValue]?
        var copied = 0
        while true {
            let batch = try await source.copyRows(
                of: table.name, columns: columns.map(\.name), key: table.primaryKey, after: after, limit: rowsPerBatch)
            guard !batch.isEmpty else { break }
            try await insert(batch, into: table, columns: columns, connection: connection, logger: logger)
            copied += batch.count
            progress(copied)
            after = Array(batch.last![keyOffset...])
            if batch.count < rowsPerBatch { break }
        }
        if let identity = table.identity, columns.contains(where: { $0.name == identity }) {
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT setval(pg_get_serial_sequence('\(table.name)', '\(identity)'),
                            COALESCE((SELECT max(\(quoted(identity))) FROM \(quoted(table.name))), 0) + 1, false)
                        """), logger: logger)
        }
    }

    /// One multi-row insert of a batch, each value bound and cast to its column's type.
    static func insert(
        _ batch: [[LedgerCopyValue]], into table: Table, columns: [(name: String, type: String)], connection: PostgresConnection,
        logger: Logger
    ) async throws {
        var binds = PostgresBindings(capacity: batch.count * columns.count)
        var tuples: [String] = []
        tuples.reserveCapacity(batch.count)
        for row in batch {
            var cells: [String] = []
            for (index, column) in columns.enumerated() {
                try bind(row[index], as: column.type, to: &binds)
                cells.append("$\(binds.count)::\(column.type)")
            }
            tuples.append("(\(cells.joined(separator: ", ")))")
        }
        try await connection.query(
            PostgresQuery(
                unsafeSQL: "INSERT INTO \(quoted(table.name)) (\(columns.map { quoted($0.name) }.joined(separator: ", "))) VALUES \(tuples.joined(separator: ", "))",
                binds: binds),
            logger: logger)
    }

    /// Binds a source value as the PostgreSQL type of its column.
    static func bind(_ value: LedgerCopyValue, as type: String, to binds: inout PostgresBindings) throws {
        switch (value, type) {
        case (.null, _): binds.appendNull()
        case (.integer(let number), "boolean"): binds.append(number != 0)
        case (.integer(let number), "text"): binds.append(String(number))
        case (.integer(let number), _): binds.append(number)
        case (.real(let number), "bigint"): binds.append(Int64(number))
        case (.real(let number), _): binds.append(number)
        case (.text(let text), "bytea"): binds.append(ByteBuffer(string: text))
        case (.text(let text), _): binds.append(text)
        case (.blob(let data), "bytea"): binds.append(ByteBuffer(bytes: data))
        case (.blob(let data), _): binds.append(String(decoding: data, as: UTF8.self))
        }
    }

    /// A quoted identifier (every name here comes from the catalogs, never from input).
    static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
