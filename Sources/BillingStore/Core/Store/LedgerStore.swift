/// The ledger's storage as the layers above BillingStore see it: one store per role, plus the
/// checks and upkeep of the whole database. Two backends implement it, SQLite (``SQLiteLedgerStore``,
/// under SQLite/) and PostgreSQL (``PostgresLedgerStore``, under Postgres/), so nothing above this
/// module spells SQL.
public protocol LedgerStore: Sendable {
    /// The inbox of verified deliveries.
    var inbox: any EventInbox { get }
    /// An applier of the inbox to the ledger.
    func applier(_ configuration: ApplierConfiguration) -> any EventApplier
    /// Replay, inspect and dump over the whole ledger.
    var maintenance: any LedgerMaintenanceStore { get }
    /// A user's customers, subscriptions, invoices and payment methods (the service API).
    var users: any UserLedgerStore { get }
    /// Reconcile's lease, run records and event cursors.
    var reconcileRuns: any ReconcileRunStore { get }
    /// The ledger side of Stripe reconcile: comparing, repairing and tombstoning objects.
    var reconciliation: any LedgerReconciliationStore { get }
    /// Usage records, counters and gauges.
    var usage: any UsageStore { get }
    /// The queue of usage records reported to Stripe's meters.
    var usageReports: any UsageReportStore { get }
    /// App Store transactions the app forwards, appAccountTokens and a user's purchases.
    var appStore: any AppStoreLedgerStore { get }
    /// The ledger side of App Store reconcile.
    var appStoreReconciliation: any AppStoreReconciliationStore { get }
    /// Apple's refund requests, billingd's answers, and each user's consent to share consumption data.
    var appStoreConsumption: any AppStoreConsumptionStore { get }
    /// Invoice exports, whole or streamed.
    var invoiceExports: any InvoiceExportStore { get }
    /// Events for the app's backend and the last view announced per user.
    var outbox: any OutboxStore { get }
    /// What the revenue metrics read: subscription facts, payments and refunds of both stores.
    var metrics: any MetricsFactStore { get }
    /// Promotional grants: given, listed, revoked; they entitle like subscriptions.
    var grants: any GrantStore { get }
    /// A user's history across both stores, newest first, a page at a time.
    var timeline: any TimelineStore { get }
    /// Retention of the inbox's bodies: events per store, pruning, reclaiming space.
    var retention: any BodyRetentionStore { get }

    /// The same store, every transaction that changes the ledger (webhooks, the applier,
    /// reconcile's repairs, App Store reports) announcing the changes of users' views under
    /// `policy` in the same transaction; nil announces nothing.
    func announcing(_ policy: OutboxPolicy?) -> any LedgerStore

    /// Proves the store accepts writes (for `/readyz`).
    func checkWritable() async throws
    /// Proves the store has room for a large delivery (for `/readyz` and the watch while the store
    /// is full): commits one transaction that writes ``spaceCheckBytes`` and removes them again,
    /// so it needs the space a delivery would without keeping any. A rewrite in place, as
    /// ``checkWritable()`` does, can still succeed on a full disk.
    func checkSpace() async throws
    /// How many bytes the store and each of its tables take. On SQLite this reads every page of
    /// the file (SQLite's `dbstat`): call it every few minutes, never per scrape.
    func sizes() async throws -> StoreSizes
    /// A value from the store's key-value settings (local mode's secret and PKI); nil when unset.
    func metaValue(_ key: String) async throws -> String?
    /// Sets a value in the store's key-value settings.
    func setMetaValue(_ key: String, _ value: String) async throws
    /// Copies the whole ledger to `path`, consistently while it is written to; throws when `path`
    /// exists unless `overwrite`. A store whose backups are its server's job (PostgreSQL) throws
    /// an error that names the tool.
    func backup(to path: String, overwrite: Bool) async throws -> LedgerBackup
    /// Closes the store cleanly; later use is an error, a second close does nothing. Async, since
    /// a pool of connections (PostgreSQL) closes by waiting for them; SQLite's closes at once.
    func close() async throws
}

/// How much ``LedgerStore/checkSpace()`` writes: more than nearly every delivery (a Stripe event
/// is a few KB, an App Store notification about 15 KB), so that room for the check is room for
/// the retried delivery.
public let spaceCheckBytes = 64 << 10

/// What a backup wrote.
public struct LedgerBackup: Sendable {
    public let path: String
    public let bytes: Int64
    /// The inbox events the copy holds.
    public let events: Int

    public init(path: String, bytes: Int64, events: Int) {
        self.path = path
        self.bytes = bytes
        self.events = events
    }
}
