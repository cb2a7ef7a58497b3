/// A compact JWS split into its three segments and decoded, nothing verified yet (RFC 7515 §7.1).
struct CompactJWS {
    /// The ASCII bytes of `header.payload` exactly as received: what the signature covers.
    let signingInput: [UInt8]
    let header: [UInt8]
    let payload: [UInt8]
    let signature: [UInt8]

    /// The longest JWS accepted. Apple's notifications, with two JWS and three certificate
    /// chains inside, are around 15 KB; this bounds the work a hostile body can cause.
    static let maximumLength = 1 << 20
    /// The longest header segment accepted, in base64url characters. Apple's header (`alg` and
    /// an `x5c` of three certificates) is about 5 KB; refused before anything is decoded, so that
    /// a header of thousands of members or certificates costs a length check, not a JSON parse.
    static let maximumHeaderLength = 16 << 10

    init(parsing jws: String) throws(AppStoreVerificationError) {
        let text = jws.utf8
        guard !text.isEmpty else {
            throw AppStoreVerificationError(.invalidJWS, "The signed data is empty; expected a compact JWS (header.payload.signature).")
        }
        guard text.count <= Self.maximumLength else {
            throw AppStoreVerificationError(
                .invalidJWS, "The signed data is \(text.count) bytes, more than the \(Self.maximumLength) accepted for a JWS.")
        }
        let segments = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else {
            throw AppStoreVerificationError(
                .invalidJWS,
                "The signed data has \(segments.count) dot-separated segment\(segments.count == 1 ? "" : "s"), "
                    + "not the 3 of a compact JWS (header.payload.signature); pass the JWS string exactly as Apple sent it.")
        }
        guard segments[0].count <= Self.maximumHeaderLength else {
            throw AppStoreVerificationError(
                .invalidJWS,
                "The JWS header segment is \(segments[0].count) characters, more than the \(Self.maximumHeaderLength) accepted; "
                    + "Apple's header (alg and three x5c certificates) is about 5 KB.")
        }
        let names = ["header", "payload", "signature"]
        var decoded: [[UInt8]] = []
        for (index, segment) in segments.enumerated() {
            guard let bytes = JWSBase64.decode(Substring(segment), alphabet: .url) else {
                throw AppStoreVerificationError(
                    .invalidJWS,
                    "The JWS \(names[index]) segment is not base64url (only A-Z a-z 0-9 - _ are allowed): "
                        + "\(AppStoreVerificationError.excerpt(Substring(segment), limit: 24)).")
            }
            decoded.append(bytes)
        }
        header = decoded[0]
        payload = decoded[1]
        signature = decoded[2]
        signingInput = Array(text[..<segments[1].endIndex])
    }
}

/// The decoding without verification, for data that was verified before it was stored (the
/// applier re-reads the inbox): splits a compact JWS and returns its payload bytes.
public enum AppStoreJWS {
    /// The payload segment, base64url-decoded: the JSON bytes exactly as they were signed.
    /// Checks the JWS's shape only — never use this on data that has not been verified.
    public static func payload(of jws: String) throws(AppStoreVerificationError) -> [UInt8] {
        try CompactJWS(parsing: jws).payload
    }
}
