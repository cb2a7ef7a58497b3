/// A value of a ledger row on its way from one backend to another, in SQLite's storage classes
/// (the target casts it to its column's type).
public enum LedgerCopyValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// A ledger that `billingd copy` reads from: its tables and columns, and its rows in key order,
/// a batch at a time, so that memory stays flat whatever the ledger's size.
public protocol LedgerCopySource: Sendable {
    /// Every table of ledger data with its columns, as the source spells them; the source's own
    /// bookkeeping (its catalog, its migration record) left out.
    func copyTables() async throws -> [(name: String, columns: [String])]

    /// The columns of one table, lower case; empty when the source has no such table.
    func copyColumns(of table: String) async throws -> Set<String>

    /// Up to `limit` rows of `table` after the key values `after` (from the start when nil), in
    /// the order of `key` (or in the source's own row order when `key` is empty or not all
    /// present). Each row is the values of `columns`, followed by the values of its order key,
    /// which the next call passes back as `after`.
    func copyRows(
        of table: String, columns: [String], key: [String], after: [LedgerCopyValue]?, limit: Int
    ) async throws -> [[LedgerCopyValue]]

    /// How many rows `table` holds.
    func copyRowCount(of table: String) async throws -> Int

    /// The ledger as the maintenance dump prints it, for comparing a copy with its source.
    func copyDump() async throws -> String
}
