import Foundation
import GRDB

/// A SQLite ledger as the source of `billingd copy`: tables and columns from the catalog, rows
/// read in key order, one short read per batch.
extension SQLiteDatabase: LedgerCopySource {
    /// SQLite's own tables, GRDB's migration record and the metrics index (the target rebuilds
    /// it from the facts), which are not ledger data.
    static func isBookkeeping(_ table: String) -> Bool {
        table.hasPrefix("sqlite_") || table == "grdb_migrations" || MetricsIndexRows.isIndexTable(table)
    }

    public func copyTables() async throws -> [(name: String, columns: [String])] {
        try await writer.read { db in
            let names = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            return try names.filter { !Self.isBookkeeping($0) }.map { name in (name, try db.columns(in: name).map(\.name)) }
        }
    }

    public func copyColumns(of table: String) async throws -> Set<String> {
        try await writer.read { db in
            try db.tableExists(table) ? Set(try db.columns(in: table).map { $0.name.lowercased() }) : []
        }
    }

    public func copyRows(
        of table: String, columns: [String], key: [String], after: [LedgerCopyValue]?, limit: Int
    ) async throws -> [[LedgerCopyValue]] {
        let present = try await copyColumns(of: table)
        // SQLite keys a table without a declared key by rowid.
        let order = key.allSatisfy(present.contains) && !key.isEmpty ? key.map(Self.quoted) : ["rowid"]
        let select = "SELECT \(columns.map(Self.quoted).joined(separator: ", ")), \(order.joined(separator: ", ")) FROM \(Self.quoted(table))"
        let orderBy = "ORDER BY \(order.joined(separator: ", ")) LIMIT \(limit)"
        return try await writer.read { db in
            let condition = after.map { keys in
                "WHERE (\(order.joined(separator: ", "))) > (\(Array(repeating: "?", count: keys.count).joined(separator: ", ")))"
            } ?? ""
            let arguments = StatementArguments((after ?? []).map(\.databaseValue))
            return try Row.fetchAll(db, sql: "\(select) \(condition) \(orderBy)", arguments: arguments)
                .map { row in (0..<row.count).map { LedgerCopyValue(row[$0] as DatabaseValue) } }
        }
    }

    public func copyRowCount(of table: String) async throws -> Int {
        try await writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(Self.quoted(table))") ?? 0 }
    }

    public func copyDump() async throws -> String {
        try await SQLiteMaintenance(database: self).dump()
    }

    /// A quoted identifier (every name here comes from the catalogs, never from input).
    static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension LedgerCopyValue {
    /// A SQLite value, storage class kept.
    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .real(number)
        case .string(let text): self = .text(text)
        case .blob(let data): self = .blob([UInt8](data))
        }
    }

    /// The value as SQLite binds it.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let number): number.databaseValue
        case .real(let number): number.databaseValue
        case .text(let text): text.databaseValue
        case .blob(let bytes): Data(bytes).databaseValue
        }
    }
}
