/// The notification history as tests read it, and the delivery to the notification URL.
extension AppStoreFake {
    /// One Server Notification V2 in the history, with what it says unsigned for easy assertions.
    public struct Notification: Sendable, Hashable {
        public let notificationUUID: String
        public let notificationType: String
        public let subtype: String?
        /// Unix milliseconds on the fake's clock.
        public let signedDate: Int64
        public let originalTransactionID: String?
        public let transactionID: String?
        /// `data.status`, for subscriptions.
        public let status: SubscriptionStatus?
        /// The JWS exactly as Get Notification History and the notification URL receive it.
        public let signedPayload: String
        /// Every attempt to send it, oldest first; empty while queued or without a notification URL.
        public let sendAttempts: [SendAttempt]
    }

    /// Every notification so far, oldest first (each signed on first read, then kept).
    public var notificationHistory: [Notification] {
        get async {
            await store.run { store in
                store.catchUp()
                return store.notifications.indices.map { position in
                    let record = store.notifications[position]
                    return Notification(
                        notificationUUID: record.uuid, notificationType: record.type, subtype: record.subtype,
                        signedDate: record.signedDate, originalTransactionID: record.transaction?.originalTransactionId,
                        transactionID: record.transaction?.transactionId,
                        status: record.status.flatMap(SubscriptionStatus.init(rawValue:)),
                        signedPayload: store.signedPayload(at: position), sendAttempts: record.sendAttempts)
                }
            }
        }
    }

    /// `TYPE` or `TYPE/SUBTYPE` of every notification so far, oldest first, without signing any.
    public var notificationTypes: [String] {
        get async {
            await store.run { store in
                store.catchUp()
                return store.notifications.map { record in record.subtype.map { "\(record.type)/\($0)" } ?? record.type }
            }
        }
    }

    // MARK: - Delivery

    /// Sends notifications to `url` from now on; nil only records them in the history.
    public func setNotificationURL(_ url: String?) async {
        await store.setNotificationURL(url)
    }

    public var deliveryPolicy: DeliveryPolicy { get async { await store.deliveryPolicy } }

    public func setDeliveryPolicy(_ policy: DeliveryPolicy) async {
        await store.setDeliveryPolicy(policy)
    }

    /// Changes part of the delivery policy, e.g. `{ $0.dropNext = 1 }`.
    public func updateDeliveryPolicy(_ change: @escaping @Sendable (inout DeliveryPolicy) -> Void) async {
        await store.run { store in
            var policy = store.deliveryPolicy
            change(&policy)
            store.setDeliveryPolicy(policy)
        }
    }

    public func pauseDelivery() async { await updateDeliveryPolicy { $0.isPaused = true } }

    /// Resumes delivery; waiting notifications go out in `order`.
    public func resumeDelivery(order: DeliveryPolicy.Order = .asCreated) async {
        await updateDeliveryPolicy {
            $0.isPaused = false
            $0.order = order
        }
    }

    /// Sends a notification again, as Apple's retry would; false when unknown or without a URL.
    @discardableResult
    public func redeliver(notificationUUID: String) async -> Bool {
        await store.redeliver(notificationUUID)
    }

    /// Waits until no notification is queued or being sent; false on timeout (e.g. while paused).
    @discardableResult
    public func waitForDeliveries(timeout: Duration = .seconds(30)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if await store.deliveriesSettled { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return await store.deliveriesSettled
    }
}

/// Faults and what the fake received.
extension AppStoreFake {
    /// Makes the next `times` requests that `matching` accepts meet `fault`; faults fire in the
    /// order injected, one per request, before the bearer token is checked.
    public func inject(_ fault: Fault, times: Int = 1, matching matcher: RequestMatcher = .any) async {
        await store.arm(fault, times: times, matching: matcher)
    }

    public func clearFaults() async { await store.clearFaults() }

    /// Every request received (up to the last 200,000), oldest first; empty with recording off.
    public var requests: [RecordedRequest] { get async { await store.recorded ?? [] } }

    public func requests(matching matcher: RequestMatcher) async -> [RecordedRequest] {
        await requests.filter { matcher.matches(method: $0.method, path: $0.path) }
    }

    /// Why each refused bearer token was refused, oldest first (counted with recording off too).
    public var refusedTokens: [TokenRefusal] { get async { await store.refusedTokens } }

    /// How many requests passed the bearer token check.
    public var acceptedTokenCount: Int { get async { await store.acceptedTokens } }

    /// Forgets recorded requests and token counts.
    public func resetRequests() async { await store.resetRequests() }
}
