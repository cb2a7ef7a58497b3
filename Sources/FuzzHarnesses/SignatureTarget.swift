import BillingCore

/// `Stripe-Signature` parsing and verification. The input is the header value, a line feed, and
/// the raw body; the verifier holds two secrets (a rotation) and its clock is the header's `t=`,
/// so that a correctly signed input is verified rather than refused as old.
enum SignatureTarget {
    static let secrets = ["whsec_fuzz_current", "whsec_fuzz_rotated"]
    private static let verifier = SignatureVerifier(secrets: secrets)

    static func run(_ input: [UInt8]) -> FuzzVerdict {
        let newline = input.firstIndex(of: UInt8(ascii: "\n")) ?? input.endIndex
        let header = String(decoding: input[..<newline], as: UTF8.self)
        let body = newline < input.endIndex ? Array(input[(newline + 1)...]) : []

        let parsed: SignatureHeader
        do {
            parsed = try SignatureHeader(parsing: header)
        } catch {
            return .rejected
        }
        guard !parsed.signatures.isEmpty, parsed.signatures.allSatisfy({ $0.count == 32 }) else {
            return .violated("a parsed header keeps a v1 signature that is not 32 bytes, or none")
        }
        guard parsed.timestamp >= 0 else { return .violated("a parsed header has a negative t=") }

        // Outside the tolerance in either direction, even a genuine signature is refused.
        let late = parsed.timestamp + verifier.tolerance + 1
        let early = parsed.timestamp - verifier.tolerance - 1
        if (try? verifier.verify(body: body, header: header, now: late)) != nil
            || (try? verifier.verify(body: body, header: header, now: early)) != nil
        {
            return .violated("a signature was accepted outside the tolerance")
        }
        let verified: SignatureVerifier.Verified
        do {
            verified = try verifier.verifySignature(body: body, header: header, now: parsed.timestamp)
        } catch {
            return .rejected
        }
        guard secrets.indices.contains(verified.secretIndex), verified.timestamp == parsed.timestamp else {
            return .violated("verification named a secret or timestamp that is not the header's")
        }
        // What verified must carry the signature a sender with that secret computes.
        let expected = SignatureVerifier.signatureHex(body: body, secret: secrets[verified.secretIndex], timestamp: parsed.timestamp)
        guard header.lowercased().contains(expected) else {
            return .violated("a header verified without carrying the body's HMAC")
        }
        return .accepted
    }
}
