import Crypto
import Foundation

extension AppStoreFake {
    /// Why the fake refused an API request's `Authorization` header; Apple answers every one of
    /// these with 401 and an empty body, so the fake keeps the reason for tests to assert.
    public enum TokenRefusal: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// No `Authorization: Bearer …` header.
        case missing
        /// Not three base64url segments, or a header or claims that are not JSON objects.
        case malformed
        /// The header's `alg` is not `ES256`.
        case alg
        /// The header's `kid` is not the configured key id.
        case kid
        /// The header's `typ` is not `JWT`.
        case typ
        /// Not a 64-byte raw r‖s ES256 signature over `header.payload` by the configured key
        /// (a DER-encoded ECDSA signature lands here too).
        case signature
        /// `iss` is not the configured issuer id.
        case iss
        /// `aud` is not `appstoreconnect-v1`.
        case aud
        /// `bid` is not the configured bundle id.
        case bid
        /// `iat` is missing, not whole seconds, or more than the allowed skew in the future.
        case iat
        /// `exp` is missing, not whole seconds, or not in the future.
        case exp
        /// `exp - iat` is more than an hour, the longest Apple accepts.
        case lifetime

        public var description: String { rawValue }
    }
}

/// Checks the JWT billingd signs with its `.p8` key the way Apple's API gateway does: ES256
/// compact JWS with `kid` and `typ`, signed by the configured public key, claims `iss`, `aud`,
/// `bid`, `iat`, `exp` for this app, at most an hour long.
struct BearerTokenVerifier: Sendable {
    let issuerID: String
    let keyID: String
    let bundleID: String
    let publicKey: P256.Signing.PublicKey
    /// How far in the future `iat` may be, in seconds, for clocks that disagree a little.
    var allowedSkew: Int64 = 60
    /// The longest `exp - iat` accepted, in seconds.
    var maximumLifetime: Int64 = 3600

    static let audience = "appstoreconnect-v1"

    private struct Header: Decodable {
        let alg: String?
        let kid: String?
        let typ: String?
    }

    private struct Claims: Decodable {
        let iss: String?
        let aud: String?
        let bid: String?
        let iat: Int64?
        let exp: Int64?

        /// Reads every claim alone, so that one of the wrong type is only that claim missing.
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            iss = try? container.decode(String.self, forKey: .iss)
            aud = try? container.decode(String.self, forKey: .aud)
            bid = try? container.decode(String.self, forKey: .bid)
            iat = try? container.decode(Int64.self, forKey: .iat)
            exp = try? container.decode(Int64.self, forKey: .exp)
        }

        private enum CodingKeys: String, CodingKey { case iss, aud, bid, iat, exp }
    }

    /// Why `authorization` is refused at `now` (Unix seconds), or nil when it is good.
    func refusal(of authorization: String?, now: Int64) -> AppStoreFake.TokenRefusal? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return .missing }
        let token = authorization.dropFirst("Bearer ".count)
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3,
            let headerBytes = Base64URL.decode(segments[0]),
            let claimsBytes = Base64URL.decode(segments[1]),
            let signatureBytes = Base64URL.decode(segments[2]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimsBytes))
        else { return .malformed }

        guard header.alg == "ES256" else { return .alg }
        guard header.kid == keyID else { return .kid }
        guard header.typ == "JWT" else { return .typ }
        let signingInput = Array(token.utf8.prefix(segments[0].utf8.count + 1 + segments[1].utf8.count))
        guard signatureBytes.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            publicKey.isValidSignature(signature, for: signingInput)
        else { return .signature }

        guard claims.iss == issuerID else { return .iss }
        guard claims.aud == Self.audience else { return .aud }
        guard claims.bid == bundleID else { return .bid }
        guard let issuedAt = claims.iat, issuedAt <= now + allowedSkew else { return .iat }
        guard let expiresAt = claims.exp, expiresAt > now else { return .exp }
        guard expiresAt - issuedAt <= maximumLifetime else { return .lifetime }
        return nil
    }
}
