import BillingCore

/// Apple's refund requests (`CONSUMPTION_REQUEST`) and billingd's answers to them, and each
/// user's consent to share consumption data with Apple.
///
/// A request's row is written by the transaction that applies its notification (one per
/// notification UUID: a repeated delivery adds nothing), so an acknowledged request is never
/// lost. The responder claims due rows for a lease, records each attempt before its call and
/// the outcome after it; an outcome changes only a row still `pending`, so a replica whose lease
/// ran out cannot undo what another recorded. Neither table is derived from the inbox: replay
/// keeps them, copy carries them.
public protocol AppStoreConsumptionStore: Sendable {
    /// Records whether `user` consents, at `now` (Unix seconds); returns what is kept.
    func setConsent(of user: String, consented: Bool, now: Int64) async throws -> ConsumptionConsent
    /// The user's recorded consent; nil when none was ever recorded.
    func consent(of user: String) async throws -> ConsumptionConsent?
    /// Takes up to `limit` pending requests of `environments` due at `now` (Unix ms), oldest due
    /// first, and holds them until `leaseUntil`: no other claim takes them before, on any replica.
    func claimDue(environments: [String], now: Int64, leaseUntil: Int64, limit: Int) async throws -> [AppStoreConsumptionRequest]
    /// What the answer to `request` is decided from, read now.
    func answerContext(for request: AppStoreConsumptionRequest) async throws -> AppStoreConsumptionContext
    /// Records what became of a pending request at `at` (Unix ms); false when the row was no
    /// longer pending (another replica finished it), and nothing changed.
    @discardableResult
    func record(_ outcome: AppStoreConsumptionOutcome, environment: String, notificationUUID: String, at: Int64) async throws -> Bool
    /// Marks `expired` every pending request whose 12 hours ended by `now` (Unix ms), of any
    /// environment; returns how many.
    func expireOverdue(now: Int64) async throws -> Int
    /// Requests newest first, of one status or any.
    func requests(status: AppStoreConsumptionStatus?, limit: Int) async throws -> [AppStoreConsumptionRequest]
}

/// A user's consent to share consumption data with Apple, as the app last reported it.
public struct ConsumptionConsent: Sendable, Equatable {
    public var consented: Bool
    /// Unix seconds.
    public var updatedAt: Int64

    public init(consented: Bool, updatedAt: Int64) {
        self.consented = consented
        self.updatedAt = updatedAt
    }
}

/// Where a refund request stands.
public enum AppStoreConsumptionStatus: String, Sendable, Codable, CaseIterable {
    /// Not answered yet: waiting for its first attempt, or for a retry.
    case pending
    /// Apple accepted the answer (202).
    case sent
    /// Not answered: the purchase's owner had not consented when it was due (Apple refuses an
    /// answer without consent).
    case noConsent = "no_consent"
    /// Not answered within Apple's 12 hours; nothing more is sent.
    case expired
    /// Apple refused the answer (a 4xx other than 429); its error is kept.
    case failed
}

/// One refund request and billingd's answer, as the store keeps it.
public struct AppStoreConsumptionRequest: Sendable, Equatable {
    /// `Production` or `Sandbox`.
    public var environment: String
    public var notificationUUID: String
    /// The transaction the customer asks a refund of: the one the answer is about.
    public var transactionID: String
    public var originalTransactionID: String
    /// The purchase's owner, once billingd knows it.
    public var user: String?
    /// Apple's `consumptionRequestReason`, when it sent one.
    public var reason: String?
    /// The notification's `signedDate`, Unix ms; Apple takes an answer until 12 hours after it.
    public var signedDate: Int64
    /// When billingd applied the notification, Unix ms.
    public var receivedAt: Int64
    public var status: AppStoreConsumptionStatus
    /// Calls made (or begun) to Apple.
    public var attempts: Int
    /// When it is (or was claimed to be) tried next, Unix ms; nil once finished.
    public var nextAttemptAt: Int64?
    public var lastAttemptAt: Int64?
    /// When Apple accepted the answer, Unix ms.
    public var sentAt: Int64?
    /// The JSON sent (or being sent) to Apple.
    public var body: [UInt8]?
    /// The HTTP status of Apple's last answer.
    public var appleStatus: Int?
    /// Why the last attempt failed, or why nothing was sent; never a secret.
    public var lastError: String?

    public init(
        environment: String, notificationUUID: String, transactionID: String, originalTransactionID: String, user: String? = nil,
        reason: String? = nil, signedDate: Int64, receivedAt: Int64, status: AppStoreConsumptionStatus = .pending, attempts: Int = 0,
        nextAttemptAt: Int64? = nil, lastAttemptAt: Int64? = nil, sentAt: Int64? = nil, body: [UInt8]? = nil, appleStatus: Int? = nil,
        lastError: String? = nil
    ) {
        self.environment = environment
        self.notificationUUID = notificationUUID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.user = user
        self.reason = reason
        self.signedDate = signedDate
        self.receivedAt = receivedAt
        self.status = status
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastAttemptAt = lastAttemptAt
        self.sentAt = sentAt
        self.body = body
        self.appleStatus = appleStatus
        self.lastError = lastError
    }

    /// The last moment an answer may be sent, Unix ms.
    public var deadline: Int64 { ConsumptionAnswerPolicy.deadline(requestedAt: signedDate) }

    /// The answer sent (or being sent), read back from ``body``.
    public var answer: ConsumptionInformation? { body.flatMap(ConsumptionInformation.init(json:)) }
}

/// What the answer to a request is decided from: the ledger as it is when the answer is due.
public struct AppStoreConsumptionContext: Sendable, Equatable {
    /// The purchase's owner now.
    public var owner: String?
    /// The owner's consent; nil without an owner or a recorded consent.
    public var consent: ConsumptionConsent?
    /// The request's transaction as the ledger holds it.
    public var transaction: Transaction?
    /// How many entitlement records (the access each ledger change left them with) the ledger
    /// keeps of the owner in the request's mode.
    public var historyRecords: Int
    /// Whether one of them shows the owner entitled through this purchase.
    public var entitledThroughPurchase: Bool

    public struct Transaction: Sendable, Equatable {
        public var productID: String
        public var type: String?
        /// Unix ms.
        public var purchaseDate: Int64?
        public var expiresDate: Int64?
        public var revocationDate: Int64?

        public init(productID: String, type: String?, purchaseDate: Int64?, expiresDate: Int64?, revocationDate: Int64?) {
            self.productID = productID
            self.type = type
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.revocationDate = revocationDate
        }
    }

    public init(
        owner: String?, consent: ConsumptionConsent?, transaction: Transaction?, historyRecords: Int = 0, entitledThroughPurchase: Bool = false
    ) {
        self.owner = owner
        self.consent = consent
        self.transaction = transaction
        self.historyRecords = historyRecords
        self.entitledThroughPurchase = entitledThroughPurchase
    }
}

/// What became of a pending request.
public enum AppStoreConsumptionOutcome: Sendable, Equatable {
    /// A call to Apple begins with `body`, for the purchase's owner `user`: recorded before the
    /// call, so that a crash during it leaves a row that says a call may have been made.
    case attempting(body: [UInt8], user: String)
    /// Apple answered 202.
    case sent(appleStatus: Int)
    /// The call failed in a way worth retrying (429, 5xx, no answer): pending again at `retryAt` (Unix ms).
    case retry(at: Int64, error: String, appleStatus: Int?)
    /// Apple refused the answer; it is not sent again.
    case failed(error: String, appleStatus: Int?)
    /// The owner (nil: none known) had not consented: nothing is sent.
    case noConsent(user: String?)
    /// Apple's 12 hours ended: nothing more is sent.
    case expired
    /// The call was cancelled by a shutdown before an answer came: due again at once.
    case released
}
