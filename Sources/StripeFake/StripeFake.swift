import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// A stateful fake of the Stripe REST API that billingd uses, served over real HTTP on loopback so
/// that the real client (libcurl, form encoding, retries, pagination) is exercised, with signed
/// webhook delivery, fault injection, request introspection and fast seeding for benchmarks.
///
/// ```swift
/// let fake = try await StripeFake.start()
/// defer { Task { await fake.stop() } }
/// await fake.inject(.status(429, retryAfter: 1), times: 2, matching: .path("/v1/customers"))
/// ```
public final class StripeFake: Sendable {
    public struct Configuration: Sendable {
        /// The secret key clients must present as `Authorization: Bearer …`.
        public var apiKey: String
        /// Where events are POSTed; delivery is on when both this and ``webhookSecret`` are set.
        public var webhookURL: String?
        /// The endpoint's signing secret (`whsec_…`).
        public var webhookSecret: String?
        public var host: String
        /// 0 picks a free port; ``StripeFake/port`` tells which.
        public var port: Int
        /// The fake's clock: `created` of objects and events, the 30-day event window, signatures.
        public var clock: FakeClock
        /// `api_version` of events caused by requests without a `Stripe-Version` header.
        public var defaultAPIVersion: String
        /// Keep every request for ``StripeFake/requests``; turn off for long benchmarks.
        public var recordsRequests: Bool
        /// Stop gracefully on SIGTERM and SIGINT (for the `stripe-fake` executable).
        public var stopsOnSignals: Bool
        /// Serve Checkout's and the portal's hosted pages on the fake's own address (see
        /// `HostedPages`), so that a Checkout URL can be paid by opening it.
        public var hostedPages: Bool
        public var logger: Logger

        public init(
            apiKey: String = "sk_test_fake_0123456789", webhookURL: String? = nil, webhookSecret: String? = nil,
            host: String = "127.0.0.1", port: Int = 0, clock: FakeClock = FakeClock(),
            defaultAPIVersion: String = "2026-10-28.clover", recordsRequests: Bool = true, stopsOnSignals: Bool = false,
            hostedPages: Bool = false, logger: Logger = Configuration.quietLogger
        ) {
            self.hostedPages = hostedPages
            self.apiKey = apiKey
            self.webhookURL = webhookURL
            self.webhookSecret = webhookSecret
            self.host = host
            self.port = port
            self.clock = clock
            self.defaultAPIVersion = defaultAPIVersion
            self.recordsRequests = recordsRequests
            self.stopsOnSignals = stopsOnSignals
            self.logger = logger
        }

        /// Warnings and errors only, so that tests stay readable.
        public static var quietLogger: Logger {
            var logger = Logger(label: "StripeFake")
            logger.logLevel = .warning
            return logger
        }
    }

    /// Why the fake could not start.
    public enum StartError: Error {
        case serverDidNotStart
    }

    public let configuration: Configuration
    /// The bound port.
    public let port: Int
    let store: FakeStore
    private let services: ServiceGroup
    private let server: Task<Void, any Error>
    private let delivery: Task<Void, Never>

    /// `http://127.0.0.1:PORT`, the `STRIPE_API_BASE` for billingd.
    public var baseURL: String { "http://\(configuration.host):\(port)" }

    public var clock: FakeClock { configuration.clock }

    private init(
        configuration: Configuration, port: Int, store: FakeStore, services: ServiceGroup,
        server: Task<Void, any Error>, delivery: Task<Void, Never>
    ) {
        self.configuration = configuration
        self.port = port
        self.store = store
        self.services = services
        self.server = server
        self.delivery = delivery
    }

    /// Starts the server and webhook delivery; returns once the port is bound.
    public static func start(_ configuration: Configuration = .init()) async throws -> StripeFake {
        var endpoint: WebhookEndpoint?
        if let url = configuration.webhookURL, let secret = configuration.webhookSecret {
            endpoint = WebhookEndpoint(url: url, secret: secret)
        }
        let store = FakeStore(
            clock: configuration.clock, defaultAPIVersion: configuration.defaultAPIVersion, webhookEndpoint: endpoint,
            recordsRequests: configuration.recordsRequests)
        let (ports, portContinuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        let application = Application(
            router: FakeRoutes.router(store: store, apiKey: configuration.apiKey),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: configuration.logger)
        let services = ServiceGroup(
            configuration: .init(
                services: [application],
                gracefulShutdownSignals: configuration.stopsOnSignals ? [.sigterm, .sigint] : [],
                logger: configuration.logger))
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
        if configuration.hostedPages { await store.setHostedPagesBase("http://\(configuration.host):\(port)") }
        let sender = WebhookSender(store: store, logger: configuration.logger)
        let delivery = Task { await sender.run() }
        return StripeFake(
            configuration: configuration, port: port, store: store, services: services, server: server,
            delivery: delivery)
    }

    /// Shuts the server down gracefully and stops delivering; events not yet sent are abandoned.
    public func stop() async {
        await store.stopDelivery()
        delivery.cancel()
        await services.triggerGracefulShutdown()
        _ = await server.result
        await delivery.value
    }

    /// Waits until the server ends (after SIGTERM/SIGINT when ``Configuration/stopsOnSignals``),
    /// then stops delivery.
    public func waitUntilStopped() async throws {
        let result = await server.result
        await store.stopDelivery()
        delivery.cancel()
        await delivery.value
        try result.get()
    }

    // MARK: - Clock

    /// The fake's now, in Unix seconds.
    public var now: Int64 { configuration.clock.now }

    public func advanceClock(by seconds: Int64) { configuration.clock.advance(by: seconds) }

    // MARK: - Faults

    /// Makes the next `times` requests that `matching` accepts meet `fault`; faults fire in the
    /// order injected, one per request.
    public func inject(_ fault: Fault, times: Int = 1, matching matcher: RequestMatcher = .any) async {
        await store.arm(fault, times: times, matching: matcher)
    }

    public func clearFaults() async { await store.clearFaults() }

    // MARK: - Introspection

    /// Every request received (up to the last 200,000), oldest first.
    public var requests: [RecordedRequest] { get async { await store.requests } }

    public func requests(matching matcher: RequestMatcher) async -> [RecordedRequest] {
        await store.requests.filter { matcher.matches(method: $0.method, path: $0.path) }
    }

    public func requestCount(matching matcher: RequestMatcher = .any) async -> Int {
        await requests(matching: matcher).count
    }

    public func resetRequests() async { await store.resetRequests() }
}
