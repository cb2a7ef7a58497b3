import GRDB

/// The columns of the row a statement stands on, read straight from SQLite. The status reads use
/// it instead of GRDB's `Row`, which builds a dictionary of the statement's column names for
/// every cursor: more work than the handful of values a status read needs.
struct SQLiteColumns: LedgerColumnReading {
    let statement: SQLiteStatement

    func string(_ index: CInt) -> String? { String.fromStatement(statement, atUncheckedIndex: index) }
    func int64(_ index: CInt) -> Int64? { Int64.fromStatement(statement, atUncheckedIndex: index) }
    func bool(_ index: CInt) -> Bool { Bool.fromStatement(statement, atUncheckedIndex: index) ?? false }

    /// Runs `statement` and calls `body` on each row it returns.
    static func forEachRow(_ statement: Statement, arguments: StatementArguments, _ body: (SQLiteColumns) throws -> Void) throws {
        // A value cursor steps the statement without building rows; the values come from the
        // statement itself while it stands on each row.
        let cursor = try String?.fetchCursor(statement, arguments: arguments)
        let columns = SQLiteColumns(statement: statement.sqliteStatement)
        while try cursor.next() != nil {
            try body(columns)
        }
    }
}
