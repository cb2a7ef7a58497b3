import Foundation
import Logging

/// The Stripe and App Store ledger's roles on PostgreSQL: the applier, replay/inspect/dump, the
/// service API's reads, reconcile's repairs, the App Store ledger and the outbox. Vending one
/// costs nothing: each is a small struct over the store's pool.
extension PostgresLedgerStore: LedgerStore {
    /// An applier of the shared inbox to the ledger; every replica runs one.
    public func applier(_ configuration: ApplierConfiguration) -> any EventApplier {
        postgresApplier(configuration)
    }

    /// The applier with its claim duration: how long a replica's claim on due events holds
    /// before another replica may take them (a claim is released at once when applied).
    package func postgresApplier(_ configuration: ApplierConfiguration, claimDuration: Duration = .seconds(60)) -> PostgresApplier {
        let (seconds, attoseconds) = claimDuration.components
        return PostgresApplier(
            client: client, logger: logger, configuration: configuration, replica: replicaName,
            claimDuration: seconds * 1000 + attoseconds / 1_000_000_000_000_000, outbox: outboxPolicy,
            concurrentCommits: concurrentCommits)
    }

    /// Replay, inspect and dump over the whole ledger.
    public var maintenance: any LedgerMaintenanceStore { PostgresMaintenance(client: client, logger: logger) }

    /// Retention of the inbox's bodies: events per store, pruning, reclaiming space.
    public var retention: any BodyRetentionStore { PostgresBodyRetention(client: client, logger: logger) }

    /// A user's customers, subscriptions, invoices and payment methods (the service API).
    public var users: any UserLedgerStore { PostgresUsers(client: client, logger: logger) }

    /// The ledger side of Stripe reconcile; each one vended tracks its own listing.
    public var reconciliation: any LedgerReconciliationStore {
        PostgresLedgerReconciliation(client: client, logger: logger, outbox: outboxPolicy)
    }

    /// App Store transactions the app forwards, appAccountTokens and a user's purchases.
    public var appStore: any AppStoreLedgerStore { PostgresAppStore(client: client, logger: logger, outbox: outboxPolicy) }

    /// The ledger side of App Store reconcile.
    public var appStoreReconciliation: any AppStoreReconciliationStore {
        PostgresAppStore(client: client, logger: logger, outbox: outboxPolicy)
    }

    /// Refund requests, their answers and consent, shared by the replicas' responders.
    public var appStoreConsumption: any AppStoreConsumptionStore { PostgresAppStoreConsumption(client: client, logger: logger) }

    /// Events for the app's backend and the last view announced per user, shared by the replicas' senders.
    public var outbox: any OutboxStore { PostgresOutbox(client: client, logger: logger, policy: outboxPolicy) }

    /// What the revenue metrics read: subscription facts, payments and refunds of both stores.
    public var metrics: any MetricsFactStore { PostgresMetricsFacts(client: client, logger: logger) }

    /// Promotional grants; their inserts and revocations announce to the outbox.
    public var grants: any GrantStore { PostgresGrants(client: client, logger: logger, outbox: outboxPolicy) }
    /// A user's history, read by user through indexes.
    public var timeline: any TimelineStore { PostgresTimeline(client: client, logger: logger) }

    /// This store's name in the applier's claims: host, process and store, so that an operator
    /// can tell whose claims are in the inbox.
    private var replicaName: String {
        "\(ProcessInfo.processInfo.hostName)/\(ProcessInfo.processInfo.processIdentifier)/\(UInt(bitPattern: ObjectIdentifier(self).hashValue))"
    }
}
