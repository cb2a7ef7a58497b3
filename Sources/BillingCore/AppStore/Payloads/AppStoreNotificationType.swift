/// An App Store Server Notifications V2 `notificationType` (`SUBSCRIBED`, `DID_RENEW`, …), as
/// Apple spells it.
///
/// A struct, not an enum, as ``AppStoreEnvironment``: a type Apple adds later decodes, is stored
/// and counted, never refused (invariant 8), as Apple's App Store Server Library keeps the raw
/// value of a type it does not know.
public struct AppStoreNotificationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public static let consumptionRequest = Self(rawValue: "CONSUMPTION_REQUEST")
    public static let didChangeRenewalPref = Self(rawValue: "DID_CHANGE_RENEWAL_PREF")
    public static let didChangeRenewalStatus = Self(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    public static let didFailToRenew = Self(rawValue: "DID_FAIL_TO_RENEW")
    public static let didRenew = Self(rawValue: "DID_RENEW")
    public static let expired = Self(rawValue: "EXPIRED")
    public static let externalPurchaseToken = Self(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    public static let gracePeriodExpired = Self(rawValue: "GRACE_PERIOD_EXPIRED")
    public static let metadataUpdate = Self(rawValue: "METADATA_UPDATE")
    public static let migration = Self(rawValue: "MIGRATION")
    public static let offerRedeemed = Self(rawValue: "OFFER_REDEEMED")
    public static let oneTimeCharge = Self(rawValue: "ONE_TIME_CHARGE")
    public static let priceChange = Self(rawValue: "PRICE_CHANGE")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let refund = Self(rawValue: "REFUND")
    public static let refundDeclined = Self(rawValue: "REFUND_DECLINED")
    public static let refundReversed = Self(rawValue: "REFUND_REVERSED")
    public static let renewalExtended = Self(rawValue: "RENEWAL_EXTENDED")
    public static let renewalExtension = Self(rawValue: "RENEWAL_EXTENSION")
    public static let rescindConsent = Self(rawValue: "RESCIND_CONSENT")
    public static let revoke = Self(rawValue: "REVOKE")
    public static let subscribed = Self(rawValue: "SUBSCRIBED")
    public static let test = Self(rawValue: "TEST")

    /// The types billingd applies. Any other, known or not, is stored and marked ignored.
    public static let applied: Set<Self> = [
        .subscribed, .didRenew, .didFailToRenew, .gracePeriodExpired, .expired, .didChangeRenewalPref,
        .didChangeRenewalStatus, .offerRedeemed, .priceIncrease, .refund, .refundDeclined, .refundReversed,
        .revoke, .renewalExtended, .renewalExtension, .consumptionRequest, .oneTimeCharge, .test,
    ]

    /// Whether billingd applies notifications of this type (see ``applied``).
    public var isApplied: Bool { Self.applied.contains(self) }

    public var description: String { rawValue }
}

/// An App Store Server Notifications V2 `subtype` (`INITIAL_BUY`, `GRACE_PERIOD`, …), as Apple
/// spells it; one Apple adds later is kept as it came, as ``AppStoreNotificationType``.
public struct AppStoreNotificationSubtype: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public static let accepted = Self(rawValue: "ACCEPTED")
    public static let autoRenewDisabled = Self(rawValue: "AUTO_RENEW_DISABLED")
    public static let autoRenewEnabled = Self(rawValue: "AUTO_RENEW_ENABLED")
    public static let billingRecovery = Self(rawValue: "BILLING_RECOVERY")
    public static let billingRetry = Self(rawValue: "BILLING_RETRY")
    public static let downgrade = Self(rawValue: "DOWNGRADE")
    public static let failure = Self(rawValue: "FAILURE")
    public static let gracePeriod = Self(rawValue: "GRACE_PERIOD")
    public static let initialBuy = Self(rawValue: "INITIAL_BUY")
    public static let pending = Self(rawValue: "PENDING")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let productNotForSale = Self(rawValue: "PRODUCT_NOT_FOR_SALE")
    public static let resubscribe = Self(rawValue: "RESUBSCRIBE")
    public static let summary = Self(rawValue: "SUMMARY")
    public static let unreported = Self(rawValue: "UNREPORTED")
    public static let upgrade = Self(rawValue: "UPGRADE")
    public static let voluntary = Self(rawValue: "VOLUNTARY")

    public var description: String { rawValue }
}
