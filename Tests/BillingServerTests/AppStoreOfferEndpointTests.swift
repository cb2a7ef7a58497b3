import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// The offer endpoints over a ledger with App Store purchases delivered as Apple would, signed by
/// a key whose public half the tests verify with.
struct OfferTestbed {
    static let issuer = "57246542-96fe-1a63-e053-0824d011072a"
    let bed: AppStoreTestbed
    let key = P256.Signing.PrivateKey()
    let ledger: TemporaryLedger
    let catalog: PlanCatalog

    init() throws {
        bed = try AppStoreTestbed()
        ledger = try TemporaryLedger()
        catalog = try fixtureCatalog("appstore-offers")
    }

    func application(signer: Bool = true, issuer: String? = Self.issuer) -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [userAPIToken]
        dependencies.plans = catalog
        dependencies.appStoreVerifier = bed.verifier
        if signer {
            dependencies.appStoreOfferSigner = AppStoreOfferSigner(keyID: "2X9R4HXF34", issuerID: issuer, bundleID: AppStoreTestbed.bundleID, key: key)
        }
        return makeApplication(dependencies)
    }

    /// Delivers one notification for `user` and applies it.
    func deliver(
        _ client: some TestClientProtocol, user: String, _ type: String, _ subtype: String? = nil, original: String,
        product: String = "com.example.pro.monthly", introductory: Bool = false
    ) async throws {
        let token = try await SQLiteAppStore(database: ledger.database).accountToken(for: user)
        var sample = bed.sample(type, subtype, original: original, product: product, token: token)
        if introductory { sample.transaction["offerType"] = 1 }
        let answer = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: bed.body(sample)))
        #expect(answer.status == .ok, "\(answer.text)")
        _ = try await SQLiteApplier(database: ledger.database).drain()
    }

    /// The header and claims of a compact JWS, after checking its ES256 signature with the public key.
    func verified(_ jws: String) throws -> (header: [String: Any], claims: [String: Any]) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        func bytes(_ segment: String) throws -> Data {
            var text = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while text.count % 4 != 0 { text += "=" }
            return try #require(Data(base64Encoded: text))
        }
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: bytes(parts[2]))
        #expect(key.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)), "the JWS verifies with the public key")
        let header = try #require(try JSONSerialization.jsonObject(with: bytes(parts[0])) as? [String: Any])
        let claims = try #require(try JSONSerialization.jsonObject(with: bytes(parts[1])) as? [String: Any])
        return (header, claims)
    }
}

@Suite("POST /v1/users/{user}/appstore/offers/…")
struct AppStoreOfferEndpointTests {
    static let promotional = "/v1/users/user_42/appstore/offers/promotional"
    static let eligibility = "/v1/users/user_42/appstore/offers/introductory-eligibility"

    @Test("Without a signing key both endpoints answer 503 offer_signing_not_configured; JWS without an issuer too")
    func notConfigured() async throws {
        let testbed = try OfferTestbed()
        defer { testbed.ledger.remove() }
        try await testbed.application(signer: false).test(.router) { client in
            let offer = try await postJSON(client, Self.promotional, ["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "jws"])
            #expect(offer.status == .serviceUnavailable)
            #expect(offer.errorCode == "offer_signing_not_configured")
            let intro = try await postJSON(client, Self.eligibility, ["product_id": "com.example.pro.weekly", "app_transaction_id": "1"])
            #expect(intro.status == .serviceUnavailable)
            #expect(intro.errorCode == "offer_signing_not_configured")
        }
        try await testbed.application(issuer: nil).test(.router) { client in
            let jws = try await postJSON(client, Self.promotional, ["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "jws"])
            #expect(jws.errorCode == "offer_signing_not_configured")
            #expect(jws.errorMessage?.contains("APPSTORE_ISSUER_ID") == true)
            let legacy = try await postJSON(client, Self.promotional, ["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "legacy"])
            #expect(legacy.status == .ok, "the original form needs no issuer: \(legacy.text)")
        }
    }

    @Test("Bad requests are JSON 4xx that say why", arguments: [
        (["product_id": "com.example.nope", "offer_id": "hello_1", "format": "jws"], "unknown_product"),
        (["product_id": "com.example.pro.weekly", "offer_id": "winback_50", "format": "jws"], "unknown_offer"),
        (["product_id": "com.example.max.monthly", "offer_id": "hello_1", "format": "jws"], "unknown_offer"),
        (["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "jwt"], "invalid_field"),
        (["product_id": "com.example.pro.weekly", "offer_id": "hello_1"], "missing_field"),
        (["offer_id": "hello_1", "format": "jws"], "missing_field"),
        (["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "jws", "transaction_id": "12a"], "invalid_field"),
        (["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "jws", "environment": "Xcode"], "invalid_field"),
        (["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "jws", "discount": "1"], "unknown_field"),
    ])
    func refused(_ body: [String: String], _ code: String) async throws {
        let testbed = try OfferTestbed()
        defer { testbed.ledger.remove() }
        try await testbed.application().test(.router) { client in
            let answer = try await postJSON(client, Self.promotional, body)
            #expect(answer.status == .badRequest, "\(answer.text)")
            #expect(answer.errorCode == code, "\(answer.text)")
            #expect(answer.errorMessage?.isEmpty == false)
        }
    }

    @Test("An existing subscriber gets the retention offer, signed as JWS with Apple's claims, and is refused the win-back offer")
    func existing() async throws {
        let testbed = try OfferTestbed()
        defer { testbed.ledger.remove() }
        try await testbed.application().test(.router) { client in
            try await testbed.deliver(client, user: "user_42", "SUBSCRIBED", "INITIAL_BUY", original: "2000000042")
            let answer = try await postJSON(
                client, Self.promotional, ["product_id": "com.example.pro.monthly", "offer_id": "retain_20", "format": "jws", "environment": "Sandbox"])
            #expect(answer.status == .ok, "\(answer.text)")
            #expect(Set(answer.json.keys) == ["signature"])
            let (header, claims) = try testbed.verified(try #require(answer.json["signature"] as? String))
            #expect(header["alg"] as? String == "ES256")
            #expect(header["kid"] as? String == "2X9R4HXF34")
            #expect(claims["aud"] as? String == "promotional-offer")
            #expect(claims["iss"] as? String == OfferTestbed.issuer)
            #expect(claims["bid"] as? String == AppStoreTestbed.bundleID)
            #expect(claims["productId"] as? String == "com.example.pro.monthly")
            #expect(claims["offerIdentifier"] as? String == "retain_20")
            #expect(claims["transactionId"] as? String == "2000000042", "the user's latest original transaction")
            let winback = try await postJSON(
                client, Self.promotional, ["product_id": "com.example.pro.yearly", "offer_id": "winback_50", "format": "jws", "environment": "Sandbox"])
            #expect(winback.status == .forbidden)
            #expect(winback.errorCode == "offer_not_eligible")
            #expect((winback.json["error"] as? [String: Any])?["standing"] as? String == "subscribed")
            // The same user in Production has never subscribed: judged per environment.
            let production = try await postJSON(
                client, Self.promotional, ["product_id": "com.example.pro.monthly", "offer_id": "retain_20", "format": "jws", "environment": "Production"])
            #expect(production.errorCode == "offer_not_eligible")
        }
    }

    @Test("A lapsed subscriber gets the win-back offer in the original form, which verifies over the exact payload with their appAccountToken")
    func lapsed() async throws {
        let testbed = try OfferTestbed()
        defer { testbed.ledger.remove() }
        try await testbed.application().test(.router) { client in
            try await testbed.deliver(client, user: "user_42", "EXPIRED", "VOLUNTARY", original: "2000000043", product: "com.example.max.monthly")
            let answer = try await postJSON(
                client, Self.promotional, ["product_id": "com.example.pro.yearly", "offer_id": "winback_50", "format": "legacy", "environment": "Sandbox"])
            #expect(answer.status == .ok, "\(answer.text)")
            let token = try await SQLiteAppStore(database: testbed.ledger.database).accountToken(for: "user_42")
            #expect(answer.json["key_id"] as? String == "2X9R4HXF34")
            #expect(answer.json["app_account_token"] as? String == token)
            let nonce = try #require(answer.json["nonce"] as? String)
            #expect(nonce == nonce.lowercased() && UUID(uuidString: nonce) != nil)
            let timestamp = try #require(answer.json["timestamp"] as? Int)
            let payload = [AppStoreTestbed.bundleID, "2X9R4HXF34", "com.example.pro.yearly", "winback_50", token.lowercased(), nonce, String(timestamp)]
                .joined(separator: "\u{2063}")
            let base64 = try #require(answer.json["signature"] as? String)
            let der = try #require(Data(base64Encoded: base64))
            #expect(testbed.key.publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: Data(payload.utf8)))
            let again = try await postJSON(
                client, Self.promotional, ["product_id": "com.example.pro.yearly", "offer_id": "winback_50", "format": "legacy", "environment": "Sandbox"])
            #expect(again.json["nonce"] as? String != nonce, "a fresh nonce each time")
            let retain = try await postJSON(
                client, Self.promotional, ["product_id": "com.example.pro.monthly", "offer_id": "retain_20", "format": "legacy", "environment": "Sandbox"])
            #expect(retain.errorCode == "offer_not_eligible")
            #expect((retain.json["error"] as? [String: Any])?["standing"] as? String == "lapsed")
        }
    }

    @Test("A user who never subscribed gets only offers open to anyone")
    func never() async throws {
        let testbed = try OfferTestbed()
        defer { testbed.ledger.remove() }
        try await testbed.application().test(.router) { client in
            for (product, offer) in [("com.example.pro.monthly", "retain_20"), ("com.example.pro.yearly", "winback_50")] {
                let refused = try await postJSON(client, Self.promotional, ["product_id": product, "offer_id": offer, "format": "jws"])
                #expect(refused.status == .forbidden)
                #expect((refused.json["error"] as? [String: Any])?["standing"] as? String == "never")
            }
            let open = try await postJSON(
                client, Self.promotional, ["product_id": "com.example.pro.weekly", "offer_id": "hello_1", "format": "jws", "transaction_id": "77"])
            #expect(open.status == .ok, "\(open.text)")
            #expect(try testbed.verified(try #require(open.json["signature"] as? String)).claims["transactionId"] as? String == "77")
        }
    }

    @Test("Introductory-offer eligibility: eligible until the group's introductory offer was used, signed either way")
    func introductory() async throws {
        let testbed = try OfferTestbed()
        defer { testbed.ledger.remove() }
        try await testbed.application().test(.router) { client in
            let unknown = try await postJSON(client, Self.eligibility, ["product_id": "com.example.pro.monthly", "environment": "Sandbox"])
            #expect(unknown.status == .badRequest)
            #expect(unknown.errorCode == "missing_field", "no purchase to name: the app passes its appTransactionID")
            let fresh = try await postJSON(
                client, Self.eligibility, ["product_id": "com.example.pro.monthly", "app_transaction_id": "704000000000001", "environment": "Sandbox"])
            #expect(fresh.status == .ok, "\(fresh.text)")
            #expect(fresh.json["eligible"] as? Bool == true)
            let claims = try testbed.verified(try #require(fresh.json["signature"] as? String)).claims
            #expect(claims["aud"] as? String == "introductory-offer-eligibility")
            #expect(claims["productId"] as? String == "com.example.pro.monthly")
            #expect(claims["allowIntroductoryOffer"] as? Bool == true)
            #expect(claims["transactionId"] as? String == "704000000000001")

            // A trial of Max, in the same group, used the group's introductory offer.
            try await testbed.deliver(client, user: "user_42", "SUBSCRIBED", "INITIAL_BUY", original: "2000000044", product: "com.example.max.monthly",
                introductory: true)
            let used = try await postJSON(client, Self.eligibility, ["product_id": "com.example.pro.yearly", "environment": "Sandbox"])
            #expect(used.json["eligible"] as? Bool == false, "\(used.text)")
            let usedClaims = try testbed.verified(try #require(used.json["signature"] as? String)).claims
            #expect(usedClaims["allowIntroductoryOffer"] as? Bool == false)
            #expect(usedClaims["transactionId"] as? String == "2000000044")
            let other = try await postJSON(client, "/v1/users/user_43/appstore/offers/introductory-eligibility",
                ["product_id": "com.example.pro.yearly", "app_transaction_id": "1", "environment": "Sandbox"])
            #expect(other.json["eligible"] as? Bool == true, "another user's trial is not theirs")
            let unknownProduct = try await postJSON(client, Self.eligibility, ["product_id": "com.example.gone", "app_transaction_id": "1"])
            #expect(unknownProduct.errorCode == "unknown_product")
        }
    }
}
