import BillingCore
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Writes a batch of Stripe snapshots to the PostgreSQL ledger inside the caller's transaction,
/// in a bounded number of statements whatever the batch's size: one read of the held versions
/// for every object table, then one statement per table written (facts, links, marks, child
/// deletes, child rows, object rows). What is written is decided once, in ``LedgerBatch``; this
/// type only runs the statements, each prepared, its rows bound as one array per column and
/// read back by `unnest`.
///
/// The caller holds the objects' locks (``PostgresObjectLock``) for its transaction, as the group
/// commit and the drain take them up front, so that the versions read stay the held ones until
/// the writes.
enum PostgresLedgerBatch {
    /// Applies `items` as if one after another in their order; the effect of each, in order.
    static func apply(_ items: [LedgerBatch.Item], connection: PostgresConnection, logger: Logger) async throws -> [ApplyEffect] {
        guard !items.isEmpty else { return [] }
        let held = try await heldVersions(LedgerBatch.keys(items), connection: connection, logger: logger)
        let plan = LedgerBatch(items, held: held)
        let run = Inserter(connection: connection, logger: logger)
        try await run.insert(
            into: MetricsFactRows.subscriptionFactTable, columns: MetricsFactRows.subscriptionFactColumns, rows: plan.subscriptionFacts,
            then: "ON CONFLICT DO NOTHING")
        try await run.insert(
            into: "paymentMethodCustomer", columns: ReconcileRepairRows.linkColumns, rows: plan.paymentMethodLinks,
            then: ReconcileRepairRows.linkConflict)
        try await run.insert(
            into: "userLink", columns: LedgerRows.checkoutLinkColumns, rows: plan.checkoutLinks,
            constant: ("source", LedgerRows.checkoutLinkSource), then: "ON CONFLICT DO NOTHING")
        for (table, keys) in Dictionary(grouping: plan.refetchMarks, by: \.table).sorted(by: { $0.key < $1.key }) {
            try await connection.prepared(
                """
                UPDATE \(unescaped: table) t SET needsRefetch = true
                FROM unnest(\(keys.map(\.account))::text[], \(keys.map(\.livemode))::boolean[], \(keys.map(\.id))::text[])
                    AS k (account, livemode, id)
                WHERE t.account = k.account AND t.livemode = k.livemode AND t.id = k.id
                """,
                logger: logger)
        }
        for (table, parents) in Dictionary(grouping: plan.replacedParents, by: { "\($0.table) \($0.parentColumn)" }).sorted(by: { $0.key < $1.key }) {
            let (childTable, column) = (parents[0].table, parents[0].parentColumn)
            try await connection.prepared(
                """
                DELETE FROM \(unescaped: childTable) c
                USING unnest(\(parents.map(\.account))::text[], \(parents.map(\.livemode))::boolean[], \(parents.map(\.id))::text[])
                    AS k (account, livemode, parent)
                WHERE c.account = k.account AND c.livemode = k.livemode AND c.\(unescaped: column) = k.parent
                """,
                logger: logger)
        }
        for (children, rows) in plan.children {
            try await run.insert(into: children.table, columns: children.columns, rows: rows, then: children.conflictClause)
        }
        for upsert in plan.upserts {
            try await run.insert(
                into: upsert.table, columns: upsert.columns, rows: upsert.rows, then: LedgerRows.upsertConflict(columns: upsert.columns))
        }
        return plan.effects
    }

    /// The object tables, in the order of the held-version read's arrays.
    private static let objectTables = LedgerObjectKind.allCases.map(LedgerRows.table)

    /// The read of held versions: one statement for every object table, three arrays (account,
    /// livemode, id) per table, empty for a table the batch does not touch, so that its text is
    /// always the same and prepared once.
    private static let heldVersionsSQL = objectTables.enumerated().map { index, table in
        let first = index * 3 + 1
        return """
            SELECT \(index)::bigint AS tableIndex, account, livemode, id, \(LedgerRows.versionColumns) FROM \(table)
            JOIN unnest($\(first)::text[], $\(first + 1)::boolean[], $\(first + 2)::text[]) AS k (account, livemode, id)
                USING (account, livemode, id)
            """
    }.joined(separator: "\nUNION ALL\n")

    /// The versions the ledger holds for `keys`, in one statement; a key without a row is absent.
    static func heldVersions(
        _ keys: Set<LedgerBatch.Key>, connection: PostgresConnection, logger: Logger
    ) async throws -> [LedgerBatch.Key: SnapshotVersion] {
        let byTable = Dictionary(grouping: keys, by: \.table)
        var binds = PostgresBindings(capacity: objectTables.count * 3)
        for table in objectTables {
            let keys = byTable[table] ?? []
            binds.append(keys.map(\.account))
            binds.append(keys.map(\.livemode))
            binds.append(keys.map(\.id))
        }
        let rows = try await connection.prepared(PostgresQuery(unsafeSQL: heldVersionsSQL, binds: binds), logger: logger)
        var held: [LedgerBatch.Key: SnapshotVersion] = [:]
        for try await (index, account, livemode, id, deleted, terminal, created, transition, rank, eventID) in rows.decode(
            (Int, String, Bool, String, Bool, Bool, Int64, Int64, Int, String).self)
        {
            held[LedgerBatch.Key(table: objectTables[index], account: account, livemode: livemode, id: id)] = SnapshotVersion(
                deleted: deleted, terminal: terminal, eventCreated: created, transitionAt: transition, statusRank: rank, eventID: eventID)
        }
        return held
    }

    /// Multi-row inserts of ledger values, one array per column.
    struct Inserter {
        let connection: PostgresConnection
        let logger: Logger

        /// Inserts `rows` of `columns` into `table` in one prepared statement (nothing when there
        /// are none), `constant` a column every row takes the same SQL value of, `then` the
        /// conflict clause.
        func insert(
            into table: String, columns: [String], rows: [[LedgerValue]], constant: (column: String, sql: String)? = nil, then conflict: String
        ) async throws {
            guard !rows.isEmpty else { return }
            let types = try await PostgresColumnTypes.shared.types(of: columns, in: table, connection: connection, logger: logger)
            var binds = PostgresBindings(capacity: columns.count)
            var arrays: [String] = []
            for (index, type) in types.enumerated() {
                try binds.append(PostgresColumnArray(type: type, values: rows.map { $0[index] }))
                arrays.append("$\(index + 1)::\(type.rawValue)[]")
            }
            let names = columns + (constant.map { [$0.column] } ?? [])
            let select = constant.map { "*, \($0.sql)" } ?? "*"
            let sql = """
                INSERT INTO \(table) (\(names.joined(separator: ", ")))
                SELECT \(select) FROM unnest(\(arrays.joined(separator: ", "))) \(conflict)
                """
            try await connection.prepared(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        }
    }
}

/// The four column types billingd's PostgreSQL tables use (PostgresSchema.swift's note: SQLite's
/// INTEGER, BOOLEAN, TEXT and BLOB), by their SQL names.
enum PostgresColumnType: String, Sendable {
    case bigint, boolean, text, bytea

    var elementType: PostgresDataType {
        switch self {
        case .bigint: .int8
        case .boolean: .bool
        case .text: .text
        case .bytea: .bytea
        }
    }

    var arrayType: PostgresDataType {
        switch self {
        case .bigint: .int8Array
        case .boolean: .boolArray
        case .text: .textArray
        case .bytea: .byteaArray
        }
    }
}

/// The types of billingd's tables' columns, read from the catalog once per table and process:
/// a batch binds each column as an array of its column's type, which a column of nulls alone
/// could not tell.
final class PostgresColumnTypes: Sendable {
    static let shared = PostgresColumnTypes()
    private let tables = Mutex<[String: [String: PostgresColumnType]]>([:])

    /// The types of `columns` of `table`, in order. A column the cache does not know (a migration
    /// added it since) reads the table again.
    func types(of columns: [String], in table: String, connection: PostgresConnection, logger: Logger) async throws -> [PostgresColumnType] {
        if let known = tables.withLock({ $0[table] }), let types = Self.pick(columns, from: known) { return types }
        let rows = try await connection.prepared(
            """
            SELECT attname::text, format_type(atttypid, NULL) FROM pg_attribute
            WHERE attrelid = to_regclass(\(table)) AND attnum > 0 AND NOT attisdropped
            """,
            logger: logger)
        var read: [String: PostgresColumnType] = [:]
        for try await (name, type) in rows.decode((String, String).self) {
            read[name] = PostgresColumnType(rawValue: type)
        }
        tables.withLock { $0[table] = read }
        guard let types = Self.pick(columns, from: read) else {
            throw PostgresColumnTypeUnknown(table: table, columns: columns.filter { read[$0.lowercased()] == nil })
        }
        return types
    }

    private static func pick(_ columns: [String], from known: [String: PostgresColumnType]) -> [PostgresColumnType]? {
        var types: [PostgresColumnType] = []
        for column in columns {
            // A quoted name ("user") is the catalog's name without its quotes.
            guard let type = known[String(column.lowercased().filter { $0 != "\"" })] else { return nil }
            types.append(type)
        }
        return types
    }
}

/// A batch names a column the database does not have, or of a type billingd does not bind.
struct PostgresColumnTypeUnknown: Error, CustomStringConvertible {
    let table: String
    let columns: [String]
    var description: String {
        "\(table) has no column \(columns.joined(separator: ", ")) of type bigint, boolean, text or bytea; is the database migrated?"
    }
}

/// One column of a batch's rows as a PostgreSQL array of the column's type, in the binary format
/// (a null element for a null value), since postgres-nio's own arrays take no null elements.
struct PostgresColumnArray: PostgresThrowingDynamicTypeEncodable {
    let type: PostgresColumnType
    let values: [LedgerValue]

    var psqlType: PostgresDataType { type.arrayType }
    var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) throws {
        buffer.writeInteger(Int32(1))  // dimensions
        buffer.writeInteger(Int32(values.contains(.null) ? 1 : 0))
        buffer.writeInteger(type.elementType.rawValue)
        buffer.writeInteger(Int32(values.count))
        buffer.writeInteger(Int32(1))  // lower bound
        for value in values {
            switch (type, value) {
            case (_, .null):
                buffer.writeInteger(Int32(-1))
            case (.bigint, .integer(let number)):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(number)
            case (.bigint, .boolean(let flag)):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(Int64(flag ? 1 : 0))
            case (.boolean, .boolean(let flag)):
                buffer.writeInteger(Int32(1))
                buffer.writeInteger(UInt8(flag ? 1 : 0))
            case (.boolean, .integer(let number)):
                buffer.writeInteger(Int32(1))
                buffer.writeInteger(UInt8(number != 0 ? 1 : 0))
            case (.text, .text(let text)):
                let length = buffer.writerIndex
                buffer.writeInteger(Int32(0))
                let written = buffer.writeString(text)
                buffer.setInteger(Int32(written), at: length)
            case (.text, .integer(let number)):
                let digits = String(number)
                buffer.writeInteger(Int32(digits.utf8.count))
                buffer.writeString(digits)
            case (.bytea, .blob(let bytes)):
                buffer.writeInteger(Int32(bytes.count))
                buffer.writeBytes(bytes)
            case (.bytea, .text(let text)):
                let length = buffer.writerIndex
                buffer.writeInteger(Int32(0))
                let written = buffer.writeString(text)
                buffer.setInteger(Int32(written), at: length)
            default:
                throw PostgresColumnValueMismatch(type: type, value: value)
            }
        }
    }
}

/// A value that a column's type cannot hold (a text for a bigint column, say). The value itself
/// is not named: it may be a customer's e-mail, which is never logged.
struct PostgresColumnValueMismatch: Error, CustomStringConvertible {
    let type: PostgresColumnType
    let value: LedgerValue
    var description: String {
        let kind = switch value {
        case .null: "a null"
        case .integer: "an integer"
        case .boolean: "a boolean"
        case .text: "a text"
        case .blob: "bytes"
        }
        return "a \(type.rawValue) column cannot hold \(kind)"
    }
}
