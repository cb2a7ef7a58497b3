/// The columns of one result row, read by position, on either backend: the service API's reads
/// decode rows through it, so that SQLite and PostgreSQL share the decoding.
protocol LedgerColumnReading {
    func string(_ index: CInt) -> String?
    func int64(_ index: CInt) -> Int64?
    /// A boolean column (0 or 1 on SQLite); false when NULL.
    func bool(_ index: CInt) -> Bool
}
