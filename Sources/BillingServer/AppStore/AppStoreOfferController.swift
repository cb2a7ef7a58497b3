import BillingCore
import BillingStore
import Foundation
import Hummingbird

/// The App Store offer endpoints of the service API, which sign with the In-App Purchase key
/// what StoreKit needs to apply an offer (see docs/app-store-offers.md):
///
/// - `POST /v1/users/{user}/appstore/offers/promotional` `{"product_id", "offer_id", "format"}`:
///   a promotional offer's signature, JWS (`.promotionalOffer(_:compactJWS:)`) or the original
///   form (`.promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`) with the user's
///   appAccountToken as the application username; only an offer the catalog lists for the
///   product, only for a user its `eligibility` allows.
/// - `POST /v1/users/{user}/appstore/offers/introductory-eligibility` `{"product_id"}`: whether
///   the user may have the product's introductory offer (no earlier one in its subscription
///   group, on either store), signed for `.introductoryOfferEligibility(compactJWS:)`.
struct AppStoreOfferController: Sendable {
    let ledger: any AppStoreLedgerStore
    let users: any UserLedgerStore
    let configuration: AppStoreController.Configuration

    init(store: any LedgerStore, configuration: AppStoreController.Configuration) {
        ledger = store.appStore
        users = store.users
        self.configuration = configuration
    }

    /// The signature formats of a promotional offer.
    enum Format: String, CaseIterable {
        case jws
        case legacy
    }

    func addRoutes<Methods: RouterMethods>(to router: Methods) {
        router.post("users/:user/appstore/offers/promotional") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            let body = try await AppStoreController.Body(
                request, members: ["product_id", "offer_id", "format", "transaction_id", "environment"])
            let productID = try body.string("product_id", hint: "the App Store product id of the subscription (Product.id)")
            let offerID = try body.string("offer_id", hint: "the promotional offer's identifier from App Store Connect (Product.SubscriptionOffer.id)")
            let format = try Self.format(body)
            let transactionID = try Self.transactionID(body, "transaction_id")
            let livemode = try livemode(body)
            let signer = try signer(needsIssuer: format == .jws)
            let group = try group(of: productID)
            guard group.offers.promotionalOffers.contains(offerID) else {
                let listed = group.offers.promotionalOffers
                throw APIError(
                    .badRequest, code: "unknown_offer",
                    message: "The catalog lists no promotional offer \(Self.quoted(offerID)) for \(productID)"
                        + (listed.isEmpty ? "; add it under promotional_offers of the product in BILLINGD_PLANS." : "; it lists \(listed.joined(separator: ", ")).")
                )
            }
            let billing = try await users.billing(of: user.user, in: ServiceScope(livemode: livemode), stripeEntitlements: false)
            let standing = group.standing(
                subscriptions: billing.subscriptions, appStore: billing.appStoreSubscriptions, catalog: configuration.users.catalog, now: now)
            guard group.offers.eligibility.allows(standing) else {
                throw APIError(
                    .forbidden, code: "offer_not_eligible",
                    message: "The offer \(offerID) of \(productID) is for \(Self.describe(group.offers.eligibility)); the user \(Self.describe(standing)).",
                    extra: ["eligibility": group.offers.eligibility.rawValue, "standing": standing.rawValue])
            }
            var json = JSONBytesWriter()
            json.beginObject()
            switch format {
            case .jws:
                let latest = transactionID ?? Self.latestOriginalTransactionID(billing.appStoreSubscriptions)
                let signature = try Self.signed { () throws(AppStoreOfferSigner.SigningError) in
                    try signer.promotionalOffer(productID: productID, offerID: offerID, transactionID: latest)
                }
                json.field("signature", signature)
            case .legacy:
                let token = try await ledger.accountToken(for: user.user)
                let signature = try Self.signed { () throws(AppStoreOfferSigner.SigningError) in
                    try signer.legacyPromotionalOffer(productID: productID, offerID: offerID, appAccountToken: token)
                }
                json.field("key_id", signature.keyID)
                json.field("nonce", signature.nonce)
                json.field("timestamp", signature.timestamp)
                json.field("signature", signature.signature)
                json.field("app_account_token", token)
            }
            json.endObject()
            return UserJSONResponse.response(json.bytes)
        }
        router.post("users/:user/appstore/offers/introductory-eligibility") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            let body = try await AppStoreController.Body(request, members: ["product_id", "app_transaction_id", "environment"])
            let productID = try body.string("product_id", hint: "the App Store product id of the subscription (Product.id)")
            let appTransactionID = try Self.transactionID(body, "app_transaction_id")
            let livemode = try livemode(body)
            let signer = try signer(needsIssuer: true)
            let group = try group(of: productID)
            let scope = ServiceScope(livemode: livemode)
            let billing = try await users.billing(of: user.user, in: scope, stripeEntitlements: false)
            guard let transactionID = appTransactionID ?? Self.latestOriginalTransactionID(billing.appStoreSubscriptions) else {
                throw APIError(
                    .badRequest, code: "missing_field",
                    message: "app_transaction_id is required: billingd knows no App Store purchase of this user to name in the signature; send AppTransaction.shared's appTransactionID.")
            }
            let offers = try await ledger.introductoryOffers(of: user.user, livemode: livemode)
            let earlier = group.earlierIntroductoryOffer(appStore: offers, subscriptions: billing.subscriptions, catalog: configuration.users.catalog)
            let eligible = earlier == nil
            let signature = try Self.signed { () throws(AppStoreOfferSigner.SigningError) in
                try signer.introductoryOfferEligibility(productID: productID, allowIntroductoryOffer: eligible, transactionID: transactionID)
            }
            var json = JSONBytesWriter()
            json.beginObject()
            json.field("eligible", eligible)
            json.field("signature", signature)
            json.endObject()
            return UserJSONResponse.response(json.bytes)
        }
    }

    var now: Int64 { Int64(configuration.users.now().timeIntervalSince1970) }

    /// The signer, or 503 `offer_signing_not_configured` saying what to set.
    func signer(needsIssuer: Bool) throws -> AppStoreOfferSigner {
        guard let signer = configuration.offerSigner else {
            throw APIError(
                .serviceUnavailable, code: "offer_signing_not_configured",
                message: "Offers are signed with an In-App Purchase key: set APPSTORE_BUNDLE_ID and APPSTORE_OFFER_KEY_ID with APPSTORE_OFFER_PRIVATE_KEY (or the App Store Server API's APPSTORE_KEY_ID and APPSTORE_PRIVATE_KEY), and restart billingd.")
        }
        if needsIssuer, signer.issuerID == nil {
            throw APIError(
                .serviceUnavailable, code: "offer_signing_not_configured",
                message: "JWS offer signatures name the key's issuer: set APPSTORE_ISSUER_ID (App Store Connect → Users and Access → Integrations → In-App Purchase) and restart billingd; the legacy format needs no issuer.")
        }
        return signer
    }

    /// The product's group in the catalog, or 400 `unknown_product`.
    func group(of productID: String) throws -> AppStoreOfferGroup {
        guard let group = AppStoreOfferGroup(catalog: configuration.users.catalog, productID: productID) else {
            throw APIError(
                .badRequest, code: "unknown_product",
                message: "\(Self.quoted(productID)) is not an App Store product of the plan catalog (app_store.products in BILLINGD_PLANS).")
        }
        return group
    }

    /// The mode judged: `environment` when given, else live when Production is accepted.
    func livemode(_ body: AppStoreController.Body) throws -> Bool {
        guard body.members["environment"] != nil else {
            return configuration.verifier?.configuration.environments.contains(.production) ?? true
        }
        let text = try body.string("environment", hint: "Production or Sandbox (Transaction.environment)")
        switch text {
        case "Production": return true
        case "Sandbox": return false
        default:
            throw APIError(.badRequest, code: "invalid_field", message: "environment is \(Self.quoted(text)); expected Production or Sandbox.")
        }
    }

    static func format(_ body: AppStoreController.Body) throws -> Format {
        let text = try body.string("format", hint: "jws (StoreKit 2's .promotionalOffer(_:compactJWS:)) or legacy (SKPaymentDiscount, .promotionalOffer(offerID:keyID:nonce:signature:timestamp:))")
        guard let format = Format(rawValue: text) else {
            throw APIError(.badRequest, code: "invalid_field", message: "format is \(quoted(text)); expected jws or legacy.")
        }
        return format
    }

    /// An optional transaction id member: decimal digits.
    static func transactionID(_ body: AppStoreController.Body, _ name: String) throws -> String? {
        guard body.members[name] != nil else { return nil }
        let text = try body.string(name, hint: "an App Store transaction id (digits)")
        guard AppStoreTransactionID.isWellFormed(text) else {
            throw APIError(.badRequest, code: "invalid_field", message: "\(name) is \(quoted(text)), which is not an App Store transaction id (digits).")
        }
        return text
    }

    /// The original transaction id of the user's latest purchase, the customer's transaction Apple's claims ask for.
    static func latestOriginalTransactionID(_ records: [AppStoreSubscriptionRecord]) -> String? {
        records.max { ($0.purchaseDate ?? 0, $0.originalTransactionID) < ($1.purchaseDate ?? 0, $1.originalTransactionID) }?.originalTransactionID
    }

    static func signed<T>(_ body: () throws(AppStoreOfferSigner.SigningError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw APIError(
                .serviceUnavailable, code: "offer_signing_not_configured",
                message: "The offer-signing key could not sign; check APPSTORE_OFFER_PRIVATE_KEY (or APPSTORE_PRIVATE_KEY).")
        }
    }

    static func quoted(_ text: String) -> String { "\"\(UserRequest.printable(text))\"" }

    static func describe(_ eligibility: PromotionalOfferEligibility) -> String {
        switch eligibility {
        case .existing: "existing subscribers of its subscription group"
        case .lapsed: "lapsed subscribers of its subscription group (subscribed before, not now)"
        case .any: "anyone"
        }
    }

    static func describe(_ standing: SubscriberStanding) -> String {
        switch standing {
        case .subscribed: "is subscribed to the group now"
        case .lapsed: "subscribed to the group before and is not subscribed now"
        case .never: "never subscribed to the group"
        }
    }
}
