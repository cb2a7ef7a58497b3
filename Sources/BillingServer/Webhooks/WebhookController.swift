import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// `POST /webhooks/stripe`: verify the signature on the raw bytes, decode the event, commit the
/// delivery to the inbox (applied in the same transaction), and only then answer 2xx.
public struct WebhookController: Sendable {
    /// Settings of the webhook endpoint.
    public struct Configuration: Sendable {
        /// Largest accepted body; Stripe's events are far smaller.
        public var maximumBodySize: Int = 1 << 20
        /// How long a delivery waits for its commit before it is answered 503 (Stripe retries
        /// it, and a commit that lands later makes the retry a duplicate). A database that does
        /// not answer (PostgreSQL restarting, a failover) would otherwise hold every delivery
        /// until its pool gives up, a minute later.
        public var storeDeadline: Duration = .seconds(20)
        public init(maximumBodySize: Int = 1 << 20, storeDeadline: Duration = .seconds(20)) {
            self.maximumBodySize = maximumBodySize
            self.storeDeadline = storeDeadline
        }
    }

    let verifier: SignatureVerifier
    let committer: GroupCommitter
    let metrics: BillingMetrics
    /// Logs rejections, a flood of them in a few lines.
    let rejections: RejectionLog
    /// Told of a full store, and of each commit that ends one.
    let space: StoreSpaceWatch
    let configuration: Configuration
    let now: @Sendable () -> Date

    public init(
        verifier: SignatureVerifier, committer: GroupCommitter, metrics: BillingMetrics, rejections: RejectionLog,
        space: StoreSpaceWatch, configuration: Configuration = .init(), now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.verifier = verifier
        self.committer = committer
        self.metrics = metrics
        self.rejections = rejections
        self.space = space
        self.configuration = configuration
        self.now = now
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        router.post("/webhooks/stripe") { request, context in
            try await receive(request, logger: context.logger)
        }
    }

    private static let signatureHeader = HTTPField.Name("Stripe-Signature")!

    func receive(_ request: Request, logger: Logger) async throws -> Response {
        let started = ContinuousClock.now
        var eventType: String?
        do {
            let outcome = try await ingest(request, logger: logger, eventType: &eventType)
            metrics.ingestLatency(ContinuousClock.now - started)
            return outcome
        } catch let error as APIError {
            let outcome = BillingMetrics.DeliveryOutcome(refusal: error.reason)
            metrics.delivery(outcome, eventType: eventType)
            rejections.notice(
                "webhook rejected", reason: error.code,
                metadata: ["outcome": "\(outcome.rawValue)", "status": "\(error.status.code)"], to: logger)
            throw error
        }
    }

    private func ingest(_ request: Request, logger: Logger, eventType: inout String?) async throws -> Response {
        let started = ContinuousClock.now
        let body = try await RequestBody.collect(request, limit: configuration.maximumBodySize)

        let signature: SignatureVerifier.Verified
        do {
            signature = try verifier.verifySignature(
                body: body, header: request.headers[Self.signatureHeader],
                now: Int64(now().timeIntervalSince1970))
        } catch {
            throw APIError(.badRequest, reason: .signature(error), message: error.message)
        }
        let secretIndex = signature.secretIndex

        let envelope: EventEnvelope
        do {
            envelope = try EventEnvelope(decoding: body)
        } catch {
            throw APIError(.badRequest, reason: .event(error), message: error.message)
        }
        eventType = envelope.type
        do {
            try envelope.checkCreated(signedAt: signature.timestamp, tolerance: verifier.tolerance)
        } catch {
            throw APIError(.badRequest, reason: .event(error), message: error.message)
        }

        let delivery = InboxDelivery(
            envelope: envelope, body: body, receivedAt: Int64(now().timeIntervalSince1970 * 1000),
            source: .webhook, secretIndex: secretIndex)
        // Invariant 9: what is acknowledged can be applied. An object of a type billingd applies
        // that does not decode is refused now, while Stripe still retries it, not stored to die.
        let prepared = committer.prepare(delivery)
        if let failure = prepared.decodingFailure {
            throw APIError(.badRequest, code: "not_an_event", message: "Not a Stripe event billingd can apply: \(failure).")
        }
        let outcome: InboxInsertOutcome
        do {
            outcome = try await withDeadline(configuration.storeDeadline) { [committer] in try await committer.submit(prepared) }
        } catch {
            // A full store is logged once per episode by the watch, not once per delivery.
            if space.refused(error, writer: "webhook") { throw APIError.storeFull("Stripe will retry it") }
            logger.error(
                "webhook not stored", metadata: ["event": "\(envelope.id)", "type": "\(envelope.type)", "error": "\(error)"])
            throw APIError(
                .serviceUnavailable, reason: .storeUnavailable,
                message: "The delivery could not be stored durably; Stripe will retry it.")
        }
        let duplicate = outcome == .duplicate
        // A duplicate wrote nothing, so proves no room.
        if !duplicate { space.wrote() }
        metrics.delivery(duplicate ? .duplicate : .accepted, eventType: envelope.type)
        let elapsed = ContinuousClock.now - started
        logger.info(
            "webhook \(duplicate ? "duplicate" : "accepted")",
            metadata: [
                "event": "\(envelope.id)", "type": "\(envelope.type)", "secret": "#\(secretIndex)",
                "livemode": "\(envelope.livemode)", "duration_ms": "\(Self.milliseconds(elapsed))",
            ])
        return DeliveryReceipt.response(id: envelope.id, duplicate: duplicate)
    }

    static func milliseconds(_ duration: Duration) -> String {
        let ms = Double(duration.nanoseconds) / 1_000_000
        return String(format: "%.2f", ms)
    }
}

extension BillingMetrics.DeliveryOutcome {
    /// The outcome a refused webhook delivery is counted under.
    init(refusal reason: APIError.Reason) {
        switch reason {
        case .bodyTooLarge: self = .tooLarge
        case .signature(.noMatchingSignature): self = .badSignature
        case .signature(let error) where error.isStale: self = .staleTimestamp
        case .storeUnavailable, .storeFull: self = .storeFailed
        case .signature, .event, .other: self = .malformed
        }
    }
}
