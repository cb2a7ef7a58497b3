import Crypto
import Foundation

/// Makes the ES256 JSON Web Tokens the App Store Server API wants (header `alg`, `kid`, `typ`;
/// claims `iss`, `iat`, `exp`, `aud: appstoreconnect-v1`, `bid`) and reuses one until shortly
/// before it expires, so a reconcile of thousands of calls signs a handful of tokens.
actor AppStoreTokenIssuer {
    /// A token is replaced this long before its `exp`, so none expires in flight.
    static let renewalMargin: Int64 = 60

    private let issuerID: String
    private let keyID: String
    private let bundleID: String
    private let privateKey: P256.Signing.PrivateKey
    private let lifetime: Int64
    private let now: @Sendable () -> Int64
    private var current: (token: String, expiresAt: Int64)?

    init(configuration: AppStoreClientConfiguration, now: @escaping @Sendable () -> Int64) {
        issuerID = configuration.issuerID
        keyID = configuration.keyID
        bundleID = configuration.bundleID
        privateKey = configuration.privateKey
        lifetime = configuration.tokenLifetime.components.seconds
        self.now = now
    }

    /// A valid token, new or reused.
    func token() throws -> String {
        let issuedAt = now()
        if let current, current.expiresAt - Self.renewalMargin > issuedAt { return current.token }
        let token = try Self.sign(
            issuerID: issuerID, keyID: keyID, bundleID: bundleID, issuedAt: issuedAt, expiresAt: issuedAt + lifetime, key: privateKey)
        current = (token, issuedAt + lifetime)
        return token
    }

    /// Forgets the cached token (after Apple refused it, e.g. because the clocks disagree).
    func discard() { current = nil }

    private struct Header: Encodable {
        let alg = "ES256"
        let kid: String
        let typ = "JWT"
    }

    private struct Claims: Encodable {
        let iss: String
        let iat: Int64
        let exp: Int64
        let aud = "appstoreconnect-v1"
        let bid: String
    }

    /// One compact JWS: base64url(header).base64url(claims).base64url(r‖s).
    static func sign(
        issuerID: String, keyID: String, bundleID: String, issuedAt: Int64, expiresAt: Int64, key: P256.Signing.PrivateKey
    ) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try encoder.encode(Header(kid: keyID))
        let claims = try encoder.encode(Claims(iss: issuerID, iat: issuedAt, exp: expiresAt, bid: bundleID))
        let input = base64URL(header) + "." + base64URL(claims)
        let signature = try key.signature(for: Data(input.utf8))
        return input + "." + base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        var text = data.base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}
