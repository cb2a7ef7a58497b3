import BillingCore
import Foundation
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends queued events to the webhook endpoint one at a time, in queue order, signed with
/// `Stripe-Signature` as Stripe signs them; runs until the store stops waking it.
struct WebhookSender: Sendable {
    let store: FakeStore
    let logger: Logger
    /// How long one delivery may take; Stripe gives up on an endpoint after a few seconds.
    var timeout: TimeInterval = 10

    func run() async {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        for await _ in store.deliveryWakeups {
            while !Task.isCancelled, let (endpoint, batch) = await store.takeDeliveries() {
                for delivery in batch {
                    let status = await send(delivery, to: endpoint, session: session)
                    await store.finishDelivery(of: delivery.eventID, status: status)
                }
            }
        }
    }

    private func send(
        _ delivery: QueuedDelivery, to endpoint: WebhookEndpoint, session: URLSession
    ) async -> DeliveryStatus {
        guard let url = URL(string: endpoint.url) else { return .failed(status: nil) }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = Data(delivery.body)
        request.setValue("application/json; charset=utf-8", forHTTPHeaderField: "Content-Type")
        request.setValue("Stripe/1.0 (+https://stripe.com/docs/webhooks)", forHTTPHeaderField: "User-Agent")
        let signature = SignatureVerifier.header(
            body: delivery.body, secret: endpoint.secret, timestamp: store.clock.now)
        request.setValue(signature, forHTTPHeaderField: "Stripe-Signature")
        do {
            let (_, response) = try await session.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            if (200..<300).contains(status) { return .delivered }
            logger.debug("webhook delivery refused", metadata: ["event": "\(delivery.eventID)", "status": "\(status)"])
            return .failed(status: status)
        } catch {
            logger.debug("webhook delivery failed", metadata: ["event": "\(delivery.eventID)", "error": "\(error)"])
            return .failed(status: nil)
        }
    }
}
