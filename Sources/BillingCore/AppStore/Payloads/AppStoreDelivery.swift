import Crypto
import Foundation

/// App Store data on its way through the inbox: what `POST /webhooks/appstore` stores (Apple's
/// body as received) and what the service API stores for a transaction the app forwarded (the
/// JWS with the user it belongs to). Both were verified before they were stored; the applier
/// reads them back without verifying again.
public enum AppStoreDelivery: Sendable, Equatable {
    /// A Server Notification V2.
    case notification(AppStoreNotification)
    /// A StoreKit 2 transaction forwarded by the app's backend for `user`.
    case app(AppStoreAppTransaction)
    /// A transaction (and renewal info) billingd fetched from the App Store Server API.
    case server(AppStoreServerSnapshot)
}

/// What the app's backend forwarded: a signed transaction, the user it reported it for, and
/// what to do if another user already owns the purchase.
public struct AppStoreAppTransaction: Sendable, Equatable {
    public var user: String
    public var ownership: AppStoreOwnershipRule
    public var signedTransaction: String
    public var transaction: AppStoreTransaction

    public init(user: String, ownership: AppStoreOwnershipRule, signedTransaction: String, transaction: AppStoreTransaction) {
        self.user = user
        self.ownership = ownership
        self.signedTransaction = signedTransaction
        self.transaction = transaction
    }

    /// The inbox body: JSON with the user, the rule and the JWS. The rule is stored with it so
    /// that a replay decides ownership as the live request did, whatever the setting is then.
    public func body() -> [UInt8] {
        let object: [String: String] = ["app_user_id": user, "ownership": ownership.rawValue, "signed_transaction": signedTransaction]
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    /// An inbox id for this user's report of this exact JWS: the same report twice is one
    /// event; another user's report of it is another.
    public var eventID: String {
        let digest = SHA256.hash(data: Array(user.utf8) + [0] + Array(signedTransaction.utf8))
        return "appstore_app_" + digest.prefix(20).map { String(format: "%02x", $0) }.joined()
    }

    /// Reads a stored body back.
    public init(body: [UInt8]) throws(AppStorePayloadError) {
        let json = try AppStoreJSON(body)
        guard let user = json.string("app_user_id"), let jws = json.string("signed_transaction") else {
            throw AppStorePayloadError("the stored app transaction lacks app_user_id or signed_transaction")
        }
        let payload: [UInt8]
        do {
            payload = try AppStoreJWS.payload(of: jws)
        } catch {
            throw AppStorePayloadError("the stored signed transaction is not a JWS: \(error.message)")
        }
        self.init(
            user: user, ownership: AppStoreOwnershipRule(rawValue: json.string("ownership") ?? "") ?? .keep,
            signedTransaction: jws, transaction: try AppStoreTransaction(json: payload))
    }
}

/// What billingd fetched from the App Store Server API (Get All Subscription Statuses, Get
/// Transaction History) to repair a subscription: a transaction and, for a subscription's latest
/// one, its renewal info. Stored in the inbox like a delivery, so that a replay rebuilds it.
public struct AppStoreServerSnapshot: Sendable, Equatable {
    public var signedTransaction: String
    public var transaction: AppStoreTransaction
    public var signedRenewalInfo: String?
    public var renewalInfo: AppStoreRenewalInfo?

    public init(signedTransaction: String, transaction: AppStoreTransaction, signedRenewalInfo: String?, renewalInfo: AppStoreRenewalInfo?) {
        self.signedTransaction = signedTransaction
        self.transaction = transaction
        self.signedRenewalInfo = signedRenewalInfo
        self.renewalInfo = renewalInfo
    }

    /// The inbox body: the JWS as Apple sent them.
    public func body() -> [UInt8] {
        var object = ["signed_transaction": signedTransaction]
        if let signedRenewalInfo { object["signed_renewal_info"] = signedRenewalInfo }
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    /// An inbox id for exactly these signed data: fetching the same state twice is one event.
    public var eventID: String {
        let digest = SHA256.hash(data: Array(signedTransaction.utf8) + [0] + Array((signedRenewalInfo ?? "").utf8))
        return "appstore_api_" + digest.prefix(20).map { String(format: "%02x", $0) }.joined()
    }

    /// The date of the newest signed data in it (Unix ms).
    public var signedDate: Int64 { max(transaction.signedDate, renewalInfo?.signedDate ?? 0) }

    /// Reads a stored body back.
    public init(body: [UInt8]) throws(AppStorePayloadError) {
        let json = try AppStoreJSON(body)
        guard let jws = json.string("signed_transaction") else {
            throw AppStorePayloadError("the stored server snapshot lacks signed_transaction")
        }
        let renewalJWS = json.string("signed_renewal_info")
        do {
            let transaction = try AppStoreTransaction(json: try AppStoreJWS.payload(of: jws))
            let renewal = try renewalJWS.map { text throws(AppStoreVerificationError) in try AppStoreJWS.payload(of: text) }
            self.init(
                signedTransaction: jws, transaction: transaction, signedRenewalInfo: renewalJWS,
                renewalInfo: try renewal.map { bytes throws(AppStorePayloadError) in try AppStoreRenewalInfo(json: bytes) })
        } catch let error as AppStorePayloadError {
            throw error
        } catch {
            throw AppStorePayloadError("the stored server snapshot holds a JWS that does not decode: \(error)")
        }
    }
}

/// Who owns a purchase that a second app user reports (`APPSTORE_OWNERSHIP`).
public enum AppStoreOwnershipRule: String, Sendable, Equatable, CaseIterable {
    /// The first user keeps it; the second is refused (409 `transaction_owned_by_other_user`).
    case keep
    /// A restore moves it to the user who restored it (RevenueCat's default).
    case transfer
}

extension AppStoreNotification {
    /// Reads a stored `{"signedPayload": …}` body back, decoding the JWS without verifying them
    /// again (they were verified before the body was stored): the applier's path for rows it
    /// reads from the inbox (retries, replay). The webhook carries its verified notification
    /// instead (`InboxDelivery.verifiedAppStore`).
    public init(storedBody body: [UInt8]) throws(AppStorePayloadError) {
        let signedPayload = try Self.signedPayload(in: body)
        do {
            let payload = try AppStoreJWS.payload(of: signedPayload)
            let data = try AppStoreJSON(payload).nested("data")
            let transaction = try data?.string("signedTransactionInfo").map { jws throws(AppStoreVerificationError) in try AppStoreJWS.payload(of: jws) }
            let renewal = try data?.string("signedRenewalInfo").map { jws throws(AppStoreVerificationError) in try AppStoreJWS.payload(of: jws) }
            try self.init(json: payload, transaction: transaction, renewalInfo: renewal)
        } catch let error as AppStoreVerificationError {
            throw AppStorePayloadError("the stored notification is not a JWS: \(error.message)")
        } catch let error as AppStorePayloadError {
            throw error
        } catch {
            throw AppStorePayloadError("\(error)")
        }
    }

    /// The `signedPayload` member of a notification body.
    public static func signedPayload(in body: [UInt8]) throws(AppStorePayloadError) -> String {
        let json: AppStoreJSON
        do {
            json = try AppStoreJSON(body)
        } catch {
            throw AppStorePayloadError("the body is not a JSON object; App Store Server Notifications V2 send {\"signedPayload\": \"…\"}")
        }
        guard let signedPayload = json.string("signedPayload") else {
            throw AppStorePayloadError("the body has no signedPayload; App Store Server Notifications V2 send {\"signedPayload\": \"…\"} (is the endpoint set to Version 2 in App Store Connect?)")
        }
        return signedPayload
    }
}
