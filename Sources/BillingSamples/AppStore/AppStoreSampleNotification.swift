import BillingCore
import Crypto
import Foundation

/// A realistic App Store Server Notification V2 of any type, with its transaction and renewal
/// info in the state that type implies (a grace period for `DID_FAIL_TO_RENEW/GRACE_PERIOD`, a
/// revocation for `REFUND`, a past expiry for `EXPIRED` …), for `billingd appstore trigger` and
/// the tests. Its members are plain JSON values, so a test can change any of them before signing.
public struct AppStoreSampleNotification {
    public var notificationUUID: String
    public var type: String
    public var subtype: String?
    public var environment: AppStoreEnvironment
    public var bundleID: String
    public var appAppleID: Int64?
    /// Unix milliseconds at which the notification is signed.
    public var signedDate: Int64
    /// `JWSTransactionDecodedPayload` members.
    public var transaction: [String: any Sendable]
    /// `JWSRenewalInfoDecodedPayload` members; nil for one-time purchases.
    public var renewalInfo: [String: any Sendable]?
    /// `data.status`.
    public var status: Int?
    /// `data.consumptionRequestReason`: for `CONSUMPTION_REQUEST`, `UNINTENDED_PURCHASE` unless changed.
    public var consumptionRequestReason: String?

    static let day: Int64 = 86_400_000

    /// - Parameters:
    ///   - now: Unix milliseconds; the purchase, expiry and signing dates are set around it.
    ///   - transactionID: the transaction's id; a new random one when nil.
    public init(
        type: String, subtype: String? = nil, productID: String, originalTransactionID: String, transactionID: String? = nil,
        bundleID: String, environment: AppStoreEnvironment = .sandbox, appAppleID: Int64? = nil, appAccountToken: String? = nil,
        now: Int64
    ) {
        notificationUUID = UUID().uuidString.lowercased()
        self.type = type
        self.subtype = subtype
        self.environment = environment
        self.bundleID = bundleID
        self.appAppleID = appAppleID
        signedDate = now
        consumptionRequestReason = type == "CONSUMPTION_REQUEST" ? "UNINTENDED_PURCHASE" : nil
        let lifetime = type == "ONE_TIME_CHARGE"
        var purchase = now
        var expires: Int64? = lifetime ? nil : now + 30 * Self.day
        var autoRenew = 1
        var billingRetry = false
        var grace: Int64?
        var intent: Int?
        var revocation: Int64?
        status = 1
        switch (type, subtype) {
        case ("DID_FAIL_TO_RENEW", _), ("GRACE_PERIOD_EXPIRED", _):
            purchase = now - 30 * Self.day - 3_600_000
            expires = now - 3_600_000
            billingRetry = true
            intent = 2
            if subtype == "GRACE_PERIOD" {
                grace = now + 6 * Self.day
                status = 4
            } else {
                grace = type == "GRACE_PERIOD_EXPIRED" ? now - 60_000 : nil
                status = 3
            }
        case ("EXPIRED", let reason):
            purchase = now - 30 * Self.day - 3_600_000
            expires = now - 3_600_000
            autoRenew = 0
            intent = ["VOLUNTARY": 1, "BILLING_RETRY": 2, "PRICE_INCREASE": 3, "PRODUCT_NOT_FOR_SALE": 4][reason ?? ""] ?? 5
            status = 2
        case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"):
            autoRenew = 0
            purchase = now - 10 * Self.day
            expires = now + 20 * Self.day
        case ("REFUND", _), ("REVOKE", _):
            purchase = now - 10 * Self.day
            expires = lifetime ? nil : now + 20 * Self.day
            revocation = now - 60_000
            status = 5
        default:
            break
        }
        let transactionID = transactionID ?? Self.randomDigits(seed: notificationUUID)
        var transaction: [String: any Sendable] = [
            "transactionId": transactionID, "originalTransactionId": originalTransactionID,
            "webOrderLineItemId": Self.randomDigits(seed: transactionID + "w"), "bundleId": bundleID, "productId": productID,
            "purchaseDate": Int(purchase), "originalPurchaseDate": Int(purchase), "quantity": 1,
            "type": type == "ONE_TIME_CHARGE" ? "Non-Consumable" : "Auto-Renewable Subscription",
            "inAppOwnershipType": type == "REVOKE" ? "FAMILY_SHARED" : "PURCHASED", "signedDate": Int(now),
            "environment": environment.rawValue, "transactionReason": type == "DID_RENEW" ? "RENEWAL" : "PURCHASE",
            "storefront": "USA", "storefrontId": "143441", "price": 9990, "currency": "USD",
        ]
        if !lifetime {
            transaction["subscriptionGroupIdentifier"] = "21000000"
            transaction["expiresDate"] = Int(expires ?? now)
        }
        if let appAccountToken { transaction["appAccountToken"] = appAccountToken }
        if let revocation {
            transaction["revocationDate"] = Int(revocation)
            transaction["revocationReason"] = 0
        }
        self.transaction = transaction
        if lifetime {
            renewalInfo = nil
            status = nil
        } else {
            var renewal: [String: any Sendable] = [
                "originalTransactionId": originalTransactionID, "autoRenewProductId": productID, "productId": productID,
                "autoRenewStatus": autoRenew, "isInBillingRetryPeriod": billingRetry, "signedDate": Int(now),
                "environment": environment.rawValue, "recentSubscriptionStartDate": Int(purchase),
                "renewalDate": Int(expires ?? now), "renewalPrice": 9990, "currency": "USD",
            ]
            if let grace { renewal["gracePeriodExpiresDate"] = Int(grace) }
            if let intent { renewal["expirationIntent"] = intent }
            if let appAccountToken { renewal["appAccountToken"] = appAccountToken }
            renewalInfo = renewal
        }
    }

    /// The notification payload with the given signed inner data.
    public func payload(signedTransaction: String?, signedRenewalInfo: String?) -> [UInt8] {
        var data: [String: any Sendable] = ["bundleId": bundleID, "environment": environment.rawValue, "bundleVersion": "1.0"]
        if let appAppleID { data["appAppleId"] = Int(appAppleID) }
        if let status { data["status"] = status }
        if let consumptionRequestReason { data["consumptionRequestReason"] = consumptionRequestReason }
        if let signedTransaction { data["signedTransactionInfo"] = signedTransaction }
        if let signedRenewalInfo { data["signedRenewalInfo"] = signedRenewalInfo }
        var payload: [String: any Sendable] = [
            "notificationType": type, "notificationUUID": notificationUUID, "version": "2.0", "signedDate": Int(signedDate),
        ]
        if type == "TEST" {
            payload["data"] = ["bundleId": bundleID, "environment": environment.rawValue] as [String: any Sendable]
        } else {
            payload["data"] = data
        }
        if let subtype { payload["subtype"] = subtype }
        return Self.json(payload)
    }

    /// The transaction's payload JSON.
    public var transactionJSON: [UInt8] { Self.json(transaction) }
    /// The renewal info's payload JSON.
    public var renewalInfoJSON: [UInt8]? { renewalInfo.map(Self.json) }

    /// The notification's `signedPayload`, its transaction and renewal info signed by `sign` too.
    public func signedPayload(_ sign: ([UInt8]) -> String) -> String {
        if type == "TEST" { return sign(payload(signedTransaction: nil, signedRenewalInfo: nil)) }
        return sign(payload(signedTransaction: sign(transactionJSON), signedRenewalInfo: renewalInfoJSON.map(sign)))
    }

    /// A stable original transaction id for a user and product, so repeated triggers walk one
    /// subscription's lifecycle.
    public static func originalTransactionID(user: String, product: String) -> String {
        randomDigits(seed: "original:\(user):\(product)")
    }

    /// Fifteen digits derived from `seed`, in the shape of Apple's transaction ids.
    static func randomDigits(seed: String) -> String {
        let digest = SHA256.hash(data: Array(seed.utf8))
        let number = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 900_000_000_000_000
        return String(100_000_000_000_000 + number)
    }

    static func json(_ object: [String: any Sendable]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8))
    }
}
