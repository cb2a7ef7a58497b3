import BillingStore
import BillingTestSupport
import Foundation

/// The roles whose stores exist on both backends, of one store (one replica).
struct RoleStores {
    let reconcileRuns: any ReconcileRunStore
    let usage: any UsageStore
    let usageReports: any UsageReportStore
    let invoiceExports: any InvoiceExportStore
}

/// Runs `body` with `replicas` stores of `backend` on one fresh database — on SQLite, several
/// connections to one file; on PostgreSQL, several pools — closed and removed afterwards.
func withRoleStores(_ backend: StoreBackend, replicas: Int = 1, _ body: ([RoleStores]) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-roles-\(UUID().uuidString).sqlite3").path
        let databases = try (0..<replicas).map { _ in try SQLiteDatabase.open(path: path) }
        defer {
            for database in databases { try? database.close() }
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        try await body(databases.map { database in
            let store = SQLiteLedgerStore(database: database)
            return RoleStores(
                reconcileRuns: store.reconcileRuns, usage: store.usage, usageReports: store.usageReports,
                invoiceExports: store.invoiceExports)
        })
    case .postgres:
        try await PostgresTestDatabase.withFreshDatabase { configuration in
            var stores: [PostgresLedgerStore] = []
            do {
                for _ in 0..<replicas {
                    stores.append(try await PostgresLedgerStore.open(configuration, maximumConnections: 4, logger: PostgresTestDatabase.logger))
                }
                try await body(stores.map(RoleStores.init))
            } catch {
                for store in stores { await store.close() }
                throw error
            }
            for store in stores { await store.close() }
        }
    }
}

extension RoleStores {
    init(_ store: PostgresLedgerStore) {
        self.init(
            reconcileRuns: store.reconcileRuns, usage: store.usage, usageReports: store.usageReports,
            invoiceExports: store.invoiceExports)
    }
}

/// Runs `body` with the invoice exports of `backend` over the ledger `source` holds: SQLite's own,
/// or a fresh PostgreSQL ledger that `billingd copy`'s code filled from it.
func withExports(_ backend: StoreBackend, of source: SQLiteDatabase, _ body: (any InvoiceExportStore) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        try await body(SQLiteLedgerStore(database: source).invoiceExports)
    case .postgres:
        try await PostgresTestDatabase.withStore { store in
            let report = try await PostgresLedgerCopy.copy(from: source, to: store)
            guard report.isVerified else { throw CopyNotVerified(report: report) }
            try await body(store.invoiceExports)
        }
    }
}

struct CopyNotVerified: Error {
    let report: PostgresLedgerCopy.Report
}
