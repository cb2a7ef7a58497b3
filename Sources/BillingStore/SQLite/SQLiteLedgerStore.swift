/// The ledger on SQLite: each role's store is a small struct over the one ``LedgerDatabase``,
/// so vending one costs nothing and every store shares its writer and readers.
public struct SQLiteLedgerStore: LedgerStore {
    /// The database behind every store.
    package let database: LedgerDatabase

    public init(database: LedgerDatabase) {
        self.database = database
    }

    public var inbox: any EventInbox { InboxQueue(database: database) }
    public func applier(_ configuration: ApplierConfiguration) -> any EventApplier {
        InboxApplier(database: database, configuration: configuration)
    }
    public var maintenance: any LedgerMaintenanceStore { LedgerMaintenance(database: database) }
    public var users: any UserLedgerStore { UserLedger(database: database) }
    public var reconcileRuns: any ReconcileRunStore { ReconcileRuns(database: database) }
    public var reconciliation: any LedgerReconciliationStore { LedgerReconciliation(database: database) }
    public var usage: any UsageStore { UsageLedger(database: database) }
    public var usageReports: any UsageReportStore { UsageLedger(database: database) }
    public var appStore: any AppStoreLedgerStore { AppStoreLedger(database: database) }
    public var appStoreReconciliation: any AppStoreReconciliationStore { AppStoreReconciliation(database: database) }
    public var invoiceExports: any InvoiceExportStore { InvoiceExporter(database: database) }
    public var outbox: any OutboxStore { OutboxLedger(database: database) }

    public func announcing(_ policy: OutboxPolicy?) -> any LedgerStore {
        SQLiteLedgerStore(database: database.announcing(policy))
    }

    public func checkWritable() async throws { try await database.checkWritable() }
    public func metaValue(_ key: String) async throws -> String? { try await database.metaValue(key) }
    public func setMetaValue(_ key: String, _ value: String) async throws { try await database.setMetaValue(key, value) }
    public func backup(to path: String, overwrite: Bool) async throws -> LedgerBackup {
        try await database.backup(to: path, overwrite: overwrite)
    }
    public func close() throws { try database.close() }
}
