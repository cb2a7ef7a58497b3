import AppStoreAPI
import BillingCore
import BillingStore
import Logging
import ServiceLifecycle
import StripeAPI

// Per-area builders of ``BillingDaemon`` (issue 36), in the manner of Hummingbird's
// `buildApplication` / `buildRouter`: each takes its area of the settings and what it shares with
// the others, and returns its services and what it adds to the routes (``BillingServerDependencies``).
// Stripe, the App Store and the outbox here; local mode, reconcile and the usage report in
// BillingDaemon+Builders.swift.

/// Stripe's webhook endpoint: the secrets it accepts, or local mode's generated one.
struct StripeWebhookParts {
    var secrets: [String]
    /// Whether the secret is local mode's (no STRIPE_WEBHOOK_SECRET, `serve --local`).
    var isLocal: Bool

    /// The configured secrets; without them, local mode's generated secret, or the error that
    /// names STRIPE_WEBHOOK_SECRET outside local mode.
    static func build(
        _ settings: Settings.Stripe, local: (any LocalStandIns)?, store: any LedgerStore, logger: Logger
    ) async throws -> StripeWebhookParts {
        guard settings.webhookSecrets.isEmpty else { return StripeWebhookParts(secrets: settings.webhookSecrets, isLocal: false) }
        guard let local else {
            throw SettingsError.missing(
                "STRIPE_WEBHOOK_SECRET",
                "Set it to your endpoint's signing secret (whsec_…, from the Stripe dashboard or `stripe listen`), or run `billingd serve --local` to try billingd with a generated secret.")
        }
        let secret = try await local.webhookSecret(in: store)
        logger.warning(
            "LOCAL MODE: no STRIPE_WEBHOOK_SECRET; accepting events signed with a generated local secret. Send one with `billingd trigger customer.subscription.created`. Do not expose this to the internet.")
        return StripeWebhookParts(secrets: [secret], isLocal: true)
    }

    /// `POST /webhooks/stripe`'s verifier.
    func verifier(_ settings: Settings.Stripe) -> SignatureVerifier {
        SignatureVerifier(secrets: secrets, tolerance: settings.signatureTolerance)
    }
}

/// Stripe's API: the client of STRIPE_API_KEY for reconcile and the usage report, and the client
/// the service API's Checkout, portal and cancel use (local mode's stand-in without a key).
struct StripeAPIParts {
    /// Stripe's own client; nil without STRIPE_API_KEY.
    var client: StripeClient?
    /// What the service API calls: ``client``, else local mode's stand-in.
    var serviceClient: StripeClient?
    var livemode: Bool

    static func build(
        _ settings: Settings.Stripe, local: (any LocalStripeStandIn)?, metrics: BillingMetrics, logger: Logger
    ) -> StripeAPIParts {
        let observer = StripeMetricsObserver(metrics: metrics)
        let client = settings.client(logger: logger, observer: observer)
        if let local {
            logger.warning(
                "LOCAL MODE: no STRIPE_API_KEY; Checkout, Portal and cancel go to a Stripe fake on \(local.baseURL), selling the plan catalog's \(local.prices) price(s). Open a Checkout URL to pay it; the fake's webhooks come back here.")
        } else if client == nil {
            logger.notice("no STRIPE_API_KEY: the Stripe reconcile scheduler (missed-events sweep, daily reconcile) and the usage report to Stripe Billing Meters are off")
        }
        return StripeAPIParts(
            client: client, serviceClient: client ?? local?.client(logger: logger, observer: observer), livemode: settings.apiKeyIsLive ?? false)
    }
}

/// The App Store: the verifier of Server Notifications (on when there is a bundle id), StoreKit
/// receipts' verifier, and the App Store Server API clients.
struct AppStoreParts {
    var verifier: AppStoreVerifier?
    var receiptVerifier: AppStoreReceiptVerifier
    var clients: [AppStoreEnvironment: AppStoreClient]
    /// Signs promotional offers and introductory-offer eligibility; nil without a key.
    var offerSigner: AppStoreOfferSigner?
    /// Local mode's PKI root, trusted beside the configured roots.
    var localRoot: [UInt8]?

    /// Everything that can fail on the App Store settings, before anything starts.
    static func build(_ settings: Settings.AppStore, local: (any LocalStandIns)?, store: any LedgerStore, logger: Logger) async throws -> AppStoreParts {
        let clients = try settings.clients(logger: logger)
        let localRoot = try await local?.appStoreRoot(in: store)
        var offerSigner = try settings.offerSigner(bundleID: localRoot == nil ? nil : AppStoreSupport.localBundleID)
        if offerSigner == nil, let local {
            offerSigner = try await local.appStoreOfferSigner(bundleID: settings.bundleID ?? AppStoreSupport.localBundleID, in: store)
        }
        return AppStoreParts(
            verifier: try AppStoreSupport.verifier(settings, localRoot: localRoot),
            receiptVerifier: try AppStoreSupport.receiptVerifier(settings, localRoot: localRoot), clients: clients,
            offerSigner: offerSigner, localRoot: localRoot)
    }

    /// Local mode's Sandbox stand-in, when it runs, answers for the App Store Server API's Sandbox.
    mutating func adopt(_ standIn: (any LocalAppStoreStandIn)?, logger: Logger) {
        guard let standIn else { return }
        clients[.sandbox] = standIn.client
        logger.warning(
            "LOCAL MODE: no App Store In-App Purchase key; the App Store Server API goes to an App Store fake on \(standIn.baseURL) (Sandbox: a month lasts five minutes). `billingd appstore trigger SUBSCRIBED --user user_42` buys through it; its notifications come back here.")
    }

    /// The responder to Apple's refund requests: with an App Store Server API client (a key, or
    /// local mode's stand-in); nil without one, and the requests wait unanswered.
    func consumptionResponder(
        _ settings: Settings.AppStore, store: any LedgerStore, catalog: PlanCatalog?, usageScope: ServiceScope, metrics: BillingMetrics,
        space: StoreSpaceWatch, logger: Logger
    ) -> ConsumptionResponder? {
        guard !clients.isEmpty else {
            if verifier != nil {
                logger.notice("no App Store Server API key: Apple's refund requests (CONSUMPTION_REQUEST) are recorded and not answered")
            }
            return nil
        }
        var configuration = ConsumptionResponder.Configuration(
            policy: ConsumptionAnswerPolicy(refund: settings.refundPreference), catalog: catalog ?? .freeOnly)
        configuration.usageScope = usageScope
        return ConsumptionResponder(
            store: store.appStoreConsumption, usage: store.usage, clients: clients, configuration: configuration, metrics: metrics,
            logger: logger, space: space)
    }

    /// `POST /webhooks/appstore` (with a verifier), and the service API's restores and receipts.
    func addRoutes(to dependencies: inout BillingServerDependencies, _ settings: Settings.AppStore, logger: Logger) {
        dependencies.appStoreVerifier = verifier
        dependencies.appStoreOwnership = settings.ownership
        dependencies.appStoreClients = clients
        dependencies.appStoreReceiptVerifier = receiptVerifier
        dependencies.appStoreOfferSigner = offerSigner
        guard verifier != nil else { return }
        logger.notice(
            "App Store on: POST /webhooks/appstore",
            metadata: [
                "bundle_id": "\(settings.bundleID ?? AppStoreSupport.localBundleID)",
                "environments": "\(settings.environments.map(\.rawValue).sorted().joined(separator: ","))",
                "ownership": "\(settings.ownership.rawValue)",
                "local_pki": "\(localRoot != nil)",
            ])
    }
}

/// The outbox: the sender of BILLINGD_APP_WEBHOOK_URL (none without one) and the reviewer that
/// finds events queued while the sender was not told.
struct OutboxParts {
    var sender: OutboxSender?
    var reviewer: OutboxReviewer

    var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        (sender.map { [.init(service: $0)] } ?? []) + [.init(service: reviewer)]
    }

    static func build(
        _ settings: Settings.Outbox, store: any LedgerStore, metrics: BillingMetrics, space: StoreSpaceWatch, logger: Logger
    ) throws -> OutboxParts {
        var sender: OutboxSender?
        if !settings.webhookURLs.isEmpty {
            var configuration = OutboxSender.Configuration(signer: try settings.signer())
            configuration.connectTimeout = settings.connectTimeout
            configuration.timeout = settings.timeout
            sender = OutboxSender(store: store.outbox, configuration: configuration, metrics: metrics, logger: logger, space: space)
        }
        return OutboxParts(
            sender: sender, reviewer: OutboxReviewer(store: store.outbox, logger: logger, space: space, queued: { [sender] in sender?.wake() }))
    }
}
