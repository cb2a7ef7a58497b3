import BillingCore

/// One transaction as the fake keeps it: a purchase, a renewal, or a one-time purchase.
struct TransactionRecord: Sendable {
    let transactionID: String
    let originalTransactionID: String
    /// The Apple account that made it; Get Transaction History lists an account's transactions.
    let customer: String
    let webOrderLineItemID: String?
    let productID: String
    let subscriptionGroupID: String?
    let type: String
    let purchaseDate: Int64
    let originalPurchaseDate: Int64
    /// Moved earlier only when a trigger ends the current period now (see ``FakeAppStore/runNextChangeNow(_:)``).
    var expiresDate: Int64?
    let appAccountToken: String?
    /// `PURCHASE` or `RENEWAL`.
    let reason: String
    /// The order id on the customer's receipt, for Look Up Order ID.
    let orderID: String
    let price: Int64
    let currency: String
    /// 1 (free trial), 2 (pay up front) … for an introductory offer; nil without an offer.
    let offerType: Int?
    var revocationDate: Int64?
    /// 0: other reason, 1: an issue in the app.
    var revocationReason: Int?
    /// A global change counter: Get Transaction History orders by it and pages past it, so a
    /// refund moves the transaction to the end, as a change to it should.
    var revision: UInt64
    /// When the refund was recorded, in the same counter, for Get Refund History.
    var refundRevision: UInt64?
}

/// Where an auto-renewable subscription is in its life; each phase is one of Apple's statuses.
enum SubscriptionPhase: Sendable, Equatable {
    case active
    /// Renewal failed at `failedAt`; access continues until `endsAt`.
    case gracePeriod(failedAt: Int64, endsAt: Int64)
    /// Renewal failed at `failedAt`; Apple keeps trying until the billing retry period ends.
    case billingRetry(failedAt: Int64)
    case expired
    case revoked

    var status: AppStoreFake.SubscriptionStatus {
        switch self {
        case .active: .active
        case .gracePeriod: .billingGracePeriod
        case .billingRetry: .billingRetry
        case .expired: .expired
        case .revoked: .revoked
        }
    }

    /// In a grace period or billing retry: a renewal failed and Apple is still trying.
    var isRetrying: Bool {
        switch self {
        case .gracePeriod, .billingRetry: true
        default: false
        }
    }

    /// How a message names the phase.
    var name: String {
        switch self {
        case .active: "active"
        case .gracePeriod: "in its billing grace period"
        case .billingRetry: "in billing retry"
        case .expired: "expired"
        case .revoked: "revoked (refunded)"
        }
    }
}

/// An auto-renewable subscription: one original transaction and every transaction since.
struct SubscriptionRecord: Sendable {
    let originalTransactionID: String
    let customer: String
    let groupID: String
    let appAccountToken: String?
    var productID: String
    var autoRenewProductID: String
    /// Oldest first; the last is the current period.
    var transactionIDs: [String]
    var autoRenew: Bool
    var phase: SubscriptionPhase
    /// Renewals fail from the next renewal date on (with a grace period when true) until recovered.
    var failingRenewals: Bool?
    /// 1: the customer cancelled, 2: a billing error; nil while renewing.
    var expirationIntent: Int?
    /// When the current uninterrupted run of renewals began.
    var recentStartDate: Int64
    /// When the latest grace period ends or ended, kept in the renewal info as Apple does.
    var gracePeriodExpiresDate: Int64?

    var latestTransactionID: String { transactionIDs[transactionIDs.count - 1] }
}

/// One notification in the history: what was signed, and every attempt to send it.
struct NotificationRecord: Sendable {
    let uuid: String
    let type: String
    let subtype: String?
    let signedDate: Int64
    /// The account it concerns, for the `transactionId` filter of Get Notification History.
    let customer: String?
    let transaction: TransactionPayload?
    let renewalInfo: RenewalInfoPayload?
    let status: Int?
    /// `data.consumptionRequestReason`, for a `CONSUMPTION_REQUEST`.
    var consumptionRequestReason: String? = nil
    /// Signed on first use and kept, so that every read serves the same text.
    var signedPayload: String?
    var sendAttempts: [AppStoreFake.SendAttempt] = []

    var everDelivered: Bool { sendAttempts.contains { $0.result == .success } }
}

extension AppStoreFake {
    /// Apple's subscription statuses, the `status` of Get All Subscription Statuses and of notifications.
    public enum SubscriptionStatus: Int, Sendable, Hashable, CaseIterable {
        case active = 1
        case expired = 2
        case billingRetry = 3
        case billingGracePeriod = 4
        case revoked = 5
    }

    /// The outcome of one attempt to send a notification, as `sendAttemptResult` names it.
    public enum SendAttemptResult: String, Sendable, Hashable, CaseIterable {
        case success = "SUCCESS"
        case timedOut = "TIMED_OUT"
        case tlsIssue = "TLS_ISSUE"
        case circularRedirect = "CIRCULAR_REDIRECT"
        case noResponse = "NO_RESPONSE"
        case socketIssue = "SOCKET_ISSUE"
        case unsupportedCharset = "UNSUPPORTED_CHARSET"
        case invalidResponse = "INVALID_RESPONSE"
        case prematureClose = "PREMATURE_CLOSE"
        case unsuccessfulHTTPResponseCode = "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        case other = "OTHER"
    }

    /// One attempt to send a notification: `{attemptDate, sendAttemptResult}`.
    public struct SendAttempt: Sendable, Hashable {
        /// Unix milliseconds on the fake's clock.
        public let attemptDate: Int64
        public let result: SendAttemptResult
        /// The HTTP status the endpoint answered, nil when none came (or the attempt was dropped).
        public let httpStatus: Int?
    }
}
