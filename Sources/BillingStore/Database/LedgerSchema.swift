import GRDB

extension LedgerMigrations {
    /// The ledger tables (customers, subscriptions, invoices, …).
    static func registerLedgerMigrations(_ migrator: inout DatabaseMigrator) {
    }
}
