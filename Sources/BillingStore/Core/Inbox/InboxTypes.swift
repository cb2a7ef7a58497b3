import BillingCore

/// A verified delivery on its way into the inbox.
public struct InboxDelivery: Sendable {
    public let envelope: EventEnvelope
    /// The raw body exactly as received; never re-serialised.
    public let body: [UInt8]
    /// `body` as the inbox stores it, compressed here, where the delivery is made, so that no
    /// serial commit spends its time on it.
    public let stored: StoredBody
    /// Unix milliseconds at which billingd received it.
    public let receivedAt: Int64
    /// Where it came from.
    public let source: InboxSource
    /// Index of the webhook secret that verified it; nil for events fetched from the API.
    public let secretIndex: Int?
    /// An App Store notification's subtype (`INITIAL_BUY`, `GRACE_PERIOD` …); nil for Stripe.
    public let subtype: String?
    /// What `body` holds, verified and decoded by the caller, when it has it in hand (an App
    /// Store notification on `POST /webhooks/appstore`): the group commit applies this value and
    /// does not decode the body's JWS again. Nil for Stripe; a row read back from the inbox (the
    /// applier's retries, replay) is decoded from its stored body.
    public let verifiedAppStore: AppStoreDelivery?

    public init(
        envelope: EventEnvelope, body: [UInt8], receivedAt: Int64, source: InboxSource, secretIndex: Int?, subtype: String? = nil,
        verifiedAppStore: AppStoreDelivery? = nil
    ) {
        self.envelope = envelope
        self.body = body
        self.stored = StoredBody(compressing: body)
        self.receivedAt = receivedAt
        self.source = source
        self.secretIndex = secretIndex
        self.subtype = subtype
        self.verifiedAppStore = verifiedAppStore
    }
}

/// How an event reached the inbox.
public enum InboxSource: String, Sendable, Codable {
    /// A signed `POST /webhooks/stripe` delivery.
    case webhook
    /// Recovered from `GET /v1/events` by reconcile.
    case api
    /// A verified `POST /webhooks/appstore` notification (App Store Server Notifications V2).
    case appStoreNotification = "appstore_notification"
    /// A verified StoreKit 2 transaction the app's backend forwarded for a user.
    case appStoreApp = "appstore_app"
    /// A notification recovered from Get Notification History by App Store reconcile.
    case appStoreHistory = "appstore_history"
    /// A transaction and renewal info fetched from the App Store Server API to repair a subscription.
    case appStoreAPI = "appstore_api"

    /// Whether the row holds App Store data (keyed by environment, applied by the App Store rules).
    public var isAppStore: Bool {
        switch self {
        case .appStoreNotification, .appStoreApp, .appStoreHistory, .appStoreAPI: true
        case .webhook, .api: false
        }
    }
}

/// What happened to one delivery at commit.
public enum InboxInsertOutcome: Sendable, Equatable {
    /// Newly stored, with its position in commit order.
    case stored(seq: Int64)
    /// The event id was already in the inbox: nothing changed.
    case duplicate
}

/// Where an event stands in the applier's pipeline.
public enum InboxStatus: String, Sendable, Codable, CaseIterable {
    /// Stored, not yet applied.
    case pending
    /// Applied to the ledger (or found older than what the ledger holds).
    case applied
    /// A type billingd does not model; kept and acknowledged.
    case ignored
    /// Applying failed; retried with backoff.
    case failed
    /// Failed too often; waits for an operator (`billingd events retry`).
    case dead
}

/// One stored event as listed by `billingd events` and read by the applier.
public struct InboxEvent: Sendable, Equatable {
    public let seq: Int64
    public let eventID: String
    /// nil for the platform account.
    public let account: String?
    public let livemode: Bool
    public let type: String
    /// An App Store notification's subtype; nil for Stripe events.
    public var subtype: String?
    public let apiVersion: String?
    public let created: Int64
    public let objectID: String?
    public let objectType: String?
    public let receivedAt: Int64
    public let source: InboxSource
    public let status: InboxStatus
    public let attempts: Int
    public let lastError: String?
    public let effect: String?

    public init(
        seq: Int64, eventID: String, account: String?, livemode: Bool, type: String, apiVersion: String?,
        created: Int64, objectID: String?, objectType: String?, receivedAt: Int64, source: InboxSource,
        status: InboxStatus, attempts: Int, lastError: String?, effect: String?
    ) {
        self.seq = seq
        self.eventID = eventID
        self.account = account
        self.livemode = livemode
        self.type = type
        self.apiVersion = apiVersion
        self.created = created
        self.objectID = objectID
        self.objectType = objectType
        self.receivedAt = receivedAt
        self.source = source
        self.status = status
        self.attempts = attempts
        self.lastError = lastError
        self.effect = effect
    }
}
