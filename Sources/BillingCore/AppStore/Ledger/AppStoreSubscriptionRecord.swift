/// Where an App Store subscription (or one-time purchase) stands for the user who owns it,
/// in the words of the service API.
public enum AppStoreStatus: String, Sendable, Hashable, CaseIterable {
    /// Paid through `expiresDate`, which is in the future (or a non-consumable, until revoked).
    case active
    /// Renewal failed and Apple's billing grace period still runs: access continues.
    case gracePeriod = "grace_period"
    /// Renewal failed, Apple keeps retrying, and no grace period is left: no access.
    case billingRetry = "billing_retry"
    /// The period ended and nothing renewed it.
    case expired
    /// Refunded, or family sharing revoked.
    case revoked
}

/// What the ledger keeps of one App Store original transaction, as tier resolution needs it:
/// the current transaction (rule 5 of ``AppStoreVersion``) and the latest renewal info.
public struct AppStoreSubscriptionRecord: Sendable, Equatable {
    public var originalTransactionID: String
    /// `Production`, `Sandbox`, …
    public var environment: String
    /// The current transaction's.
    public var transactionID: String
    public var productID: String
    /// `Auto-Renewable Subscription`, `Non-Consumable`, …
    public var type: String?
    public var subscriptionGroupIdentifier: String?
    /// Unix milliseconds.
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    /// The current transaction is revoked (then every one of the original is, or none is current).
    public var revoked: Bool
    public var revocationDate: Int64?
    /// From the latest renewal info; nil when none came yet.
    public var autoRenewStatus: Bool?
    public var autoRenewProductID: String?
    public var expirationIntent: Int64?
    public var isInBillingRetryPeriod: Bool
    public var gracePeriodExpiresDate: Int64?
    public var offerType: Int64?
    public var price: Int64?
    public var currency: String?
    public var inAppOwnershipType: String?

    public init(
        originalTransactionID: String, environment: String, transactionID: String, productID: String, type: String? = nil,
        subscriptionGroupIdentifier: String? = nil, purchaseDate: Int64? = nil, originalPurchaseDate: Int64? = nil,
        expiresDate: Int64? = nil, revoked: Bool = false, revocationDate: Int64? = nil, autoRenewStatus: Bool? = nil,
        autoRenewProductID: String? = nil, expirationIntent: Int64? = nil, isInBillingRetryPeriod: Bool = false,
        gracePeriodExpiresDate: Int64? = nil, offerType: Int64? = nil, price: Int64? = nil, currency: String? = nil,
        inAppOwnershipType: String? = nil
    ) {
        self.originalTransactionID = originalTransactionID
        self.environment = environment
        self.transactionID = transactionID
        self.productID = productID
        self.type = type
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.revoked = revoked
        self.revocationDate = revocationDate
        self.autoRenewStatus = autoRenewStatus
        self.autoRenewProductID = autoRenewProductID
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.offerType = offerType
        self.price = price
        self.currency = currency
        self.inAppOwnershipType = inAppOwnershipType
    }

    /// A one-time purchase that entitles for good (until revoked).
    public var isLifetime: Bool { type == AppStoreTransaction.nonConsumable }

    /// The status at `now` (Unix ms), from dates rather than from the last notification: a status
    /// is never trusted past its expiry date, so a subscription whose renewal never arrived has
    /// ended even if the last notification said it was active.
    public func status(now: Int64) -> AppStoreStatus {
        if revoked { return .revoked }
        if isLifetime { return .active }
        if type == AppStoreTransaction.autoRenewable || type == nil || type == AppStoreTransaction.nonRenewing {
            if let expires = expiresDate, now < expires { return .active }
            if isInBillingRetryPeriod, type != AppStoreTransaction.nonRenewing {
                if let grace = gracePeriodExpiresDate, now < grace { return .gracePeriod }
                return .billingRetry
            }
            return .expired
        }
        // Consumables never entitle a tier.
        return .expired
    }

    /// Whether it renews at the end of the period (auto-renew on and not in a failed renewal
    /// that Apple gave up on).
    public var willRenew: Bool {
        guard type == AppStoreTransaction.autoRenewable || type == nil else { return false }
        return autoRenewStatus ?? true
    }
}
