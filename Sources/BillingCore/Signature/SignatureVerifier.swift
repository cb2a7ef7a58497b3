import Crypto

/// Verifies Stripe's webhook signatures: HMAC-SHA256 over `t` + "." + the raw body.
///
/// Stricter than Stripe's own libraries: the timestamp must be within the tolerance in both
/// directions, and every comparison is constant-time (`isValidAuthenticationCode`).
public struct SignatureVerifier: Sendable {
    /// The endpoint secrets as HMAC keys; callers learn the index that matched, never the key.
    private let secrets: [SymmetricKey]
    /// Largest accepted distance, in seconds, between the signature timestamp and now.
    public let tolerance: Int64

    /// - Parameters:
    ///   - secrets: the endpoint secrets (`whsec_…`), several during rotation. Must not be empty.
    ///   - tolerance: seconds; Stripe's libraries default to 300.
    public init(secrets: [String], tolerance: Int64 = 300) {
        precondition(!secrets.isEmpty, "SignatureVerifier needs at least one secret")
        self.secrets = secrets.map { SymmetricKey(data: Array($0.utf8)) }
        self.tolerance = tolerance
    }

    /// What a verified signature tells: which secret matched, and when Stripe signed.
    public struct Verified: Sendable, Equatable {
        /// Index of the secret that matched (never the secret).
        public let secretIndex: Int
        /// The header's `t=`, Unix seconds: an event signed then was created no later.
        public let timestamp: Int64

        public init(secretIndex: Int, timestamp: Int64) {
            self.secretIndex = secretIndex
            self.timestamp = timestamp
        }
    }

    /// Checks a delivery; returns the index of the secret that matched.
    /// - Parameters:
    ///   - body: the raw request body exactly as received.
    ///   - header: the `Stripe-Signature` header value, nil when absent.
    ///   - now: current Unix time in seconds.
    public func verify(body: [UInt8], header: String?, now: Int64) throws(SignatureError) -> Int {
        try verifySignature(body: body, header: header, now: now).secretIndex
    }

    /// Checks a delivery; returns the secret that matched and the signature's timestamp.
    public func verifySignature(body: [UInt8], header: String?, now: Int64) throws(SignatureError) -> Verified {
        guard let header else { throw .missingHeader }
        let parsed = try SignatureHeader(parsing: header)
        let age = now - parsed.timestamp
        if age > tolerance { throw .timestampTooOld(ageSeconds: age, tolerance: tolerance) }
        if -age > tolerance { throw .timestampInFuture(aheadSeconds: -age, tolerance: tolerance) }

        var signedPayload = Array("\(parsed.timestamp).".utf8)
        signedPayload.append(contentsOf: body)
        // Every secret is tried against every candidate, with no early exit, so the time taken
        // does not tell which candidate or secret came close.
        var matched: Int?
        for (index, secret) in secrets.enumerated() {
            for candidate in parsed.signatures
            where HMAC<SHA256>.isValidAuthenticationCode(candidate, authenticating: signedPayload, using: secret) {
                if matched == nil { matched = index }
            }
        }
        guard let matched else { throw .noMatchingSignature }
        return Verified(secretIndex: matched, timestamp: parsed.timestamp)
    }

    /// Builds a `Stripe-Signature` header the way Stripe does, for `billingd trigger` and tests.
    public static func header(body: [UInt8], secret: String, timestamp: Int64) -> String {
        "t=\(timestamp),v1=\(signatureHex(body: body, secret: secret, timestamp: timestamp))"
    }

    /// The lowercase-hex v1 signature of a body at a timestamp.
    public static func signatureHex(body: [UInt8], secret: String, timestamp: Int64) -> String {
        var hmac = HMAC<SHA256>(key: SymmetricKey(data: Array(secret.utf8)))
        hmac.update(data: Array("\(timestamp).".utf8))
        hmac.update(data: body)
        let hexDigits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in hmac.finalize() {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
