/// A transaction or renewal info whose signature, chain and claims were verified.
public struct VerifiedSignedData: Sendable, Equatable {
    /// The JWS payload, base64url-decoded: the JSON bytes exactly as Apple signed them.
    public let payload: [UInt8]
    public let environment: AppStoreEnvironment
    /// Unix milliseconds at which Apple signed the data.
    public let signedDate: Int64

    public init(payload: [UInt8], environment: AppStoreEnvironment, signedDate: Int64) {
        self.payload = payload
        self.environment = environment
        self.signedDate = signedDate
    }
}

/// A Server Notifications V2 `signedPayload`, verified together with the JWS inside its `data`.
public struct VerifiedNotification: Sendable, Equatable {
    /// The notification payload JSON, exactly as signed.
    public let payload: [UInt8]
    public let notificationUUID: String
    public let notificationType: AppStoreNotificationType
    public let subtype: AppStoreNotificationSubtype?
    /// From `data.environment`, or `summary.environment` / `externalPurchaseToken` for types that have no data.
    public let environment: AppStoreEnvironment
    /// Unix milliseconds at which Apple signed the notification.
    public let signedDate: Int64
    /// `data.signedTransactionInfo`, verified.
    public let transaction: VerifiedSignedData?
    /// `data.signedRenewalInfo`, verified.
    public let renewalInfo: VerifiedSignedData?

    public init(
        payload: [UInt8], notificationUUID: String, notificationType: AppStoreNotificationType, subtype: AppStoreNotificationSubtype?,
        environment: AppStoreEnvironment, signedDate: Int64, transaction: VerifiedSignedData?, renewalInfo: VerifiedSignedData?
    ) {
        self.payload = payload
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.environment = environment
        self.signedDate = signedDate
        self.transaction = transaction
        self.renewalInfo = renewalInfo
    }
}
