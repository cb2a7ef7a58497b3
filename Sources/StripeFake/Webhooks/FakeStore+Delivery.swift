/// An event waiting to be sent to the webhook endpoint.
struct QueuedDelivery: Sendable {
    let eventID: String
    let type: String
    /// The event JSON exactly as `/v1/events` serves it.
    let body: [UInt8]
}

/// The webhook delivery queue under the ``WebhookDeliveryPolicy``: drops decided when an event
/// happens, pause / order / duplicates when a batch is taken.
extension FakeStore {
    func enqueueDelivery(eventID: String, type: String, body: [UInt8]) {
        guard webhookEndpoint != nil else { return }
        if deliveryPolicy.dropNext > 0 {
            deliveryPolicy.dropNext -= 1
            deliveryStatuses[eventID] = .dropped
            return
        }
        if deliveryPolicy.dropTypes.contains(type) || deliveryPolicy.dropEventIDs.contains(eventID) {
            deliveryStatuses[eventID] = .dropped
            return
        }
        deliveryStatuses[eventID] = .pending
        deliveryQueue.append(QueuedDelivery(eventID: eventID, type: type, body: body))
        wakeDelivery.yield()
    }

    /// The events to send now, in the policy's order; nil while paused, unconfigured or empty.
    func takeDeliveries() -> (endpoint: WebhookEndpoint, batch: [QueuedDelivery])? {
        guard let endpoint = webhookEndpoint, !deliveryPolicy.isPaused, !deliveryQueue.isEmpty else { return nil }
        var batch: [QueuedDelivery] = []
        for delivery in deliveryQueue {
            if deliveryPolicy.dropEventIDs.contains(delivery.eventID) {
                deliveryStatuses[delivery.eventID] = .dropped
                continue
            }
            batch.append(delivery)
            if deliveryPolicy.deliverTwice { batch.append(delivery) }
        }
        deliveryQueue.removeAll()
        if deliveryPolicy.order == .reversed { batch.reverse() }
        deliveriesInFlight += batch.count
        return (endpoint, batch)
    }

    /// Records the outcome of one attempt; with ``WebhookDeliveryPolicy/deliverTwice`` a success counts.
    func finishDelivery(of eventID: String, status: DeliveryStatus) {
        deliveriesInFlight -= 1
        if deliveryStatuses[eventID] == .delivered { return }
        deliveryStatuses[eventID] = status
    }

    /// Nothing queued and nothing being sent.
    var deliveriesSettled: Bool { deliveryQueue.isEmpty && deliveriesInFlight == 0 }

    func setDeliveryPolicy(_ policy: WebhookDeliveryPolicy) {
        deliveryPolicy = policy
        wakeDelivery.yield()
    }

    func setWebhookEndpoint(_ endpoint: WebhookEndpoint?) {
        webhookEndpoint = endpoint
        wakeDelivery.yield()
    }

    /// Sends an event again (as the Dashboard's "Resend" does), whatever happened to it before.
    func redeliver(_ eventID: String, in account: AccountState) throws(StripeAPIError) {
        let event = try existing(.event, eventID, in: account)
        deliveryStatuses[eventID] = .pending
        deliveryQueue.append(QueuedDelivery(eventID: eventID, type: event.fields.type ?? "", body: event.json))
        wakeDelivery.yield()
    }

    func deliveryStatus(of eventID: String) -> DeliveryStatus { deliveryStatuses[eventID] ?? .notSent }

    func stopDelivery() { wakeDelivery.finish() }
}
