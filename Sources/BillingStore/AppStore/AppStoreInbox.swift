import BillingCore

extension InboxDelivery {
    /// A verified App Store notification on its way into the inbox, keyed by its
    /// `notificationUUID` and environment; `body` is Apple's `{"signedPayload": …}` as received.
    /// - Parameter source: `.appStoreHistory` when reconcile recovered it from Get Notification History.
    public static func appStore(
        _ notification: AppStoreNotification, body: [UInt8], receivedAt: Int64, source: InboxSource = .appStoreNotification
    ) -> InboxDelivery {
        let environment = AppStoreEnvironment(rawValue: notification.environment ?? AppStoreEnvironment.production.rawValue)
        let original = notification.originalTransactionID
        return InboxDelivery(
            envelope: EventEnvelope(
                id: notification.notificationUUID, type: notification.notificationType, apiVersion: nil,
                created: notification.signedDate / 1000, livemode: environment.isLive,
                account: AppStoreLedgerWriter.inboxAccount(environment.rawValue), objectID: original,
                objectType: original == nil ? nil : "appstore_subscription"),
            body: body, receivedAt: receivedAt, source: source, secretIndex: nil, subtype: notification.subtype)
    }
}
