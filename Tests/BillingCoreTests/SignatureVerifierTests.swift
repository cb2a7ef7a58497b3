import BillingCore
import Crypto
import Foundation
import Testing

@Suite("Stripe-Signature verification")
struct SignatureVerifierTests {
    let secret = "whsec_test_secret_0123456789"
    let otherSecret = "whsec_rotated_secret_abcdef"
    let body = Array(#"{"id":"evt_1","object":"event","type":"invoice.paid","created":1767225600,"data":{"object":{"id":"in_1"}}}"#.utf8)
    let now: Int64 = 1_767_225_600

    func sign(_ body: [UInt8], secret: String, at timestamp: Int64) -> String {
        SignatureVerifier.signatureHex(body: body, secret: secret, timestamp: timestamp)
    }

    @Test("A header signed the way Stripe signs verifies")
    func validSignature() throws {
        let verifier = SignatureVerifier(secrets: [secret])
        let header = SignatureVerifier.header(body: body, secret: secret, timestamp: now)
        #expect(try verifier.verify(body: body, header: header, now: now) == 0)
    }

    @Test("Our signature equals an independent HMAC-SHA256 of t.body")
    func matchesReferenceHMAC() {
        var payload = Array("\(now).".utf8)
        payload += body
        let mac = HMAC<SHA256>.authenticationCode(for: payload, using: SymmetricKey(data: Array(secret.utf8)))
        let hex = mac.map { String(format: "%02x", $0) }.joined()
        #expect(sign(body, secret: secret, at: now) == hex)
    }

    @Test("Rotation: either secret verifies and the index says which")
    func rotation() throws {
        let verifier = SignatureVerifier(secrets: [secret, otherSecret])
        let withNew = "t=\(now),v1=\(sign(body, secret: otherSecret, at: now))"
        #expect(try verifier.verify(body: body, header: withNew, now: now) == 1)
        let withBoth = "t=\(now),v1=\(sign(body, secret: otherSecret, at: now)),v1=\(sign(body, secret: secret, at: now))"
        #expect(try verifier.verify(body: body, header: withBoth, now: now) == 0)
    }

    @Test("Tolerance holds at the boundary, in both directions", arguments: [
        (Int64(-300), true), (-301, false), (300, true), (301, false), (0, true), (-86_400, false), (86_400, false),
    ])
    func toleranceBoundary(offset: Int64, accepted: Bool) {
        let verifier = SignatureVerifier(secrets: [secret], tolerance: 300)
        // offset < 0: the signature is older than now; offset > 0: it is from the future.
        let timestamp = now + offset
        let header = "t=\(timestamp),v1=\(sign(body, secret: secret, at: timestamp))"
        let result = Result { () throws(SignatureError) in try verifier.verify(body: body, header: header, now: now) }
        switch result {
        case .success: #expect(accepted)
        case .failure(let error):
            #expect(!accepted)
            #expect(error.isStale)
            #expect(error.code == (offset < 0 ? "signature_timestamp_too_old" : "signature_timestamp_in_future"))
        }
    }

    @Test("Uppercase hex, spaces around pairs and unknown schemes are accepted")
    func lenientButSafeFormatting() throws {
        let verifier = SignatureVerifier(secrets: [secret])
        let hex = sign(body, secret: secret, at: now)
        for header in [
            "t=\(now),v1=\(hex.uppercased())",
            " t=\(now) , v1=\(hex) ",
            "t=\(now),v0=deadbeef,v1=\(hex),scheme9=whatever",
            "v1=\(hex),t=\(now)",
            "t=\(now),v1=\(String(repeating: "0", count: 64)),v1=\(hex)",
        ] {
            #expect(try verifier.verify(body: body, header: header, now: now) == 0, "header: \(header)")
        }
    }

    @Test("Malformed headers are rejected with a named reason", arguments: [
        ("", "missing_signature_header"),
        ("   ", "missing_signature_header"),
        ("v1=abc", "signature_timestamp_missing"),
        ("t=1767225600", "no_v1_signature"),
        ("t=1767225600,v1=nothex", "no_v1_signature"),
        ("t=1767225600,v1=abcd", "no_v1_signature"),
        ("t=1767225600,t=1767225600,v1=" + String(repeating: "a", count: 64), "signature_timestamp_repeated"),
        ("t=soon,v1=" + String(repeating: "a", count: 64), "signature_timestamp_invalid"),
        ("t=-5,v1=" + String(repeating: "a", count: 64), "signature_timestamp_invalid"),
        ("t=,v1=" + String(repeating: "a", count: 64), "signature_timestamp_invalid"),
        ("t=99999999999999999999,v1=" + String(repeating: "a", count: 64), "signature_timestamp_invalid"),
        ("garbage", "malformed_signature_header"),
        ("t=1767225600;v1=abc", "signature_timestamp_invalid"),
        (String(repeating: "v1=aa,", count: 1000), "signature_header_too_long"),
    ])
    func malformed(header: String, code: String) {
        let verifier = SignatureVerifier(secrets: [secret])
        #expect(throws: SignatureError.self) { try verifier.verify(body: body, header: header, now: now) }
        do {
            _ = try verifier.verify(body: body, header: header, now: now)
        } catch {
            #expect(error.code == code, "header: \(header.prefix(60))")
        }
    }

    @Test("A missing header is rejected")
    func missingHeader() {
        let verifier = SignatureVerifier(secrets: [secret])
        #expect(throws: SignatureError.missingHeader) { try verifier.verify(body: body, header: nil, now: now) }
    }

    @Test("A tampered body, a wrong secret or a changed timestamp does not verify")
    func tampering() {
        let verifier = SignatureVerifier(secrets: [secret])
        let header = SignatureVerifier.header(body: body, secret: secret, timestamp: now)
        var tampered = body
        tampered[10] ^= 0x01
        #expect(throws: SignatureError.noMatchingSignature) { try verifier.verify(body: tampered, header: header, now: now) }
        #expect(throws: SignatureError.noMatchingSignature) {
            try verifier.verify(body: body + [0x20], header: header, now: now)
        }
        let wrong = SignatureVerifier.header(body: body, secret: "whsec_wrong_secret", timestamp: now)
        #expect(throws: SignatureError.noMatchingSignature) { try verifier.verify(body: body, header: wrong, now: now) }
        let moved = "t=\(now + 1),v1=\(sign(body, secret: secret, at: now))"
        #expect(throws: SignatureError.noMatchingSignature) { try verifier.verify(body: body, header: moved, now: now) }
    }

    @Test("Bytes are verified as received: no JSON normalisation")
    func rawBytes() throws {
        let verifier = SignatureVerifier(secrets: [secret])
        let spaced = Array("{ \"id\" : \"evt_1\" }\n".utf8)
        let header = SignatureVerifier.header(body: spaced, secret: secret, timestamp: now)
        #expect(try verifier.verify(body: spaced, header: header, now: now) == 0)
        let compact = Array("{\"id\":\"evt_1\"}".utf8)
        #expect(throws: SignatureError.noMatchingSignature) { try verifier.verify(body: compact, header: header, now: now) }
    }
}
