import APITransport
import AppStoreAPI
import AppStoreFake
import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Crypto
import Foundation
import Logging
import ServiceLifecycle

/// `serve --local` without an In-App Purchase key: an App Store fake on loopback, in the Sandbox
/// environment, that signs with local mode's App Store PKI (the one serve trusts) and sends its
/// Server Notifications V2 to serve's `/webhooks/appstore`. The App Store Server API calls —
/// restore by history, legacy receipts, `appstore lookup`, `history`, `reconcile` and
/// `test-notification` — go to it, and `appstore trigger` acts its notifications out through it.
/// Its subscriptions live in memory on Sandbox time (a month is five minutes) and end with serve.
struct LocalAppStore: LocalAppStoreStandIn {
    let fake: AppStoreFake
    let client: AppStoreClient

    /// The fake's App Store Server API base URL.
    var baseURL: String { fake.baseURL }

    /// Starts the fake with the ledger's local PKI and key, and keeps its address in the ledger
    /// for the commands.
    static func start(
        settings: Settings, pki: AppStoreTestPKI, verifier: AppStoreVerifier, catalog: PlanCatalog, store: any LedgerStore,
        logger: Logger
    ) async throws -> LocalAppStore {
        let key = try await LocalAppStoreFake.key(in: store, creating: true)!
        let bundleID = settings.appStore.bundleID ?? AppStoreSupport.localBundleID
        var fakeLogger = logger
        fakeLogger.logLevel = max(logger.logLevel, .warning)
        let products = catalog.tiers.flatMap(\.appStoreProducts).map { id in
            let lowered = id.lowercased()
            return lowered.contains("year") || lowered.contains("annual") ? AppStoreFake.Product.yearly(id) : .monthly(id)
        }
        var configuration = AppStoreFake.Configuration(
            issuerID: LocalAppStoreFake.issuerID, keyID: LocalAppStoreFake.keyID, bundleID: bundleID, publicKey: key.publicKey,
            environment: .sandbox, products: products, pki: pki, seed: UInt64.random(in: 1...UInt64.max), recordsRequests: false,
            logger: fakeLogger)
        // The fake forgets its purchases when serve stops, the ledger does not: each run counts
        // its transaction ids from its start time in milliseconds (a thousand ids each), so
        // that a purchase never takes an id an earlier run gave another.
        configuration.idOffset = UInt64(max(0, Date().timeIntervalSince1970 * 1000 - 1_700_000_000_000)) * 1000
        let fake = try await AppStoreFake.start(configuration)
        do {
            try await store.setMetaValue(LocalAppStoreFake.urlKey, fake.baseURL)
        } catch {
            await fake.stop()
            throw error
        }
        let client = LocalAppStoreFake.client(baseURL: fake.baseURL, key: key, bundleID: bundleID, verifier: verifier, logger: logger)
        return LocalAppStore(fake: fake, client: client)
    }

    /// Sends the fake's notifications to serve's endpoint once it listens.
    func deliver(to url: String) async {
        await fake.setNotificationURL(url)
    }

    func stop() async {
        await fake.stop()
    }

    func run() async throws {
        try? await gracefulShutdown()
        await fake.stop()
    }
}

/// What the commands need of the App Store fake a local `serve` runs: its address and key are in
/// the ledger, so that `appstore lookup`, `history`, `reconcile`, `test-notification` and
/// `trigger` reach it without an In-App Purchase key.
public enum LocalAppStoreFake {
    static let urlKey = "local_appstore_fake_url"
    static let keyKey = "local_appstore_fake_key"
    /// The issuer and key id of the local key; the fake accepts only tokens that name them.
    static let issuerID = "00000000-0000-4000-8000-00000000b111"
    static let keyID = "LOCALFAKE1"

    /// The local key that signs the tokens the fake accepts, kept in the ledger (PEM) like the
    /// local webhook secret.
    static func key(in store: any LedgerStore, creating: Bool) async throws -> P256.Signing.PrivateKey? {
        if let pem = try await store.metaValue(keyKey) {
            return try AppStoreSigningKey.parse(pem: pem, origin: "the local App Store key in the ledger")
        }
        guard creating else { return nil }
        let key = P256.Signing.PrivateKey()
        try await store.setMetaValue(keyKey, key.pemRepresentation)
        return key
    }

    static func client(
        baseURL: String, key: P256.Signing.PrivateKey, bundleID: String, verifier: AppStoreVerifier, logger: Logger
    ) -> AppStoreClient {
        var configuration = AppStoreClientConfiguration(
            issuerID: issuerID, keyID: keyID, privateKey: key, bundleID: bundleID, environment: .sandbox, baseURL: baseURL)
        configuration.connectTimeout = .seconds(2)
        configuration.maxRetries = 1
        return AppStoreClient(configuration: configuration, verifier: verifier, transport: CurlTransport(maxConnections: 4), logger: logger)
    }

    /// The Sandbox client for the App Store fake of the `serve --local` that last ran on this
    /// ledger; nil when none ever did.
    public static func client(settings: Settings, store: any LedgerStore, logger: Logger) async throws -> AppStoreClient? {
        guard let baseURL = try await store.metaValue(urlKey),
            let key = try await key(in: store, creating: false),
            let pki = try await AppStoreSupport.localPKI(in: store, creating: false),
            let verifier = try AppStoreSupport.verifier(settings.appStore, localRoot: pki.rootDER)
        else { return nil }
        return client(
            baseURL: baseURL, key: key, bundleID: settings.appStore.bundleID ?? AppStoreSupport.localBundleID, verifier: verifier,
            logger: logger)
    }

    /// A notification the fake sent for a trigger.
    public struct Sent: Decodable, Sendable, Equatable {
        public let notificationUUID: String
        public let notificationType: String
        public let subtype: String?

        public var label: String { subtype.map { "\(notificationType)/\($0)" } ?? notificationType }
    }

    public struct Triggered: Decodable, Sendable, Equatable {
        public let originalTransactionId: String
        public let transactionId: String?
        /// For a purchase, its transaction as the device holds it (`Transaction.jwsRepresentation`).
        public let signedTransaction: String?
        public let notifications: [Sent]
    }

    /// Has the fake make the change after which the App Store sends `notificationType` (and
    /// `subtype`) for the buyer's subscription to `productID`; the fake then sends it, and any
    /// notification the change brings with it, to serve.
    public static func trigger(
        _ client: AppStoreClient, notificationType: String, subtype: String?, productID: String, appAccountToken: String?
    ) async throws(AppStoreAPIError) -> Triggered {
        var request: [String: String] = ["notificationType": notificationType, "productId": productID]
        request["subtype"] = subtype
        request["appAccountToken"] = appAccountToken
        let route = "/inApps/v1/test_helpers/billingd/trigger"
        let body = try await client.send(
            .post, path: route, route: route, json: Array((try? JSONEncoder().encode(request)) ?? Data()), priority: .interactive)
        do {
            return try JSONDecoder().decode(Triggered.self, from: Data(body))
        } catch {
            throw AppStoreAPIError(kind: .decoding, message: "the local App Store fake's answer is not a trigger result", route: route)
        }
    }
}
