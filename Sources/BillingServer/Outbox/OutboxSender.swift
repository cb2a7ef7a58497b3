import APITransport
import BillingCore
import BillingStore
import Foundation
import Logging
import ServiceLifecycle

/// Delivers the outbox to the app's backend, signed per Standard Webhooks: at least once, in
/// order per user and endpoint (the store hands out only a user's next event), many users at
/// once. A failed attempt (network error, timeout, non-2xx) is retried with jittered
/// exponential backoff until the event is 3 days old, then kept `dead`; 410 Gone disables the
/// endpoint. It runs beside the server, never on the path that acknowledges Stripe or Apple.
public final class OutboxSender: Service, Sendable {
    public struct Configuration: Sendable {
        public var signer: StandardWebhookSigner
        public var connectTimeout: Duration = .seconds(5)
        public var timeout: Duration = .seconds(15)
        /// Attempts in flight at once.
        public var concurrency: Int = 64
        /// Events read per pass.
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
    private let wakeups: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    public init(store: any OutboxStore, transport: any HTTPTransport, configuration: Configuration, metrics: BillingMetrics, logger: Logger) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        (wakeups, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks for a pass soon: a ledger transaction queued events.
    public func wake() {
        continuation.yield()
    }

    public func run() async throws {
        let (continuation, interval) = (self.continuation, configuration.pollInterval)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                // Ended by cancelAll below, once the wake-ups finish.
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: interval)
                        continuation.yield()
                    }
                }
                continuation.yield()
                var depthRecordedAt = ContinuousClock.now - .seconds(2)
                for await _ in wakeups {
                    do { _ = try await sendDue() } catch {
                        logger.error("outbox pass failed; retrying shortly", metadata: ["error": "\(error)"])
                    }
                    if ContinuousClock.now - depthRecordedAt >= .seconds(1) {
                        depthRecordedAt = .now
                        try? await recordDepth()
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            continuation.finish()
        }
    }

    /// Sends every due event, pass after pass, until none is due; returns how many attempts were made.
    @discardableResult
    public func sendDue() async throws -> Int {
        var total = 0
        while true {
            let due = try await store.due(now: Self.nowMilliseconds(), limit: configuration.batchSize)
            if due.isEmpty { return total }
            let attempts = await attempt(due)
            for attempt in attempts where attempt.outcome == .gone {
                if let message = due.first(where: { $0.seq == attempt.seq }) {
                    try await store.disableEndpoint(message.endpoint, at: attempt.at, reason: "410 Gone")
                    logger.error(
                        "the app's webhook endpoint answered 410 Gone: it is disabled; events for it are kept. Re-enable it with `billingd outbox enable URL`.",
                        metadata: ["endpoint": "\(message.endpoint)"])
                }
            }
            try await store.record(attempts)
            total += attempts.count
            // Only failures left: they wait for their retry time.
            if !attempts.contains(where: { $0.outcome == .delivered }) { return total }
        }
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
        let request = HTTPTransportRequest(
            method: .post, url: message.endpoint, headers: headers, body: message.event.payload,
            connectTimeout: configuration.connectTimeout, timeout: configuration.timeout)
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
            error = "HTTP \(response.status)"
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
