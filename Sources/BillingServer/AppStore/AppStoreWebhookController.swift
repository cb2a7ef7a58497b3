import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// `POST /webhooks/appstore`: App Store Server Notifications V2. The URL is public, so the
/// notification and the transaction and renewal info inside it are verified to the configured
/// root completely before anything is stored; the delivery then goes through the same group
/// commit as Stripe's, and is answered 200 only once it is on disk. Apple retries a notification
/// that got no 200 (after 1, 12, 24, 48 and 72 hours) with the same `notificationUUID`, which
/// the inbox answers as a duplicate.
public struct AppStoreWebhookController: Sendable {
    let verifier: AppStoreVerifier
    let committer: GroupCommitter
    let metrics: BillingMetrics
    /// Logs rejections, a flood of them in a few lines.
    let rejections: RejectionLog
    /// Told of a full store, and of each commit that ends one.
    let space: StoreSpaceWatch
    let configuration: WebhookController.Configuration
    let now: @Sendable () -> Date

    /// The largest notification body accepted, whatever the general body limit: a real one (a
    /// JWS with two JWS and three certificate chains inside) is about 15 KB, and the endpoint is
    /// public, so a larger body is refused (413 `body_too_large`) before it is read whole.
    public static let maximumBodySize = 64 << 10

    /// - Parameter configuration: the store deadline, and the body limit as Stripe's endpoint,
    ///   capped at ``maximumBodySize``.
    public init(
        verifier: AppStoreVerifier, committer: GroupCommitter, metrics: BillingMetrics, rejections: RejectionLog,
        space: StoreSpaceWatch, configuration: WebhookController.Configuration = .init(), now: @escaping @Sendable () -> Date = Date.init
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
        router.post("/webhooks/appstore") { request, context in
            try await receive(request, logger: context.logger)
        }
    }

    func receive(_ request: Request, logger: Logger) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await ingest(request, logger: logger)
            metrics.time("billingd_appstore_ingest_seconds", ContinuousClock.now - started)
            return response
        } catch let error as APIError {
            metrics.count("billingd_appstore_notifications_total", dimensions: [("outcome", "rejected"), ("reason", error.code)])
            rejections.notice(
                "App Store notification rejected", reason: error.code, metadata: ["status": "\(error.status.code)"], to: logger)
            throw error
        }
    }

    private func ingest(_ request: Request, logger: Logger) async throws -> Response {
        let body = try await RequestBody.collect(request, limit: min(configuration.maximumBodySize, Self.maximumBodySize))
        let notification = try await Self.verify(body, with: verifier)
        let environment = notification.environment ?? AppStoreEnvironment.production.rawValue
        let delivery = InboxDelivery.appStore(notification, body: body, receivedAt: Int64(now().timeIntervalSince1970 * 1000))
        let prepared = committer.prepare(delivery)
        if let failure = prepared.decodingFailure {
            throw APIError(.badRequest, code: "invalid_payload", message: "The notification is genuine but cannot be read: \(failure).")
        }
        let outcome: InboxInsertOutcome
        do {
            outcome = try await withDeadline(configuration.storeDeadline) { [committer] in try await committer.submit(prepared) }
        } catch {
            // A full store is logged once per episode by the watch, not once per notification.
            if space.refused(error, writer: "appstore_webhook") { throw APIError.storeFull("Apple will send it again") }
            logger.error("App Store notification not stored", metadata: ["notification": "\(notification.notificationUUID)", "error": "\(error)"])
            throw APIError(
                .serviceUnavailable, reason: .storeUnavailable,
                message: "The notification could not be stored durably; Apple will send it again.")
        }
        let duplicate = outcome == .duplicate
        // A duplicate wrote nothing, so proves no room.
        if !duplicate { space.wrote() }
        // The label is bounded: a type billingd does not apply (a new one of Apple's among them) counts as `other`.
        let type = notification.notificationType.isApplied ? notification.notificationType.rawValue : "other"
        metrics.count(
            "billingd_appstore_notifications_total", dimensions: [("outcome", duplicate ? "duplicate" : "accepted"), ("type", type)])
        logger.info(
            "App Store notification \(duplicate ? "duplicate" : "accepted")",
            metadata: [
                "notification": "\(notification.notificationUUID)", "type": "\(type)",
                "subtype": "\(notification.subtype.map { UserRequest.printable($0.rawValue) } ?? "-")", "environment": "\(UserRequest.printable(environment))",
            ])
        return DeliveryReceipt.response(id: notification.notificationUUID, duplicate: duplicate)
    }

    /// Verifies a notification body and decodes it; every failure is a 400 with the verifier's code.
    static func verify(_ body: [UInt8], with verifier: AppStoreVerifier) async throws -> AppStoreNotification {
        let signedPayload: String
        do {
            signedPayload = try AppStoreNotification.signedPayload(in: body)
        } catch {
            throw APIError(.badRequest, code: "invalid_body", message: error.message)
        }
        let verified: VerifiedNotification
        do {
            verified = try await verifier.verifyNotification(signedPayload)
        } catch {
            throw APIError(.badRequest, code: error.code.rawValue, message: error.message)
        }
        do {
            // Invariant 9: what is acknowledged can be applied.
            return try AppStoreNotification(
                json: verified.payload, transaction: verified.transaction?.payload, renewalInfo: verified.renewalInfo?.payload)
        } catch {
            throw APIError(.badRequest, code: "invalid_payload", message: "The notification is genuine but cannot be read: \(error.message).")
        }
    }
}
