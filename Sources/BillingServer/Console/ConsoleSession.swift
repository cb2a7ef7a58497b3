import Crypto
import Foundation

/// The console's signed session cookie and the CSRF tokens bound to it.
///
/// Each operator token has a signing key of its own, derived from it with HKDF-SHA256, so every
/// replica and every restart configured with the token accepts the cookies it signed, and removing
/// the token from BILLINGD_CONSOLE_TOKENS ends its sessions (and only its). The cookie names the
/// token by an identifier derived from it, never the token itself:
/// `v1.<token id>.<session id>.<expiry>.<HMAC-SHA256 of the rest>`, every comparison constant-time.
public struct ConsoleSessions: Sendable {
    /// A verified session.
    public struct Session: Sendable, Equatable {
        /// Identifies the operator token that signed in (derived from it; not the token).
        public var tokenID: String
        /// Random, per sign-in; the CSRF tokens are bound to it.
        public var id: String
        /// Unix seconds.
        public var expiresAt: Int64
        /// The token's label, for the log.
        public var label: String?
    }

    struct Signer: Sendable {
        var id: String
        var label: String?
        var token: [UInt8]
        var key: SymmetricKey
    }

    /// The cookie's name.
    public static let cookieName = "billingd_console"
    /// How long a session lasts.
    public static let lifetime: Int64 = 12 * 3600

    let signers: [Signer]

    public init(tokens: [ConsoleToken]) {
        signers = tokens.map { token in
            let material = SymmetricKey(data: Array(token.token.utf8))
            let key = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: material, salt: Array("billingd console session".utf8), info: Array("cookie v1".utf8), outputByteCount: 32)
            let idKey = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: material, salt: Array("billingd console session".utf8), info: Array("token id v1".utf8), outputByteCount: 32)
            let id = idKey.withUnsafeBytes { Self.hex(Array($0.prefix(12))) }
            return Signer(id: id, label: token.label, token: Array(token.token.utf8), key: key)
        }
    }

    /// The signer of a presented operator token, compared with every configured token in constant time.
    func signer(presenting token: String) -> Signer? {
        let presented = Array(token.utf8)
        var found: Signer?
        for signer in signers where BearerTokenMiddleware<BillingRequestContext>.constantTimeEquals(presented, signer.token) {
            found = signer
        }
        return found
    }

    /// A new session for an operator token, as a cookie value; nil when the token is not one.
    public func signIn(token: String, now: Int64) -> (value: String, session: Session)? {
        guard let signer = signer(presenting: token) else { return nil }
        var random = SystemRandomNumberGenerator()
        let id = Self.base64URL((0..<16).map { _ in UInt8.random(in: 0...255, using: &random) })
        let session = Session(tokenID: signer.id, id: id, expiresAt: now + Self.lifetime, label: signer.label)
        let payload = "v1.\(signer.id).\(id).\(session.expiresAt)"
        let mac = HMAC<SHA256>.authenticationCode(for: Array(payload.utf8), using: signer.key)
        return ("\(payload).\(Self.base64URL(Array(mac)))", session)
    }

    /// The session of a cookie value: well formed, signed by a configured token's key, not expired.
    public func verify(_ value: String, now: Int64) -> Session? {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard value.utf8.count < 512, parts.count == 5, parts[0] == "v1", let expiresAt = Int64(parts[3]), expiresAt > now,
            expiresAt <= now + Self.lifetime, let mac = Self.bytes(base64URL: parts[4])
        else { return nil }
        // The token by its identifier, over every token in constant time.
        let presented = Array(parts[1].utf8)
        var found: Signer?
        for signer in signers where BearerTokenMiddleware<BillingRequestContext>.constantTimeEquals(presented, Array(signer.id.utf8)) {
            found = signer
        }
        guard let signer = found else { return nil }
        let payload = parts[0..<4].joined(separator: ".")
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: Array(payload.utf8), using: signer.key) else { return nil }
        return Session(tokenID: signer.id, id: String(parts[2]), expiresAt: expiresAt, label: signer.label)
    }

    /// Who a session acts as in what it records (a grant's giver or revoker): `console:LABEL`, or
    /// `console:token<N>` for an unlabelled token, as ``CallerTokens`` names a bearer of the token.
    public func caller(of session: Session) -> TokenCaller {
        let index = signers.firstIndex { $0.id == session.tokenID } ?? 0
        return TokenCaller(kind: .console, label: session.label ?? "token\(index + 1)")
    }

    /// The CSRF token of a session: HMAC of its id under its token's key.
    public func csrfToken(for session: Session) -> String {
        guard let signer = signers.first(where: { $0.id == session.tokenID }) else { return "" }
        return Self.base64URL(Array(HMAC<SHA256>.authenticationCode(for: Array("csrf.\(session.id)".utf8), using: signer.key)))
    }

    /// Whether `token` is the session's CSRF token (constant-time).
    public func checkCSRF(_ token: String?, for session: Session) -> Bool {
        guard let token, let mac = Self.bytes(base64URL: Substring(token)),
            let signer = signers.first(where: { $0.id == session.tokenID })
        else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: Array("csrf.\(session.id)".utf8), using: signer.key)
    }

    /// The `Set-Cookie` value that starts a session.
    public static func setCookie(_ value: String, secure: Bool) -> String {
        "\(cookieName)=\(value); Max-Age=\(lifetime); Path=/console; HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    /// The `Set-Cookie` value that ends a session.
    public static func clearCookie(secure: Bool) -> String {
        "\(cookieName)=; Max-Age=0; Path=/console; HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    /// The console cookie's value in a `Cookie` header, if any.
    public static func cookieValue(_ header: String?) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.drop(while: { $0 == " " })
            guard let equals = trimmed.firstIndex(of: "="), trimmed[..<equals] == cookieName else { continue }
            return String(trimmed[trimmed.index(after: equals)...])
        }
        return nil
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes of a base64url text without padding, only in its one canonical spelling: the
    /// unused low bits of the last character must be zero, so that a signature or CSRF token
    /// changed in those bits is a different, refused, value rather than the same bytes.
    static func bytes(base64URL text: Substring) -> [UInt8]? {
        guard text.utf8.count <= 128, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let bytes = Data(base64Encoded: base64).map(Array.init), base64URL(bytes) == text else { return nil }
        return bytes
    }
}
