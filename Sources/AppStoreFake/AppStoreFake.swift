import BillingCore
import BillingSamples
import Crypto
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// A stateful fake of the App Store Server API that billingd's App Store client talks to, served
/// over real HTTP on loopback: it checks the client's ES256 JWT as Apple does (401 with an empty
/// body otherwise), answers in Apple's shapes with data signed by a stand-in of Apple's PKI, lives
/// subscriptions on a clock the test controls, sends Server Notifications V2, and offers fault
/// injection, request introspection and fast seeding for benchmarks.
///
/// ```swift
/// let fake = try await AppStoreFake.start(.init(issuerID: issuer, keyID: "ABC123DEFG", bundleID: "com.example.app",
///                                               publicKey: key.publicKey, notificationURL: receiverURL))
/// let purchase = try await fake.subscribe(productID: "pro.monthly", appAccountToken: token)
/// await fake.advance(by: .seconds(300))  // a Sandbox month: DID_RENEW
/// ```
public final class AppStoreFake: Sendable {
    public struct Configuration: Sendable {
        /// The App Store Connect issuer id billingd's JWT must name in `iss`.
        public var issuerID: String
        /// The id of billingd's `.p8` key, the JWT header's `kid`.
        public var keyID: String
        /// The app's bundle id: the JWT's `bid`, and every transaction's `bundleId`.
        public var bundleID: String
        /// The public half of billingd's `.p8` key, which must verify the JWT's signature.
        public var publicKey: P256.Signing.PublicKey
        /// Production or Sandbox: the `environment` of everything signed, and how fast time runs.
        public var environment: AppStoreEnvironment
        /// The app's Apple ID, `appAppleId` in responses and notifications (Apple sends it in Production).
        public var appAppleID: Int64?
        /// Where Server Notifications V2 are POSTed; nil records them in the history without sending.
        public var notificationURL: String?
        public var host: String
        /// 0 picks a free port; ``AppStoreFake/port`` tells which.
        public var port: Int
        /// The fake's clock; follows the wall clock unless made with `Clock(fixedAt:)`.
        public var clock: Clock
        /// The product catalog; an unknown product id is taken as a monthly subscription.
        public var products: [Product]
        /// Grace and billing retry periods; nil for the environment's defaults.
        public var retryTiming: RetryTiming?
        /// The signing PKI; nil makes a fresh one. Pass one to keep its root across runs.
        public var pki: AppStoreTestPKI?
        /// Seeds identifiers (order ids, notification UUIDs): the same seed gives the same ids.
        public var seed: UInt64
        /// Where transaction and web order line item ids start counting, past the environment's
        /// 16-digit base (`2000000…` in Sandbox); 0 starts them at `…100000001`. A fake that
        /// restarts while the ledger it feeds lives on starts each run elsewhere, so that a new
        /// purchase never takes an id an earlier run gave another.
        public var idOffset: UInt64 = 0
        /// Keep every request for ``AppStoreFake/requests``; turn off for long benchmarks.
        public var recordsRequests: Bool
        /// How often to run renewals and expiries that fall due while nobody asks (with a wall
        /// clock); nil runs them only when a request or a test call comes.
        public var catchUpInterval: Duration?
        /// Stop gracefully on SIGTERM and SIGINT (for the `appstore-fake` executable).
        public var stopsOnSignals: Bool
        public var logger: Logger

        public init(
            issuerID: String, keyID: String, bundleID: String, publicKey: P256.Signing.PublicKey,
            environment: AppStoreEnvironment = .sandbox, appAppleID: Int64? = nil, notificationURL: String? = nil,
            host: String = "127.0.0.1", port: Int = 0, clock: Clock = Clock(), products: [Product] = [],
            retryTiming: RetryTiming? = nil, pki: AppStoreTestPKI? = nil, seed: UInt64 = 42,
            recordsRequests: Bool = true, catchUpInterval: Duration? = .seconds(1), stopsOnSignals: Bool = false,
            logger: Logger = Configuration.quietLogger
        ) {
            self.issuerID = issuerID
            self.keyID = keyID
            self.bundleID = bundleID
            self.publicKey = publicKey
            self.environment = environment
            self.appAppleID = appAppleID
            self.notificationURL = notificationURL
            self.host = host
            self.port = port
            self.clock = clock
            self.products = products
            self.retryTiming = retryTiming
            self.pki = pki
            self.seed = seed
            self.recordsRequests = recordsRequests
            self.catchUpInterval = catchUpInterval
            self.stopsOnSignals = stopsOnSignals
            self.logger = logger
        }

        /// Warnings and errors only, so that tests stay readable.
        public static var quietLogger: Logger {
            var logger = Logger(label: "AppStoreFake")
            logger.logLevel = .warning
            return logger
        }
    }

    /// Why the fake could not start.
    public enum StartError: Error {
        case serverDidNotStart
    }

    /// A purchase as the buyer's device sees it: ids, dates, and the signed transaction
    /// (`Transaction.jwsRepresentation`) the app would send to billingd.
    public struct Purchase: Sendable, Hashable {
        public let originalTransactionID: String
        public let transactionID: String
        /// The order id on the customer's receipt e-mail, for Look Up Order ID.
        public let orderID: String
        public let productID: String
        /// Unix milliseconds.
        public let purchaseDate: Int64
        /// Unix milliseconds; nil for a one-time purchase.
        public let expiresDate: Int64?
        public let signedTransaction: String
    }

    public let configuration: Configuration
    /// The bound port.
    public let port: Int
    /// The stand-in of Apple's PKI that signs everything; verify with its `rootDER` as the root.
    public let pki: AppStoreTestPKI
    let store: FakeAppStore
    private let services: ServiceGroup
    private let server: Task<Void, any Error>
    private let delivery: Task<Void, Never>

    /// `http://127.0.0.1:PORT`, the App Store Server API base URL for billingd.
    public var baseURL: String { "http://\(configuration.host):\(port)" }

    public var clock: Clock { configuration.clock }

    /// The fake's now, Unix milliseconds.
    public var now: Int64 { configuration.clock.now }

    private init(
        configuration: Configuration, port: Int, pki: AppStoreTestPKI, store: FakeAppStore, services: ServiceGroup,
        server: Task<Void, any Error>, delivery: Task<Void, Never>
    ) {
        self.configuration = configuration
        self.port = port
        self.pki = pki
        self.store = store
        self.services = services
        self.server = server
        self.delivery = delivery
    }

    /// Starts the server, notification delivery and catch-up; returns once the port is bound.
    public static func start(_ configuration: Configuration) async throws -> AppStoreFake {
        let pki = try configuration.pki ?? AppStoreTestPKI()
        let store = FakeAppStore(configuration: configuration, pki: pki)
        let tokens = BearerTokenVerifier(
            issuerID: configuration.issuerID, keyID: configuration.keyID, bundleID: configuration.bundleID,
            publicKey: configuration.publicKey)
        let (ports, portContinuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        let application = Application(
            router: AppStoreRoutes.router(store: store, tokens: tokens),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: configuration.logger)
        var serviceList: [any Service] = [application]
        if let interval = configuration.catchUpInterval {
            serviceList.append(CatchUpService(store: store, interval: interval))
        }
        let services = ServiceGroup(
            configuration: .init(
                services: serviceList,
                gracefulShutdownSignals: configuration.stopsOnSignals ? [.sigterm, .sigint] : [],
                logger: configuration.logger))
        // Ended by `stop()` or, with `stopsOnSignals`, by SIGTERM/SIGINT; `waitUntilStopped()` awaits it.
        let server = Task {
            do {
                try await services.run()
                portContinuation.finish()
            } catch {
                portContinuation.finish(throwing: error)
                throw error
            }
        }
        let port: Int
        do {
            guard let bound = try await ports.first(where: { _ in true }) else { throw StartError.serverDidNotStart }
            port = bound
        } catch {
            server.cancel()
            throw error
        }
        let sender = NotificationSender(store: store, logger: configuration.logger)
        // Ends when `stop()` or `waitUntilStopped()` finishes the store's wake-up stream.
        let delivery = Task { await sender.run() }
        return AppStoreFake(
            configuration: configuration, port: port, pki: pki, store: store, services: services, server: server,
            delivery: delivery)
    }

    /// Shuts the server down gracefully and stops sending; notifications not yet sent are abandoned.
    public func stop() async {
        await store.stopDelivery()
        delivery.cancel()
        await services.triggerGracefulShutdown()
        _ = await server.result
        await delivery.value
    }

    /// Waits until the server ends (after SIGTERM/SIGINT with ``Configuration/stopsOnSignals``),
    /// then stops sending.
    public func waitUntilStopped() async throws {
        let result = await server.result
        await store.stopDelivery()
        delivery.cancel()
        await delivery.value
        try result.get()
    }
}

/// Runs renewals and expiries as the wall clock makes them due, so that a fake left running
/// (the executable) sends DID_RENEW on time without a request to wake it.
///
/// A plain sleep loop: swift-async-algorithms' timer is not a dependency of this target. At
/// graceful shutdown the sleep is cancelled and the loop ends, so the service returns normally.
struct CatchUpService: Service {
    let store: FakeAppStore
    let interval: Duration

    func run() async {
        await cancelWhenGracefulShutdown {
            while (try? await Task.sleep(for: interval)) != nil {
                await store.catchUp()
            }
        }
    }
}
