import BillingCore

extension InboxDelivery {
    /// A verified App Store notification on its way into the inbox, keyed by its
    /// `notificationUUID` and environment; `body` is Apple's `{"signedPayload": …}` as received.
    /// The notification rides along, so that the commit that stores it applies it as verified.
    /// - Parameter source: `.appStoreHistory` when reconcile recovered it from Get Notification History.
    public static func appStore(
        _ notification: AppStoreNotification, body: [UInt8], receivedAt: Int64, source: InboxSource = .appStoreNotification
    ) -> InboxDelivery {
        let environment = AppStoreEnvironment(rawValue: notification.environment ?? AppStoreEnvironment.production.rawValue)
        let original = notification.originalTransactionID
        return InboxDelivery(
            envelope: EventEnvelope(
                id: notification.notificationUUID, type: notification.notificationType.rawValue, apiVersion: nil,
                created: notification.signedDate / 1000, livemode: environment.isLive,
                account: InboxAccount.appStore(environment).column, objectID: original,
                objectType: original == nil ? nil : "appstore_subscription"),
            body: body, receivedAt: receivedAt, source: source, secretIndex: nil, subtype: notification.subtype?.rawValue,
            verifiedAppStore: .notification(notification))
    }
}

extension InboxDelivery {
    /// A transaction the app forwarded for a user, as the inbox stores it, so that replay rebuilds it.
    static func appStoreReport(_ report: AppStoreAppTransaction, environment: String, receivedAt: Int64) -> InboxDelivery {
        let transaction = report.transaction
        return InboxDelivery(
            envelope: EventEnvelope(
                id: report.eventID, type: "APP_TRANSACTION", apiVersion: nil, created: transaction.signedDate / 1000,
                livemode: AppStoreEnvironment(rawValue: environment).isLive,
                account: InboxAccount.appStore(AppStoreEnvironment(rawValue: environment)).column,
                objectID: transaction.originalTransactionID, objectType: "appstore_subscription"),
            body: report.body(), receivedAt: receivedAt, source: .appStoreApp, secretIndex: nil)
    }

    /// A transaction fetched from the App Store Server API, as the inbox stores it.
    static func appStoreFetched(_ snapshot: AppStoreServerSnapshot, environment: AppStoreEnvironment, receivedAt: Int64) -> InboxDelivery {
        InboxDelivery(
            envelope: EventEnvelope(
                id: snapshot.eventID, type: "API_SNAPSHOT", apiVersion: nil, created: snapshot.signedDate / 1000,
                livemode: environment.isLive, account: InboxAccount.appStore(environment).column,
                objectID: snapshot.transaction.originalTransactionID, objectType: "appstore_subscription"),
            body: snapshot.body(), receivedAt: receivedAt, source: .appStoreAPI, secretIndex: nil)
    }
}
