/// The notification delivery queue under the ``AppStoreFake/DeliveryPolicy``: drops decided when
/// a notification is recorded, pause / order / duplicates when a batch is taken.
extension FakeAppStore {
    /// One send: the notification and the JSON body `{"signedPayload": "…"}`.
    struct Delivery: Sendable {
        let uuid: String
        let body: [UInt8]
    }

    func enqueueDelivery(_ record: NotificationRecord) {
        guard notificationURL != nil else { return }
        if deliveryPolicy.dropNext > 0 || deliveryPolicy.dropTypes.contains(record.type) {
            deliveryPolicy.dropNext = max(0, deliveryPolicy.dropNext - 1)
            recordAttempt(record.uuid, .init(attemptDate: record.signedDate, result: deliveryPolicy.dropResult, httpStatus: nil))
            return
        }
        deliveryQueue.append(record.uuid)
        wakeDelivery.yield()
    }

    /// The notifications to send now, in the policy's order; nil while paused, unconfigured or empty.
    func takeDeliveries() -> (url: String, delay: Duration, batch: [Delivery])? {
        guard let url = notificationURL, !deliveryPolicy.isPaused, !deliveryQueue.isEmpty else { return nil }
        var batch: [Delivery] = []
        for uuid in deliveryQueue {
            guard let position = notificationPositions[uuid] else { continue }
            let delivery = Delivery(uuid: uuid, body: Self.body(signedPayload: signedPayload(at: position)))
            batch.append(delivery)
            if deliveryPolicy.deliverTwice { batch.append(delivery) }
        }
        deliveryQueue.removeAll()
        if deliveryPolicy.order == .reversed { batch.reverse() }
        deliveriesInFlight += batch.count
        return (url, deliveryPolicy.delay, batch)
    }

    /// Records the outcome of one send.
    func finishDelivery(of uuid: String, result: AppStoreFake.SendAttemptResult, httpStatus: Int?) {
        deliveriesInFlight -= 1
        recordAttempt(uuid, .init(attemptDate: clock.now, result: result, httpStatus: httpStatus))
    }

    func recordAttempt(_ uuid: String, _ attempt: AppStoreFake.SendAttempt) {
        guard let position = notificationPositions[uuid] else { return }
        notifications[position].sendAttempts.append(attempt)
    }

    /// Sends a notification again (as Apple's retry would), whatever happened to it before.
    func redeliver(_ uuid: String) -> Bool {
        guard notificationPositions[uuid] != nil, notificationURL != nil else { return false }
        deliveryQueue.append(uuid)
        wakeDelivery.yield()
        return true
    }

    /// Nothing queued and nothing being sent.
    var deliveriesSettled: Bool { deliveryQueue.isEmpty && deliveriesInFlight == 0 }

    func setDeliveryPolicy(_ policy: AppStoreFake.DeliveryPolicy) {
        deliveryPolicy = policy
        wakeDelivery.yield()
    }

    func setNotificationURL(_ url: String?) {
        notificationURL = url
        wakeDelivery.yield()
    }

    func stopDelivery() { wakeDelivery.finish() }

    /// `{"signedPayload":"…"}`; a JWS is base64url and dots, so it needs no escaping.
    static func body(signedPayload: String) -> [UInt8] {
        Array(#"{"signedPayload":""#.utf8) + Array(signedPayload.utf8) + Array(#""}"#.utf8)
    }
}
