import Crypto
import Foundation

/// Signs what StoreKit needs from the app's server to apply an offer, with the In-App Purchase
/// key from App Store Connect, in the two forms Apple defines:
///
/// - the JWS form (ES256, header `alg`, `kid`, `typ: JWT`; claims `iss`, `bid`, `iat`, `nonce`,
///   `aud` and the offer's own claims), as Apple's app-store-server-library's
///   `PromotionalOfferV2SignatureCreator` and `IntroductoryOfferEligibilitySignatureCreator` make it;
/// - the original promotional-offer signature (`SKPaymentDiscount`, StoreKit 2's
///   `.promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`): ECDSA P-256 with SHA-256 over
///   `bundleId⁣keyId⁣productId⁣offerId⁣appAccountToken⁣nonce⁣timestamp` joined by U+2063, DER, base64.
///
/// Pure apart from its nonce and clock, which are injected; the key never leaves it.
public struct AppStoreOfferSigner: Sendable {
    /// The audience of a promotional offer's JWS.
    public static let promotionalOfferAudience = "promotional-offer"
    /// The audience of an introductory-offer eligibility JWS.
    public static let introductoryOfferAudience = "introductory-offer-eligibility"
    /// U+2063 INVISIBLE SEPARATOR, which joins the fields of the original signature's payload.
    public static let separator = "\u{2063}"

    /// The key id App Store Connect shows beside the key (the `kid`, and the legacy `keyID`).
    public let keyID: String
    /// The issuer id of the key (`iss`); the JWS forms need it, the original form does not.
    public let issuerID: String?
    /// The app's bundle id (`bid`).
    public let bundleID: String
    private let key: P256.Signing.PrivateKey
    private let clock: @Sendable () -> Date
    private let makeNonce: @Sendable () -> UUID

    public init(
        keyID: String, issuerID: String?, bundleID: String, key: P256.Signing.PrivateKey,
        now: @escaping @Sendable () -> Date = Date.init, nonce: @escaping @Sendable () -> UUID = UUID.init
    ) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
        self.key = key
        clock = now
        makeNonce = nonce
    }

    /// The public half of the key, for whoever verifies (tests, the App Store).
    public var publicKey: P256.Signing.PublicKey { key.publicKey }

    /// The original promotional-offer signature's parts, as StoreKit takes them.
    public struct LegacySignature: Sendable, Equatable {
        public let keyID: String
        /// A fresh lower-case UUID.
        public let nonce: String
        /// Unix milliseconds.
        public let timestamp: Int64
        /// Standard base64 of the DER ECDSA signature (`Data(base64Encoded:)` on the app's side).
        public let signature: String
        /// The exact string signed.
        public let payload: String
    }

    /// Why a signature could not be made.
    public enum SigningError: Error, Sendable, Equatable {
        /// The JWS forms name the key's issuer, and none is configured.
        case missingIssuer
        /// The key refused to sign (not expected of a valid P-256 key).
        case signing
    }

    /// The original promotional-offer signature for `appAccountToken` (the application username).
    public func legacyPromotionalOffer(productID: String, offerID: String, appAccountToken: String) throws(SigningError) -> LegacySignature {
        let nonce = makeNonce().uuidString.lowercased()
        let timestamp = Int64((clock().timeIntervalSince1970 * 1000).rounded(.down))
        let payload = Self.legacyPayload(
            bundleID: bundleID, keyID: keyID, productID: productID, offerID: offerID, appAccountToken: appAccountToken, nonce: nonce,
            timestamp: timestamp)
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try key.signature(for: Data(payload.utf8))
        } catch {
            throw SigningError.signing
        }
        return LegacySignature(keyID: keyID, nonce: nonce, timestamp: timestamp, signature: signature.derRepresentation.base64EncodedString(), payload: payload)
    }

    /// The string the original form signs; `appAccountToken` and `nonce` lower-cased as Apple requires.
    public static func legacyPayload(
        bundleID: String, keyID: String, productID: String, offerID: String, appAccountToken: String, nonce: String, timestamp: Int64
    ) -> String {
        [bundleID, keyID, productID, offerID, appAccountToken.lowercased(), nonce.lowercased(), String(timestamp)].joined(separator: separator)
    }

    /// A promotional offer's compact JWS (`.promotionalOffer(_:compactJWS:)`); `transactionID` is
    /// any transaction of the customer, optional but recommended by Apple.
    public func promotionalOffer(productID: String, offerID: String, transactionID: String?) throws(SigningError) -> String {
        var claims = try baseClaims(audience: Self.promotionalOfferAudience)
        claims["productId"] = .string(productID)
        claims["offerIdentifier"] = .string(offerID)
        if let transactionID { claims["transactionId"] = .string(transactionID) }
        return try sign(claims)
    }

    /// An introductory-offer eligibility compact JWS (`.introductoryOfferEligibility(compactJWS:)`).
    public func introductoryOfferEligibility(productID: String, allowIntroductoryOffer: Bool, transactionID: String) throws(SigningError) -> String {
        var claims = try baseClaims(audience: Self.introductoryOfferAudience)
        claims["productId"] = .string(productID)
        claims["allowIntroductoryOffer"] = .bool(allowIntroductoryOffer)
        claims["transactionId"] = .string(transactionID)
        return try sign(claims)
    }

    /// A claim's value: the JWS forms hold only strings, whole numbers and booleans.
    enum Claim: Encodable {
        case string(String)
        case integer(Int64)
        case bool(Bool)

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let text): try container.encode(text)
            case .integer(let number): try container.encode(number)
            case .bool(let flag): try container.encode(flag)
            }
        }
    }

    private func baseClaims(audience: String) throws(SigningError) -> [String: Claim] {
        guard let issuerID else { throw SigningError.missingIssuer }
        return [
            "iss": .string(issuerID), "bid": .string(bundleID), "aud": .string(audience),
            "iat": .integer(Int64(clock().timeIntervalSince1970.rounded(.down))), "nonce": .string(makeNonce().uuidString.lowercased()),
        ]
    }

    /// base64url(header).base64url(claims).base64url(r‖s).
    private func sign(_ claims: [String: Claim]) throws(SigningError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let header = try encoder.encode(["alg": "ES256", "kid": keyID, "typ": "JWT"])
            let body = try encoder.encode(claims)
            let input = JWSBase64.encode(header, alphabet: .url) + "." + JWSBase64.encode(body, alphabet: .url)
            let signature = try key.signature(for: Data(input.utf8))
            return input + "." + JWSBase64.encode(signature.rawRepresentation, alphabet: .url)
        } catch {
            throw SigningError.signing
        }
    }
}
