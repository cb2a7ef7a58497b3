import APITransport
import AsyncAlgorithms
import BillingCore
import BillingStore
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Delivers the outbox to the app's backend, signed per Standard Webhooks: at least once, in
/// order per user and endpoint (the store hands out only a user's next event), many users at
/// once. A failed attempt (network error, timeout, non-2xx) is retried with jittered
/// exponential backoff until the event is 3 days old, then kept `dead`; 410 Gone disables the
/// endpoint. It runs beside the server, never on the path that acknowledges Stripe or Apple.
///
/// Each endpoint is sent to in lanes of its own: a lane takes the endpoint's share of a pass,
/// at most `concurrency` attempts in flight, records them and ends; a new lane for that endpoint
/// starts only after it, while the other endpoints' lanes come and go. So an endpoint that
/// hangs holds its own lane until its attempts time out, never another endpoint's events
/// (issue 39).
public final class OutboxSender: Service, Sendable {
    public struct Configuration: Sendable {
        public var signer: StandardWebhookSigner
        public var connectTimeout: Duration = .seconds(5)
        public var timeout: Duration = .seconds(15)
        /// Attempts in flight at once to one endpoint; with ``OutboxSender/init(store:configuration:metrics:logger:)``
        /// each endpoint also has this many connections of its own.
        public var concurrency: Int = 16
        /// Events read per pass, shared among the endpoints with events due.
        public var batchSize: Int = 512
        /// How long an event is retried before it is dead.
        public var retryWindow: Duration = .seconds(3 * 86_400)
        public var firstRetryDelay: Duration = .seconds(5)
        public var maximumRetryDelay: Duration = .seconds(3600)
        /// How often the sender looks without being woken.
        public var pollInterval: Duration = .seconds(1)

        public init(signer: StandardWebhookSigner) {
            self.signer = signer
        }
    }

    private let store: any OutboxStore
    private let transport: any HTTPTransport
    private let configuration: Configuration
    private let metrics: BillingMetrics
    private let logger: Logger
    /// Says when the store is full (see ``init(store:transport:configuration:metrics:logger:space:)``).
    private let space: StoreSpaceWatch?
    private let wakeups: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    /// A sender over libcurl with `configuration.concurrency` connections per endpoint
    /// (``EndpointTransports``), so that an endpoint that hangs holds only its own.
    public convenience init(
        store: any OutboxStore, configuration: Configuration, metrics: BillingMetrics, logger: Logger, space: StoreSpaceWatch? = nil
    ) {
        self.init(
            store: store, transport: EndpointTransports(connectionsPerEndpoint: configuration.concurrency), configuration: configuration,
            metrics: metrics, logger: logger, space: space)
    }

    /// - Parameter space: while it says the store is full, the sender sends nothing: it could not
    ///   record the attempts, and would send the same events again at every poll.
    public init(
        store: any OutboxStore, transport: any HTTPTransport, configuration: Configuration, metrics: BillingMetrics, logger: Logger,
        space: StoreSpaceWatch? = nil
    ) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.space = space
        (wakeups, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks for a pass soon: a ledger transaction queued events.
    public func wake() {
        continuation.yield()
    }

    public func run() async throws {
        let (continuation, interval) = (self.continuation, configuration.pollInterval)
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                // The poll; ends at graceful shutdown or cancellation.
                group.addTask {
                    for await _ in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
                        continuation.yield()
                    }
                }
                continuation.yield()
                // Store failures are logged and retried at the next wake-up; it ends when the
                // wake-ups do, once its lanes have.
                _ = try? await runLanes(signals: wakeups, signal: continuation, draining: false)
            }
        } onGracefulShutdown: {
            continuation.finish()
        }
    }

    /// Sends every due event, lane after lane, until none is due (an endpoint whose lane
    /// delivered nothing waits for its retries); returns how many attempts were made.
    @discardableResult
    public func sendDue() async throws -> Int {
        let (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        defer { signal.finish() }
        signal.yield()
        return try await runLanes(signals: signals, signal: signal, draining: true)
    }

    /// At each signal: frees the endpoints whose lane ended, reads what is due, and starts a lane
    /// for each endpoint with due events and no lane running. Lanes signal as they end. Runs
    /// until `signals` ends, or, when `draining`, until nothing is due and no lane runs; returns
    /// the attempts made. Not draining, a failure to read is logged and tried again at the next
    /// signal; draining, it ends the run once the lanes have, as does a failure to record.
    private func runLanes(signals: AsyncStream<Void>, signal: AsyncStream<Void>.Continuation, draining: Bool) async throws -> Int {
        let lanes = OutboxLanes()
        var failure: (any Error)?
        var depthRecordedAt = ContinuousClock.now - .seconds(2)
        await withDiscardingTaskGroup { group in
            var iterator = signals.makeAsyncIterator()
            while await iterator.next() != nil {
                // A full store could not record what is sent: wait for room (the watch) instead.
                if !draining, space?.isFull == true { continue }
                let (running, stalled) = lanes.free()
                // Only what a lane starts for now: on PostgreSQL what is read is also leased for
                // two minutes, so an event read for an endpoint whose lane still runs would wait
                // out that lease instead of going in the endpoint's next lane.
                let busy = draining ? running.union(stalled) : running
                let due: [OutboxMessage]
                do {
                    due = try await store.due(now: Self.nowMilliseconds(), limit: configuration.batchSize, excluding: busy)
                } catch {
                    if draining {
                        failure = error
                        break
                    }
                    logger.error("outbox pass failed; retrying shortly", metadata: ["error": "\(error)"])
                    continue
                }
                let startable = Dictionary(grouping: due, by: \.endpoint)
                for (endpoint, messages) in startable {
                    lanes.start(endpoint)
                    group.addTask { await self.lane(endpoint, messages, lanes: lanes, signal: signal, draining: draining) }
                }
                if draining, startable.isEmpty, running.isEmpty { break }
                if !draining, ContinuousClock.now - depthRecordedAt >= .seconds(1) {
                    depthRecordedAt = .now
                    try? await recordDepth()
                }
            }
        }
        if let failure = failure ?? lanes.failure { throw failure }
        return lanes.attempts
    }

    /// One endpoint's lane: attempts its messages, disables it on 410 Gone, records the attempts.
    /// It signals as it ends, unless, not draining, it delivered nothing or could not record: its
    /// endpoint then waits for the next poll rather than being read (and sent) again at once.
    private func lane(
        _ endpoint: String, _ messages: [OutboxMessage], lanes: OutboxLanes, signal: AsyncStream<Void>.Continuation, draining: Bool
    ) async {
        let attempts = await attempt(messages)
        var failure: (any Error)?
        do {
            if let gone = attempts.first(where: { $0.outcome == .gone }) {
                try await store.disableEndpoint(endpoint, at: gone.at, reason: "410 Gone")
                logger.error(
                    "the app's webhook endpoint answered 410 Gone: it is disabled; events for it are kept. Re-enable it with `billingd outbox enable URL`.",
                    metadata: ["endpoint": "\(endpoint)"])
            }
            try await store.record(attempts)
        } catch {
            failure = error
            // A full store is logged once per episode by the watch.
            if space?.refused(error, writer: "outbox") != true {
                logger.error("outbox attempts not recorded; their events are sent again", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }
        }
        let delivered = attempts.contains { $0.outcome == .delivered }
        lanes.end(endpoint, attempts: attempts.count, delivered: delivered, failure: failure)
        if draining || (delivered && failure == nil) { signal.yield() }
    }

    /// Attempts each message once, `concurrency` at a time.
    private func attempt(_ messages: [OutboxMessage]) async -> [OutboxAttempt] {
        await withTaskGroup(of: OutboxAttempt.self) { group in
            var results: [OutboxAttempt] = []
            results.reserveCapacity(messages.count)
            var next = messages.makeIterator()
            for _ in 0..<min(configuration.concurrency, messages.count) {
                if let message = next.next() { group.addTask { await self.deliver(message) } }
            }
            while let result = await group.next() {
                results.append(result)
                if let message = next.next() { group.addTask { await self.deliver(message) } }
            }
            return results
        }
    }

    /// One signed POST of one message, and what it came to.
    func deliver(_ message: OutboxMessage) async -> OutboxAttempt {
        let timestamp = Int64(Date().timeIntervalSince1970)
        var headers = configuration.signer.headers(id: message.event.id, timestamp: timestamp, body: message.event.payload)
        headers.append(("content-type", "application/json"))
        headers.append(("user-agent", "billingd-outbox"))
        // Only the status counts; the start of the reply's body is kept for the error, the rest
        // is not read (and never decompressed), however much the receiver sends.
        let request = HTTPTransportRequest(
            method: .post, url: message.endpoint, headers: headers, body: message.event.payload,
            connectTimeout: configuration.connectTimeout, timeout: configuration.timeout, responseBody: .prefix(Self.replyBytesKept))
        let started = ContinuousClock.now
        let error: String
        do {
            let response = try await transport.perform(request)
            metrics.time("billingd_outbox_delivery_seconds", ContinuousClock.now - started)
            let now = Self.nowMilliseconds()
            if (200..<300).contains(response.status) {
                metrics.count("billingd_outbox_deliveries_total", dimensions: [("outcome", "delivered")])
                metrics.time("billingd_outbox_commit_to_delivery_seconds", .milliseconds(max(0, now - message.event.createdAt)))
                return OutboxAttempt(seq: message.seq, outcome: .delivered, at: now)
            }
            if response.status == 410 {
                metrics.count("billingd_outbox_deliveries_total", dimensions: [("outcome", "gone")])
                return OutboxAttempt(seq: message.seq, outcome: .gone, at: now)
            }
            error = Self.failure(response)
        } catch let failure {
            error = failure.description
        }
        let now = Self.nowMilliseconds()
        let delay = retryDelayMilliseconds(afterAttempt: message.attempts + 1)
        let window = Int64(configuration.retryWindow.components.seconds) * 1000
        if now + delay - message.event.createdAt > window {
            metrics.count("billingd_outbox_deliveries_total", dimensions: [("outcome", "dead")])
            logger.warning(
                "an outbound event is dead after retrying for its whole window; `billingd outbox retry` sends it again",
                metadata: ["id": "\(message.event.id)", "endpoint": "\(message.endpoint)", "error": "\(error)"])
            return OutboxAttempt(seq: message.seq, outcome: .dead(error: error), at: now)
        }
        metrics.count("billingd_outbox_deliveries_total", dimensions: [("outcome", "failed")])
        return OutboxAttempt(seq: message.seq, outcome: .failed(error: error, retryAt: now + delay), at: now)
    }

    /// Bytes of a reply's body read at most (issue 39).
    static let replyBytesKept = 4096

    /// A failed reply as its attempt's error: the status, and the start of the body as printable
    /// text, for the `billingd outbox` listing and the log.
    static func failure(_ response: HTTPTransportResponse) -> String {
        let text = String(decoding: response.body.prefix(200), as: UTF8.self)
            .map { $0.isASCII && ($0.asciiValue! < 0x20 || $0.asciiValue! == 0x7f) ? " " : $0 }
        let excerpt = String(text).trimmingCharacters(in: .whitespaces)
        guard !excerpt.isEmpty else { return "HTTP \(response.status)" }
        let more = response.body.count > 200 || response.bodyTruncated ? "…" : ""
        return "HTTP \(response.status): \(excerpt)\(more)"
    }

    /// Exponential backoff from the first delay, capped, with ±25 % jitter so that the retries of
    /// many users do not arrive together.
    func retryDelayMilliseconds(afterAttempt attempt: Int) -> Int64 {
        func milliseconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        }
        let base = min(milliseconds(configuration.maximumRetryDelay), milliseconds(configuration.firstRetryDelay) * pow(2, Double(min(30, max(0, attempt - 1)))))
        return max(1, Int64(base * Double.random(in: 0.75...1.25)))
    }

    private func recordDepth() async throws {
        let depth = try await store.depth()
        for status in OutboxStatus.allCases {
            metrics.gauge("billingd_outbox_events", Double(depth.counts[status] ?? 0), dimensions: [("status", status.rawValue)])
        }
        let pending = (depth.counts[.pending] ?? 0) + (depth.counts[.failed] ?? 0)
        metrics.gauge("billingd_outbox_pending_depth", Double(pending))
        let age = depth.oldestUndeliveredAt.map { max(0, Date().timeIntervalSince1970 - Double($0) / 1000) } ?? 0
        metrics.gauge("billingd_outbox_oldest_pending_age_seconds", age)
    }

    static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}

/// The endpoints whose lane runs, and what the lanes that ended came to; shared by the sender's
/// loop and its lanes.
final class OutboxLanes: Sendable {
    private struct State {
        var running: Set<String> = []
        /// Lanes that ended since the loop last freed them.
        var ended: [String] = []
        /// Endpoints whose last lane delivered nothing.
        var stalled: Set<String> = []
        var attempts = 0
        var failure: (any Error)?
    }

    private let state = Mutex(State())

    func start(_ endpoint: String) {
        state.withLock { _ = $0.running.insert(endpoint) }
    }

    func end(_ endpoint: String, attempts: Int, delivered: Bool, failure: (any Error)?) {
        state.withLock { state in
            state.ended.append(endpoint)
            state.attempts += attempts
            if delivered { state.stalled.remove(endpoint) } else { state.stalled.insert(endpoint) }
            if state.failure == nil { state.failure = failure }
        }
    }

    /// Frees the endpoints whose lane ended (the loop then reads what their lanes recorded);
    /// the endpoints still running, and those whose last lane delivered nothing.
    func free() -> (running: Set<String>, stalled: Set<String>) {
        state.withLock { state in
            state.running.subtract(state.ended)
            state.ended.removeAll()
            return (state.running, state.stalled)
        }
    }

    var attempts: Int { state.withLock { $0.attempts } }
    var failure: (any Error)? { state.withLock { $0.failure } }
}

/// A `CurlTransport` per endpoint URL, made on first use: an endpoint that hangs holds its own
/// connections, never another endpoint's.
public final class EndpointTransports: HTTPTransport {
    private let connectionsPerEndpoint: Int
    private let transports = Mutex<[String: CurlTransport]>([:])

    public init(connectionsPerEndpoint: Int) {
        self.connectionsPerEndpoint = max(1, connectionsPerEndpoint)
    }

    public func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse {
        let transport = transports.withLock { transports in
            if let existing = transports[request.url] { return existing }
            let made = CurlTransport(maxConnections: connectionsPerEndpoint)
            transports[request.url] = made
            return made
        }
        return try await transport.perform(request)
    }
}
