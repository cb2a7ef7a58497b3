import AppStoreAPI
import BillingCore
import BillingStore
import Logging
import ServiceLifecycle
import StripeAPI

/// What `serve --local` puts where a production configuration has Stripe's and Apple's secrets and
/// servers: a generated webhook secret, a local App Store PKI, and stand-ins on loopback of the
/// Stripe API and the App Store Server API.
///
/// BillingLocal implements it, and only `billingd serve --local` passes one in
/// (``BillingDaemon/Options/local``): BillingServer links no fake, so a daemon built without it
/// never starts one.
public protocol LocalStandIns: Sendable {
    /// The webhook secret local mode accepts, generated once and kept in the ledger.
    func webhookSecret(in store: any LedgerStore) async throws -> String
    /// The operator token of the console in local mode without BILLINGD_CONSOLE_TOKENS,
    /// generated once and kept in the ledger; `serve --local` prints it with the console's URL.
    func consoleToken(in store: any LedgerStore) async throws -> String
    /// The root certificate (DER) of local mode's App Store PKI, generated once and kept in the
    /// ledger; trusted beside the configured roots, for JWS and for receipts.
    func appStoreRoot(in store: any LedgerStore) async throws -> [UInt8]
    /// What signs App Store offers when no key is configured: the local App Store key (the one
    /// the App Store stand-in trusts), generated once and kept in the ledger, so that the offer
    /// endpoints work offline too.
    func appStoreOfferSigner(bundleID: String, in store: any LedgerStore) async throws -> AppStoreOfferSigner
    /// Starts a Stripe stand-in that sells `catalog`'s prices, for Checkout, the portal and cancel
    /// without a Stripe key; it records its address in the ledger for `billingd trigger`.
    func startStripe(catalog: PlanCatalog, store: any LedgerStore, logger: Logger) async throws -> any LocalStripeStandIn
    /// Starts a Sandbox App Store stand-in that signs with the local PKI, for the App Store Server
    /// API without an In-App Purchase key; it records its address in the ledger for the commands.
    func startAppStore(
        settings: Settings, verifier: AppStoreVerifier, catalog: PlanCatalog, store: any LedgerStore, logger: Logger
    ) async throws -> any LocalAppStoreStandIn
}

/// A Stripe stand-in on loopback: a service of the daemon, stopped after the server.
public protocol LocalStripeStandIn: Service {
    /// Its Stripe API base URL.
    var baseURL: String { get }
    /// How many prices it sells.
    var prices: Int { get }
    /// The client the service API uses instead of Stripe's.
    func client(logger: Logger, observer: (any StripeClientObserver)?) -> StripeClient
    /// Sends its events to serve's webhook endpoint at `url`, signed with `secret`.
    func deliver(to url: String, secret: String) async
    /// Stops it when the daemon fails to build, before the group would have.
    func stop() async
}

/// An App Store stand-in on loopback (Sandbox): a service of the daemon, stopped after the server.
public protocol LocalAppStoreStandIn: Service {
    /// Its App Store Server API base URL.
    var baseURL: String { get }
    /// The Sandbox client that reaches it, verifying its answers with the local PKI.
    var client: AppStoreClient { get }
    /// Sends its Server Notifications to serve's endpoint at `url`.
    func deliver(to url: String) async
    /// Stops it when the daemon fails to build, before the group would have.
    func stop() async
}
