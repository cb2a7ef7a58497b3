import BillingCore
import BillingSamples
import Foundation

/// `JWSTransactionDecodedPayload`, member names exactly as Apple's (and as
/// ``AppStoreSampleNotification`` builds them); nil members are left out.
struct TransactionPayload: Encodable, Sendable {
    var transactionId: String
    var originalTransactionId: String
    var webOrderLineItemId: String?
    var bundleId: String
    var productId: String
    var subscriptionGroupIdentifier: String?
    var purchaseDate: Int64
    var originalPurchaseDate: Int64
    var expiresDate: Int64?
    var quantity: Int
    var type: String
    var appAccountToken: String?
    var inAppOwnershipType: String
    var signedDate: Int64
    var environment: String
    var transactionReason: String
    var storefront: String
    var storefrontId: String
    var price: Int64
    var currency: String
    var offerType: Int?
    var revocationDate: Int64?
    var revocationReason: Int?
}

/// `JWSRenewalInfoDecodedPayload`.
struct RenewalInfoPayload: Encodable, Sendable {
    var originalTransactionId: String
    var autoRenewProductId: String
    var productId: String
    var autoRenewStatus: Int
    var expirationIntent: Int?
    var gracePeriodExpiresDate: Int64?
    var isInBillingRetryPeriod: Bool
    var signedDate: Int64
    var environment: String
    var recentSubscriptionStartDate: Int64
    var renewalDate: Int64?
    var appAccountToken: String?
    var renewalPrice: Int64
    var currency: String
}

/// `responseBodyV2DecodedPayload`: a Server Notification V2 before signing.
struct NotificationPayload: Encodable, Sendable {
    struct Data: Encodable, Sendable {
        var appAppleId: Int64?
        var bundleId: String
        var bundleVersion: String?
        var environment: String
        var signedTransactionInfo: String?
        var signedRenewalInfo: String?
        var status: Int?
        var consumptionRequestReason: String?
    }

    var notificationType: String
    var subtype: String?
    var notificationUUID: String
    var version = "2.0"
    var signedDate: Int64
    var data: Data
}

/// Signs payloads as Apple does: JSON in a compact JWS with the x5c chain of the fake's PKI.
struct PayloadSigner: Sendable {
    let pki: AppStoreTestPKI

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// The compact JWS of `payload` (a transaction, renewal info or notification).
    func sign(_ payload: some Encodable) -> String {
        // Encoding these plain structs of strings and integers cannot fail.
        let json = (try? Self.encoder.encode(payload)).map(Array.init) ?? Array("{}".utf8)
        return pki.sign(payload: json)
    }

    /// A notification's `signedPayload`, its transaction and renewal info signed inside it.
    func sign(
        _ record: NotificationRecord, bundleID: String, appAppleID: Int64?, environment: AppStoreEnvironment
    ) -> String {
        let data: NotificationPayload.Data
        if record.type == "TEST" {
            data = .init(appAppleId: appAppleID, bundleId: bundleID, environment: environment.rawValue)
        } else {
            data = .init(
                appAppleId: appAppleID, bundleId: bundleID, bundleVersion: "1.0", environment: environment.rawValue,
                signedTransactionInfo: record.transaction.map { sign($0) },
                signedRenewalInfo: record.renewalInfo.map { sign($0) },
                status: record.status, consumptionRequestReason: record.consumptionRequestReason)
        }
        return sign(
            NotificationPayload(
                notificationType: record.type, subtype: record.subtype, notificationUUID: record.uuid,
                signedDate: record.signedDate, data: data))
    }
}
