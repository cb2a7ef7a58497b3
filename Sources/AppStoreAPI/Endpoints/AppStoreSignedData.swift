import BillingCore

/// A transaction from an answer: the JWS as Apple sent it (what the ledger stores) and its
/// decoded payload, verified.
public struct AppStoreSignedTransaction: Sendable, Equatable {
    public let jws: String
    public let transaction: AppStoreTransaction
}

/// Renewal info from an answer, verified.
public struct AppStoreSignedRenewalInfo: Sendable, Equatable {
    public let jws: String
    public let renewalInfo: AppStoreRenewalInfo
}

/// A notification from Get Notification History or a test notification's status, verified, with
/// Apple's record of its delivery attempts to the server URL.
public struct AppStoreHistoricalNotification: Sendable {
    /// The `signedPayload` exactly as Apple sent it.
    public let signedPayload: String
    public let verified: VerifiedNotification
    public let notification: AppStoreNotification
    public let sendAttempts: [SendAttempt]

    public struct SendAttempt: Sendable, Equatable, Decodable {
        /// Unix milliseconds.
        public let attemptDate: Int64
        /// `SUCCESS`, `TIMED_OUT`, `NO_RESPONSE`, `UNSUCCESSFUL_HTTP_RESPONSE_CODE`, …
        public let sendAttemptResult: String
    }

    /// Whether Apple ever got a 2xx from the server URL for it.
    public var wasDelivered: Bool { sendAttempts.contains { $0.sendAttemptResult == "SUCCESS" } }
}

/// The latest transaction and renewal info of one subscription (Get All Subscription Statuses).
public struct AppStoreLastTransaction: Sendable, Equatable {
    public let originalTransactionID: String
    /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
    public let status: Int
    public let transaction: AppStoreSignedTransaction
    public let renewalInfo: AppStoreSignedRenewalInfo?
}

/// One page of Get Transaction History or Get Refund History.
public struct AppStoreTransactionPage: Sendable {
    public let transactions: [AppStoreSignedTransaction]
    /// Pass back to get the next page (and, after the last, to get only newer transactions later).
    public let revision: String?
    public let hasMore: Bool
}

/// One page of Get Notification History.
public struct AppStoreNotificationPage: Sendable {
    public let notifications: [AppStoreHistoricalNotification]
    public let paginationToken: String?
    public let hasMore: Bool
}

/// What Look Up Order ID found.
public struct AppStoreOrderLookup: Sendable {
    /// Apple's `status`: false (1) when the order id is not valid for this app.
    public let isValid: Bool
    public let transactions: [AppStoreSignedTransaction]
}
