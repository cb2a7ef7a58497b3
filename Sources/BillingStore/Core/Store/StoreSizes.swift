/// How much room the store takes (``LedgerStore/sizes()``), for `billingd_store_bytes` and its
/// siblings on `/metrics`: what grows with the event volume, and what a full disk would refuse.
public struct StoreSizes: Sendable, Equatable {
    /// Bytes of each table with its indexes (on PostgreSQL with its TOAST too), by the table's name
    /// in lower case, as PostgreSQL spells it, so that both backends give the same labels.
    public var tables: [String: Int64]
    /// The whole database: SQLite's file (every page, free ones included, not the `-wal`),
    /// PostgreSQL's database (`pg_database_size`).
    public var database: Int64
    /// Pages of SQLite's file that no table uses (its free list), which later writes take before
    /// the file grows; 0 on PostgreSQL, whose free space lies inside each table.
    public var free: Int64

    public init(tables: [String: Int64], database: Int64, free: Int64) {
        self.tables = tables
        self.database = database
        self.free = free
    }
}
