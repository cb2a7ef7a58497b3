/// The ledger on SQLite: each role's store is a small struct over the one ``SQLiteDatabase``,
/// so vending one costs nothing and every store shares its writer and readers.
public struct SQLiteLedgerStore: LedgerStore {
    /// The database behind every store.
    package let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    public var inbox: any EventInbox { SQLiteInbox(database: database) }
    public func applier(_ configuration: ApplierConfiguration) -> any EventApplier {
        SQLiteApplier(database: database, configuration: configuration)
    }
    public var maintenance: any LedgerMaintenanceStore { SQLiteMaintenance(database: database) }
    public var users: any UserLedgerStore { SQLiteUsers(database: database) }
    public var reconcileRuns: any ReconcileRunStore { SQLiteReconcileRuns(database: database) }
    public var reconciliation: any LedgerReconciliationStore { SQLiteLedgerReconciliation(database: database) }
    public var usage: any UsageStore { SQLiteUsage(database: database) }
    public var usageReports: any UsageReportStore { SQLiteUsage(database: database) }
    public var appStore: any AppStoreLedgerStore { SQLiteAppStore(database: database) }
    public var appStoreReconciliation: any AppStoreReconciliationStore { SQLiteAppStore(database: database) }
    public var appStoreConsumption: any AppStoreConsumptionStore { SQLiteAppStoreConsumption(database: database) }
    public var invoiceExports: any InvoiceExportStore { SQLiteInvoiceExporter(database: database) }
    public var outbox: any OutboxStore { SQLiteOutbox(database: database) }
    public var metrics: any MetricsFactStore { SQLiteMetricsFacts(database: database) }
    public var grants: any GrantStore { SQLiteGrants(database: database) }
    public var timeline: any TimelineStore { SQLiteTimeline(database: database) }
    public var retention: any BodyRetentionStore { SQLiteBodyRetention(database: database) }

    public func announcing(_ policy: OutboxPolicy?) -> any LedgerStore {
        SQLiteLedgerStore(database: database.announcing(policy))
    }

    public func checkWritable() async throws { try await database.checkWritable() }
    public func checkSpace() async throws { try await database.checkSpace() }
    public func sizes() async throws -> StoreSizes { try await database.sizes() }
    public func metaValue(_ key: String) async throws -> String? { try await database.metaValue(key) }
    public func setMetaValue(_ key: String, _ value: String) async throws { try await database.setMetaValue(key, value) }
    public func backup(to path: String, overwrite: Bool) async throws -> LedgerBackup {
        try await database.backup(to: path, overwrite: overwrite)
    }
    public func close() throws { try database.close() }
}
