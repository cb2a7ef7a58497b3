import AppStoreAPI
import BillingCore
import BillingStore
import Logging
import ServiceLifecycle
import StripeAPI

// Per-area builders of ``BillingDaemon`` (issue 36), in the manner of Hummingbird's
// `buildApplication`: each takes the settings and what it shares with other areas and returns its
// services. Local mode, reconcile and the usage report here; Stripe, the App Store and the outbox
// in BillingDaemon+Areas.swift.

/// Local mode's stand-ins, started, and their services (first in the group, so they stop last).
struct LocalModeParts {
    /// The Stripe stand-in: local mode without a Stripe key (Checkout, the portal and cancel).
    var stripe: (any LocalStripeStandIn)?
    /// The App Store stand-in: local mode's secret and PKI, no In-App Purchase key, Sandbox accepted.
    var appStore: (any LocalAppStoreStandIn)?

    var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let stripe { services.append(.init(service: stripe)) }
        if let appStore { services.append(.init(service: appStore)) }
        return services
    }

    /// Starts what `local` stands in for; nothing without it. A stand-in started is stopped again
    /// when the next one fails to start.
    static func start(
        _ local: (any LocalStandIns)?, settings: Settings, secretIsLocal: Bool, appStoreClients: [AppStoreEnvironment: AppStoreClient],
        localRoot: [UInt8]?, verifier: AppStoreVerifier?, catalog: PlanCatalog, store: any LedgerStore, logger: Logger
    ) async throws -> LocalModeParts {
        guard let local else { return LocalModeParts() }
        var parts = LocalModeParts()
        if settings.stripe.apiKey == nil {
            parts.stripe = try await local.startStripe(catalog: catalog, store: store, logger: logger)
        }
        if secretIsLocal, appStoreClients.isEmpty, localRoot != nil, let verifier, settings.appStore.environments.contains(.sandbox) {
            do {
                parts.appStore = try await local.startAppStore(settings: settings, verifier: verifier, catalog: catalog, store: store, logger: logger)
            } catch {
                await parts.stripe?.stop()
                throw error
            }
        }
        return parts
    }
}

extension BillingDaemon {
    /// The reconcile scheduler: Stripe's reconciler with a Stripe client, one App Store reconciler
    /// per environment with a client; nil when there is neither.
    static func reconcileScheduler(
        _ settings: Settings, store: any LedgerStore, stripe: StripeClient?, livemode: Bool,
        appStoreClients: [AppStoreEnvironment: AppStoreClient], applier: ApplierService, catalog: PlanCatalog?,
        initialDelay: Duration, metrics: BillingMetrics, logger: Logger
    ) -> ReconcileScheduler? {
        let inbox = store.inbox
        let appStoreReconcilers = [AppStoreEnvironment.production, .sandbox].compactMap { appStoreClients[$0] }.map { client in
            AppStoreReconciler(
                store: store, client: client, logger: logger, inbox: inbox, applier: applier.inboxApplier, eventsStored: { applier.wake() })
        }
        guard stripe != nil || !appStoreReconcilers.isEmpty else { return nil }
        let reconciler = stripeReconciler(store: store, stripe: stripe, livemode: livemode, applier: applier, catalog: catalog, logger: logger)
        var schedule = ReconcileScheduler.Configuration(sweepInterval: settings.stripe.eventsSweepInterval, reconcileInterval: settings.reconcile.interval)
        schedule.initialDelay = initialDelay
        return ReconcileScheduler(
            reconciler: reconciler, appStore: appStoreReconcilers, store: store, configuration: schedule, metrics: metrics, logger: logger)
    }

    /// Stripe's reconciler, for the scheduler and the console's dry runs; nil without a Stripe client.
    static func stripeReconciler(
        store: any LedgerStore, stripe: StripeClient?, livemode: Bool, applier: ApplierService, catalog: PlanCatalog?, logger: Logger
    ) -> Reconciler? {
        stripe.map { stripe in
            Reconciler(
                store: store, client: stripe, livemode: livemode, logger: logger,
                inbox: store.inbox, applier: applier.inboxApplier, catalog: catalog, eventsStored: { applier.wake() })
        }
    }

    /// The usage report to Stripe Billing Meters: with a Stripe client and BILLINGD_USAGE_REPORT_INTERVAL.
    static func usageReportScheduler(
        _ settings: Settings, store: any LedgerStore, stripe: StripeClient?, livemode: Bool, metrics: BillingMetrics, logger: Logger
    ) -> UsageReportScheduler? {
        guard let stripe, let interval = settings.usage.reportInterval else { return nil }
        let reporter = UsageReporter(store: store, client: stripe, livemode: livemode, logger: logger, metrics: metrics)
        return UsageReportScheduler(reporter: reporter, interval: interval, logger: logger)
    }
}
