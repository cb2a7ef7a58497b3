import BillingCore
import Crypto
import Foundation
import Testing

/// An independent reading of a compact JWS: Foundation's base64 and JSONSerialization, and
/// swift-crypto's P-256 verification of the raw r‖s signature over `header.claims`.
struct DecodedOfferJWS {
    let header: [String: Any]
    let claims: [String: Any]
    let claimsText: String
    let verifies: Bool

    init(_ jws: String, publicKey: P256.Signing.PublicKey) throws {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        func bytes(_ segment: String) throws -> Data {
            var text = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while text.count % 4 != 0 { text += "=" }
            return try #require(Data(base64Encoded: text))
        }
        header = try #require(try JSONSerialization.jsonObject(with: bytes(parts[0])) as? [String: Any])
        claims = try #require(try JSONSerialization.jsonObject(with: bytes(parts[1])) as? [String: Any])
        claimsText = String(decoding: try bytes(parts[1]), as: UTF8.self)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: bytes(parts[2]))
        verifies = publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
    }
}

@Suite("App Store offer signatures")
struct AppStoreOfferSignerTests {
    static let key = P256.Signing.PrivateKey()
    static let instant = Date(timeIntervalSince1970: 1_770_000_000.75)

    func signer(issuer: String? = "57246542-96fe-1a63-e053-0824d011072a", nonce: @escaping @Sendable () -> UUID = UUID.init) -> AppStoreOfferSigner {
        AppStoreOfferSigner(
            keyID: "2X9R4HXF34", issuerID: issuer, bundleID: "com.example.app", key: Self.key, now: { Self.instant }, nonce: nonce)
    }

    @Test("A promotional offer's JWS has Apple's header and exactly the claims PromotionalOfferV2SignatureCreator makes, and verifies")
    func promotionalJWS() throws {
        let jws = try signer().promotionalOffer(productID: "com.example.pro.monthly", offerID: "winback_50", transactionID: "2000000123")
        let decoded = try DecodedOfferJWS(jws, publicKey: Self.key.publicKey)
        #expect(decoded.verifies)
        #expect(decoded.header.count == 3)
        #expect(decoded.header["alg"] as? String == "ES256")
        #expect(decoded.header["kid"] as? String == "2X9R4HXF34")
        #expect(decoded.header["typ"] as? String == "JWT")
        #expect(Set(decoded.claims.keys) == ["iss", "bid", "aud", "iat", "nonce", "productId", "offerIdentifier", "transactionId"])
        #expect(decoded.claims["iss"] as? String == "57246542-96fe-1a63-e053-0824d011072a")
        #expect(decoded.claims["bid"] as? String == "com.example.app")
        #expect(decoded.claims["aud"] as? String == "promotional-offer")
        #expect((decoded.claims["iat"] as? NSNumber)?.int64Value == 1_770_000_000, "iat in whole seconds")
        #expect(decoded.claims["productId"] as? String == "com.example.pro.monthly")
        #expect(decoded.claims["offerIdentifier"] as? String == "winback_50")
        #expect(decoded.claims["transactionId"] as? String == "2000000123")
        let nonce = try #require(decoded.claims["nonce"] as? String)
        #expect(nonce == nonce.lowercased() && UUID(uuidString: nonce) != nil, "a lower-case UUID")
    }

    @Test("Without a transaction id the claim is left out, as Apple's creator does")
    func promotionalWithoutTransaction() throws {
        let jws = try signer().promotionalOffer(productID: "com.example.pro.monthly", offerID: "winback_50", transactionID: nil)
        let decoded = try DecodedOfferJWS(jws, publicKey: Self.key.publicKey)
        #expect(decoded.verifies)
        #expect(decoded.claims["transactionId"] == nil)
        #expect(Set(decoded.claims.keys) == ["iss", "bid", "aud", "iat", "nonce", "productId", "offerIdentifier"])
    }

    @Test("An introductory-offer eligibility JWS carries productId, allowIntroductoryOffer (a JSON boolean) and transactionId", arguments: [true, false])
    func introductoryJWS(_ allow: Bool) throws {
        let jws = try signer().introductoryOfferEligibility(productID: "com.example.pro.monthly", allowIntroductoryOffer: allow, transactionID: "2000000123")
        let decoded = try DecodedOfferJWS(jws, publicKey: Self.key.publicKey)
        #expect(decoded.verifies)
        #expect(Set(decoded.claims.keys) == ["iss", "bid", "aud", "iat", "nonce", "productId", "allowIntroductoryOffer", "transactionId"])
        #expect(decoded.claims["aud"] as? String == "introductory-offer-eligibility")
        #expect(decoded.claimsText.contains("\"allowIntroductoryOffer\":\(allow)"), "a JSON boolean, not a number: \(decoded.claimsText)")
        #expect(decoded.claims["transactionId"] as? String == "2000000123")
    }

    @Test("A signature by another key does not verify")
    func otherKey() throws {
        let jws = try signer().promotionalOffer(productID: "com.example.pro.monthly", offerID: "winback_50", transactionID: nil)
        #expect(try DecodedOfferJWS(jws, publicKey: P256.Signing.PrivateKey().publicKey).verifies == false)
    }

    @Test("The original form signs the exact U+2063-joined payload, lower-cased token and nonce, as standard base64 of a DER signature")
    func legacy() throws {
        let fixed = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        let signature = try signer(nonce: { fixed }).legacyPromotionalOffer(
            productID: "com.example.pro.monthly", offerID: "winback_50", appAccountToken: "0B5E1D6A-0C2E-5F4E-8C9B-3A1F2E4D5C6B")
        #expect(signature.keyID == "2X9R4HXF34")
        #expect(signature.nonce == "e621e1f8-c36c-495a-93fc-0c247a3e6e5f")
        #expect(signature.timestamp == 1_770_000_000_750, "milliseconds")
        let expected = "com.example.app\u{2063}2X9R4HXF34\u{2063}com.example.pro.monthly\u{2063}winback_50\u{2063}0b5e1d6a-0c2e-5f4e-8c9b-3a1f2e4d5c6b\u{2063}e621e1f8-c36c-495a-93fc-0c247a3e6e5f\u{2063}1770000000750"
        #expect(signature.payload == expected)
        #expect(!signature.signature.contains("-") && !signature.signature.contains("_"), "standard base64, not base64url")
        let der = try #require(Data(base64Encoded: signature.signature), "Data(base64Encoded:) reads it, as the app does")
        let ecdsa = try P256.Signing.ECDSASignature(derRepresentation: der)
        #expect(Self.key.publicKey.isValidSignature(ecdsa, for: Data(expected.utf8)))
        #expect(!Self.key.publicKey.isValidSignature(ecdsa, for: Data(expected.replacingOccurrences(of: "winback_50", with: "winback_60").utf8)))
    }

    @Test("Every signature has a fresh nonce")
    func freshNonce() throws {
        let signer = signer()
        let legacy = try (0..<20).map { _ in try signer.legacyPromotionalOffer(productID: "p", offerID: "o", appAccountToken: "t").nonce }
        #expect(Set(legacy).count == 20)
        let jws = try (0..<20).map { _ in
            try DecodedOfferJWS(signer.promotionalOffer(productID: "p", offerID: "o", transactionID: nil), publicKey: Self.key.publicKey).claims["nonce"] as? String
        }
        #expect(Set(jws.compactMap { $0 }).count == 20)
    }

    @Test("The JWS forms need the key's issuer; the original form does not")
    func missingIssuer() throws {
        let signer = signer(issuer: nil)
        #expect(throws: AppStoreOfferSigner.SigningError.missingIssuer) {
            try signer.promotionalOffer(productID: "p", offerID: "o", transactionID: nil)
        }
        #expect(throws: AppStoreOfferSigner.SigningError.missingIssuer) {
            try signer.introductoryOfferEligibility(productID: "p", allowIntroductoryOffer: true, transactionID: "1")
        }
        _ = try signer.legacyPromotionalOffer(productID: "p", offerID: "o", appAccountToken: "t")
    }
}

@Suite("App Store offer eligibility rules")
struct AppStoreOfferGroupTests {
    static let catalog: PlanCatalog = {
        let json = """
            {"tiers": [
              {"id": "free", "name": "Free", "rank": 0},
              {"id": "pro", "name": "Pro", "rank": 1,
               "stripe": {"prices": [{"lookup_key": "pro_monthly", "interval": "month"}]},
               "app_store": {"subscription_group": "21000000", "products": [
                 {"id": "com.example.pro.monthly", "promotional_offers": ["retain_20"], "eligibility": "existing"},
                 {"id": "com.example.pro.yearly", "promotional_offers": ["winback_50"], "eligibility": "lapsed"}]}},
              {"id": "max", "name": "Max", "rank": 2,
               "app_store": {"subscription_group": "21000000", "products": ["com.example.max.monthly"]}},
              {"id": "tips", "name": "Tips", "rank": 3, "app_store": {"products": ["com.example.tips"]}}
            ]}
            """
        return try! PlanCatalog(document: JSONDecoder().decode(PlanCatalogDocument.self, from: Data(json.utf8)))
    }()
    static let now: Int64 = 1_770_000_000

    func record(_ product: String, expires: Int64, group: String? = nil) -> AppStoreSubscriptionRecord {
        AppStoreSubscriptionRecord(
            originalTransactionID: "1", environment: "Sandbox", transactionID: "1", productID: product, type: AppStoreTransaction.autoRenewable,
            subscriptionGroupIdentifier: group, purchaseDate: (Self.now - 100) * 1000, expiresDate: expires * 1000)
    }

    func stripe(_ status: SubscriptionStatus, trial: Bool = false) -> LedgerSubscription {
        LedgerSubscription(
            id: "sub_1", customer: "cus_1", status: status, trialStart: trial ? Self.now - 1000 : nil,
            items: [.init(id: "si_1", lookupKey: "pro_monthly")])
    }

    @Test("The catalog's offers, eligibility and group are read; tiers naming one group share it")
    func catalogRead() throws {
        let group = try #require(AppStoreOfferGroup(catalog: Self.catalog, productID: "com.example.pro.yearly"))
        #expect(group.offers == AppStoreProductOffers(promotionalOffers: ["winback_50"], eligibility: .lapsed))
        #expect(group.tierIDs == ["pro", "max"])
        #expect(group.products == ["com.example.pro.monthly", "com.example.pro.yearly", "com.example.max.monthly"])
        let tips = try #require(AppStoreOfferGroup(catalog: Self.catalog, productID: "com.example.tips"))
        #expect(tips.offers == AppStoreProductOffers(), "no offers listed, eligibility any")
        #expect(tips.tierIDs == ["tips"])
        #expect(AppStoreOfferGroup(catalog: Self.catalog, productID: "com.example.unknown") == nil)
    }

    @Test("Standing: subscribed now, lapsed, never — on either store")
    func standing() throws {
        let group = try #require(AppStoreOfferGroup(catalog: Self.catalog, productID: "com.example.pro.monthly"))
        func standing(_ stripe: [LedgerSubscription] = [], _ appStore: [AppStoreSubscriptionRecord] = []) -> SubscriberStanding {
            group.standing(subscriptions: stripe, appStore: appStore, catalog: Self.catalog, now: Self.now)
        }
        #expect(standing() == .never)
        #expect(standing([], [record("com.example.max.monthly", expires: Self.now + 10)]) == .subscribed, "another tier of the group")
        #expect(standing([], [record("com.example.pro.monthly", expires: Self.now - 10)]) == .lapsed)
        #expect(standing([], [record("com.example.tips", expires: Self.now + 10)]) == .never, "another group")
        #expect(standing([], [record("com.example.other", expires: Self.now - 10, group: "21000000")]) == .lapsed, "Apple's group id")
        #expect(standing([stripe(.active)]) == .subscribed)
        #expect(standing([stripe(.canceled)]) == .lapsed)
        #expect(standing([stripe(.incompleteExpired)]) == .never, "never paid")
        #expect(standing([stripe(.canceled)], [record("com.example.pro.monthly", expires: Self.now + 10)]) == .subscribed)
        #expect(PromotionalOfferEligibility.existing.allows(.subscribed))
        #expect(!PromotionalOfferEligibility.existing.allows(.lapsed))
        #expect(PromotionalOfferEligibility.lapsed.allows(.lapsed))
        #expect(!PromotionalOfferEligibility.lapsed.allows(.never))
        #expect(!PromotionalOfferEligibility.lapsed.allows(.subscribed))
        #expect(PromotionalOfferEligibility.any.allows(.never))
    }

    @Test("An earlier introductory offer in the group, on either store, ends eligibility")
    func introductory() throws {
        let group = try #require(AppStoreOfferGroup(catalog: Self.catalog, productID: "com.example.pro.monthly"))
        func offer(_ product: String, group: String? = nil) -> AppStoreIntroductoryOffer {
            AppStoreIntroductoryOffer(
                environment: "Sandbox", originalTransactionID: "9", transactionID: "9", productID: product, subscriptionGroupIdentifier: group,
                purchaseDate: nil)
        }
        #expect(group.earlierIntroductoryOffer(appStore: [], subscriptions: [], catalog: Self.catalog) == nil)
        #expect(group.earlierIntroductoryOffer(appStore: [offer("com.example.max.monthly")], subscriptions: [], catalog: Self.catalog) == "9")
        #expect(group.earlierIntroductoryOffer(appStore: [offer("com.example.tips")], subscriptions: [], catalog: Self.catalog) == nil)
        #expect(group.earlierIntroductoryOffer(appStore: [offer("com.example.gone", group: "21000000")], subscriptions: [], catalog: Self.catalog) == "9")
        #expect(group.earlierIntroductoryOffer(appStore: [], subscriptions: [stripe(.canceled, trial: true)], catalog: Self.catalog) == "sub_1")
        #expect(group.earlierIntroductoryOffer(appStore: [], subscriptions: [stripe(.active)], catalog: Self.catalog) == nil, "paid without a trial")
    }

    @Test("A catalog refuses an eligibility it does not know and an offer id of the wrong shape")
    func refusals() {
        for product in [#"{"id": "com.example.pro.monthly", "eligibility": "new"}"#, #"{"id": "com.example.pro.monthly", "promotional_offers": ["a b"]}"#] {
            let json = #"{"tiers": [{"id": "free", "name": "Free", "rank": 0, "app_store": {"products": ["# + product + "]}}]}"
            #expect(throws: (any Error).self) { try JSONDecoder().decode(PlanCatalogDocument.self, from: Data(json.utf8)) }
        }
    }
}
