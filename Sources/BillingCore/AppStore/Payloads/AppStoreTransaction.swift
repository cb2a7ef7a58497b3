/// One App Store transaction (`JWSTransactionDecodedPayload`): a purchase, a renewal period, a
/// restore or a family-shared copy. Dates are Unix milliseconds, as Apple sends them; prices are
/// milliunits of `currency` (1990 = 1.99).
public struct AppStoreTransaction: Sendable, Equatable {
    public var transactionID: String
    public var originalTransactionID: String
    public var webOrderLineItemID: String?
    public var bundleID: String?
    public var productID: String
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    /// End of the period this transaction paid for (subscriptions only).
    public var expiresDate: Int64?
    public var quantity: Int64?
    /// `Auto-Renewable Subscription`, `Non-Consumable`, `Consumable`, `Non-Renewing Subscription`.
    public var type: String?
    public var appAccountToken: String?
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var inAppOwnershipType: String?
    public var signedDate: Int64
    /// 0 = other, 1 = an issue in the app (Apple's `revocationReason`).
    public var revocationReason: Int64?
    public var revocationDate: Int64?
    /// The user moved to a higher-ranked product of the group; this transaction no longer entitles.
    public var isUpgraded: Bool
    /// 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    public var offerType: Int64?
    public var offerIdentifier: String?
    public var environment: String?
    public var storefront: String?
    public var storefrontID: String?
    /// `PURCHASE` or `RENEWAL`.
    public var transactionReason: String?
    /// ISO 4217 code of `price`.
    public var currency: String?
    /// Milliunits of `currency`.
    public var price: Int64?
    public var offerDiscountType: String?

    /// The payload's JSON exactly as Apple signed it.
    public var json: [UInt8]

    public static let autoRenewable = "Auto-Renewable Subscription"
    public static let nonConsumable = "Non-Consumable"
    public static let nonRenewing = "Non-Renewing Subscription"

    /// Reads a transaction payload. Only `transactionId`, `originalTransactionId`, `productId`
    /// and `signedDate` are required: without them nothing could key or order it.
    public init(json: [UInt8]) throws(AppStorePayloadError) {
        let payload = try AppStoreJSON(json)
        guard let transactionID = payload.string("transactionId") else { throw AppStorePayloadError("the transaction has no transactionId") }
        guard let productID = payload.string("productId") else { throw AppStorePayloadError("the transaction has no productId") }
        guard let signedDate = payload.int64("signedDate") else { throw AppStorePayloadError("the transaction has no signedDate") }
        self.transactionID = transactionID
        originalTransactionID = payload.string("originalTransactionId") ?? transactionID
        webOrderLineItemID = payload.string("webOrderLineItemId")
        bundleID = payload.string("bundleId")
        self.productID = productID
        subscriptionGroupIdentifier = payload.string("subscriptionGroupIdentifier")
        purchaseDate = payload.int64("purchaseDate")
        originalPurchaseDate = payload.int64("originalPurchaseDate")
        expiresDate = payload.int64("expiresDate")
        quantity = payload.int64("quantity")
        type = payload.string("type")
        appAccountToken = payload.string("appAccountToken")?.lowercased()
        inAppOwnershipType = payload.string("inAppOwnershipType")
        self.signedDate = signedDate
        revocationReason = payload.int64("revocationReason")
        revocationDate = payload.int64("revocationDate")
        isUpgraded = payload.bool("isUpgraded") ?? false
        offerType = payload.int64("offerType")
        offerIdentifier = payload.string("offerIdentifier")
        environment = payload.string("environment")
        storefront = payload.string("storefront")
        storefrontID = payload.string("storefrontId")
        transactionReason = payload.string("transactionReason")
        currency = payload.string("currency")
        price = payload.int64("price")
        offerDiscountType = payload.string("offerDiscountType")
        self.json = json
    }

    /// Whether this transaction carries a revocation (refund, or family sharing revoked).
    public var isRevoked: Bool { revocationDate != nil }
}

/// The renewal state of an auto-renewable subscription (`JWSRenewalInfoDecodedPayload`).
public struct AppStoreRenewalInfo: Sendable, Equatable {
    public var originalTransactionID: String
    /// The product that renews next (a pending downgrade or crossgrade shows here).
    public var autoRenewProductID: String?
    public var productID: String?
    /// Whether the subscription renews at the end of the period (`autoRenewStatus` 1).
    public var autoRenewStatus: Bool?
    /// Why it expired: 1 canceled, 2 billing error, 3 declined a price increase, 4 not for sale, 5 other.
    public var expirationIntent: Int64?
    public var gracePeriodExpiresDate: Int64?
    public var isInBillingRetryPeriod: Bool?
    public var offerType: Int64?
    public var offerIdentifier: String?
    public var priceIncreaseStatus: Int64?
    public var signedDate: Int64
    public var environment: String?
    public var recentSubscriptionStartDate: Int64?
    public var renewalDate: Int64?
    public var renewalPrice: Int64?
    public var currency: String?
    public var appAccountToken: String?
    /// The payload's JSON exactly as Apple signed it.
    public var json: [UInt8]

    public init(json: [UInt8]) throws(AppStorePayloadError) {
        let payload = try AppStoreJSON(json)
        guard let original = payload.string("originalTransactionId") else {
            throw AppStorePayloadError("the renewal info has no originalTransactionId")
        }
        guard let signedDate = payload.int64("signedDate") else { throw AppStorePayloadError("the renewal info has no signedDate") }
        originalTransactionID = original
        autoRenewProductID = payload.string("autoRenewProductId")
        productID = payload.string("productId")
        autoRenewStatus = payload.int64("autoRenewStatus").map { $0 == 1 }
        expirationIntent = payload.int64("expirationIntent")
        gracePeriodExpiresDate = payload.int64("gracePeriodExpiresDate")
        isInBillingRetryPeriod = payload.bool("isInBillingRetryPeriod")
        offerType = payload.int64("offerType")
        offerIdentifier = payload.string("offerIdentifier")
        priceIncreaseStatus = payload.int64("priceIncreaseStatus")
        self.signedDate = signedDate
        environment = payload.string("environment")
        recentSubscriptionStartDate = payload.int64("recentSubscriptionStartDate")
        renewalDate = payload.int64("renewalDate")
        renewalPrice = payload.int64("renewalPrice")
        currency = payload.string("currency")
        appAccountToken = payload.string("appAccountToken")?.lowercased()
        self.json = json
    }
}

/// An App Store Server Notification V2 (`ResponseBodyV2DecodedPayload`), its inner signed data
/// decoded.
public struct AppStoreNotification: Sendable, Equatable {
    public var notificationUUID: String
    /// `SUBSCRIBED`, `DID_RENEW`, … kept as Apple spells it, including types billingd does not know.
    public var notificationType: AppStoreNotificationType
    public var subtype: AppStoreNotificationSubtype?
    public var signedDate: Int64
    public var environment: String?
    public var bundleID: String?
    public var appAppleID: Int64?
    /// `data.status`: 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
    public var status: Int64?
    /// `data.consumptionRequestReason` of a `CONSUMPTION_REQUEST`: why the customer asks for a
    /// refund (`UNINTENDED_PURCHASE`, `FULFILLMENT_ISSUE`, `UNSATISFIED_WITH_PURCHASE`, `LEGAL`, `OTHER`).
    public var consumptionRequestReason: String?
    public var transaction: AppStoreTransaction?
    public var renewalInfo: AppStoreRenewalInfo?
    /// The notification payload's JSON exactly as Apple signed it.
    public var json: [UInt8]

    /// Reads a notification payload and the already-verified payloads of its inner JWS.
    public init(json: [UInt8], transaction: [UInt8]?, renewalInfo: [UInt8]?) throws(AppStorePayloadError) {
        let payload = try AppStoreJSON(json)
        guard let uuid = payload.string("notificationUUID") else { throw AppStorePayloadError("the notification has no notificationUUID") }
        guard let type = payload.string("notificationType") else { throw AppStorePayloadError("the notification has no notificationType") }
        guard let signedDate = payload.int64("signedDate") else { throw AppStorePayloadError("the notification has no signedDate") }
        notificationUUID = uuid
        notificationType = AppStoreNotificationType(rawValue: type)
        subtype = payload.string("subtype").map(AppStoreNotificationSubtype.init)
        self.signedDate = signedDate
        let data = payload.nested("data") ?? payload.nested("summary") ?? payload.nested("externalPurchaseToken")
        environment = data?.string("environment")
        bundleID = data?.string("bundleId")
        appAppleID = data?.int64("appAppleId")
        status = data?.int64("status")
        consumptionRequestReason = data?.string("consumptionRequestReason")
        self.transaction = try transaction.map { bytes throws(AppStorePayloadError) in try AppStoreTransaction(json: bytes) }
        self.renewalInfo = try renewalInfo.map { bytes throws(AppStorePayloadError) in try AppStoreRenewalInfo(json: bytes) }
        self.json = json
    }

    /// The original transaction the notification is about, if it is about one.
    public var originalTransactionID: String? {
        transaction?.originalTransactionID ?? renewalInfo?.originalTransactionID
    }
}
