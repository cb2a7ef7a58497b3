@testable import BillingCore
import BillingSamples
import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@Suite("App Store signed data: building blocks")
struct AppStoreBuildingBlockTests {
    typealias F = AppStoreFixtures

    @Test("Base64 round-trips every length in both alphabets")
    func base64RoundTrip() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            for alphabet in [JWSBase64.Alphabet.url, .standard] {
                let text = JWSBase64.encode(bytes, alphabet: alphabet)
                #expect(JWSBase64.decode(text, alphabet: alphabet) == bytes)
            }
            #expect(JWSBase64.encode(bytes, alphabet: .standard) == Data(bytes).base64EncodedString())
        }
    }

    @Test("Base64 is strict: foreign characters, misplaced padding and stray bits are refused", arguments: [
        ("QQ", JWSBase64.Alphabet.url, [UInt8(ascii: "A")]),
        ("QQ==", .url, [UInt8(ascii: "A")]),
        ("QQ==", .standard, [UInt8(ascii: "A")]),
        ("-_8", .url, [0xfb, 0xff]),
        ("+/8=", .standard, [0xfb, 0xff]),
    ] as [(String, JWSBase64.Alphabet, [UInt8])])
    func base64Accepted(text: String, alphabet: JWSBase64.Alphabet, bytes: [UInt8]) {
        #expect(JWSBase64.decode(text, alphabet: alphabet) == bytes)
    }

    @Test("Base64 refuses what is not exactly one encoding", arguments: [
        ("QR", JWSBase64.Alphabet.url),  // stray bits after the last byte
        ("Q", .url),  // a length no encoding has
        ("Q===", .url),
        ("QQ=", .url),
        ("Q=Q=", .url),
        ("+/8", .url),
        ("-_8", .standard),
        ("QQ\n", .url),
        (" QQ", .standard),
        ("QQ.", .url),
        ("Q\u{0}Q", .url),
    ] as [(String, JWSBase64.Alphabet)])
    func base64Refused(text: String, alphabet: JWSBase64.Alphabet) {
        #expect(JWSBase64.decode(text, alphabet: alphabet) == nil)
    }

    @Test("The chain cache is bounded and drops the oldest chain first")
    func cacheBound() {
        let cache = VerifiedChainCache(capacity: 3)
        let key = P256.Signing.PrivateKey().publicKey
        let from = Date(timeIntervalSince1970: 0)
        let until = Date(timeIntervalSince1970: 4_000_000_000)
        for index in 0..<5 {
            cache.insert(key, for: .init(leaf: [UInt8(index)], intermediate: [0]), validFrom: from, validUntil: until)
        }
        #expect(cache.count == 3)
        #expect(cache.leafKey(for: .init(leaf: [0], intermediate: [0]), at: from) == nil)
        #expect(cache.leafKey(for: .init(leaf: [4], intermediate: [0]), at: from) != nil)
        // Outside its window an entry does not answer.
        #expect(cache.leafKey(for: .init(leaf: [4], intermediate: [0]), at: until.addingTimeInterval(1)) == nil)
        #expect(cache.leafKey(for: .init(leaf: [4], intermediate: [1]), at: from) == nil)
    }

    @Test("Environments: Production is live, only Xcode and LocalTesting go without a chain, new values are kept")
    func environments() throws {
        #expect(AppStoreEnvironment.production.isLive)
        #expect(!AppStoreEnvironment.sandbox.isLive && !AppStoreEnvironment.xcode.isLive)
        #expect(AppStoreEnvironment.production.isChainSigned && AppStoreEnvironment.sandbox.isChainSigned)
        #expect(!AppStoreEnvironment.xcode.isChainSigned && !AppStoreEnvironment.localTesting.isChainSigned)
        let future = AppStoreEnvironment(rawValue: "Staging")
        #expect(future.isChainSigned && !future.isLive)
        #expect("\(AppStoreEnvironment.localTesting)" == "LocalTesting")

        let encoded = try JSONEncoder().encode([AppStoreEnvironment.sandbox, future])
        #expect(String(decoding: encoded, as: UTF8.self) == #"["Sandbox","Staging"]"#)
        #expect(try JSONDecoder().decode([AppStoreEnvironment].self, from: encoded) == [.sandbox, future])
    }

    @Test("The test PKI has Apple's shape: CA constraints, key usage, key identifiers and the two OIDs")
    func testPKIShape() throws {
        let pki = try AppStoreTestPKI()
        let root = try Certificate(derEncoded: pki.rootDER)
        let intermediate = try Certificate(derEncoded: pki.intermediateDER)
        let leaf = try Certificate(derEncoded: pki.leafDER)
        #expect(root.issuer == root.subject && intermediate.issuer == root.subject && leaf.issuer == intermediate.subject)
        #expect(try root.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: nil))
        #expect(try intermediate.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
        #expect(try leaf.extensions.basicConstraints == .notCertificateAuthority)
        #expect(try leaf.extensions.keyUsage?.digitalSignature == true)
        #expect(try intermediate.extensions.keyUsage?.keyCertSign == true)
        #expect(try leaf.extensions.authorityKeyIdentifier?.keyIdentifier == intermediate.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(try intermediate.extensions.authorityKeyIdentifier?.keyIdentifier == root.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(intermediate.extensions.contains { $0.oid == [1, 2, 840, 113_635, 100, 6, 2, 1] && !$0.critical })
        #expect(leaf.extensions.contains { $0.oid == [1, 2, 840, 113_635, 100, 6, 11, 1] && !$0.critical })

        let bare = try AppStoreTestPKI(options: .init(leafHasAppleOID: false, intermediateHasAppleOID: false))
        #expect(!(try Certificate(derEncoded: bare.leafDER)).extensions.contains { $0.oid == [1, 2, 840, 113_635, 100, 6, 11, 1] })
        #expect(!(try Certificate(derEncoded: bare.intermediateDER)).extensions.contains { $0.oid == [1, 2, 840, 113_635, 100, 6, 2, 1] })
    }

    @Test("The test PKI signs like Apple: header {alg: ES256, x5c: [leaf, intermediate, root]}, raw r‖s signature")
    func testPKISignature() throws {
        let pki = try AppStoreTestPKI()
        let jws = pki.sign(payload: Array("{}".utf8))
        let parts = F.segments(jws)
        let header = try #require(JWSBase64.decode(parts[0], alphabet: .url))
        let object = try #require(JSONSerialization.jsonObject(with: Data(header)) as? [String: Any])
        #expect(object["alg"] as? String == "ES256")
        #expect((object["x5c"] as? [String])?.compactMap { Data(base64Encoded: $0).map(Array.init) } == pki.chainDER)
        let signature = try #require(JWSBase64.decode(parts[2], alphabet: .url))
        #expect(signature.count == 64)
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        #expect(pki.leafPublicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: signature), for: signingInput))
    }

    @Test("A serialized test PKI reads back and signs data that its root still verifies")
    func testPKISerialization() async throws {
        let pki = try AppStoreTestPKI()
        let text = pki.serialized()
        #expect(text.components(separatedBy: "-----BEGIN CERTIFICATE-----").count == 4)
        #expect(text.contains("-----BEGIN PRIVATE KEY-----"))
        let restored = try AppStoreTestPKI(serialized: text)
        #expect(restored.chainDER == pki.chainDER)
        #expect(restored.serialized() == text)
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let verified = try await verifier.verifyTransaction(restored.sign(payload: F.payload("transaction")))
        #expect(verified.environment == .sandbox)
    }

    @Test("A serialization that is not this shape, or whose key is not the leaf's, is refused")
    func testPKISerializationRefused() throws {
        let pki = try AppStoreTestPKI()
        let other = try AppStoreTestPKI()
        let blocks = pki.serialized().components(separatedBy: "-----BEGIN ")
        let otherKey = "-----BEGIN " + (other.serialized().components(separatedBy: "-----BEGIN ").last ?? "")
        let swappedKey = blocks.dropLast().joined(separator: "-----BEGIN ") + otherKey
        for text in ["", "not pem", swappedKey, blocks.dropLast().joined(separator: "-----BEGIN ")] {
            let error = #expect(throws: AppStoreTestPKIError.self) { try AppStoreTestPKI(serialized: text) }
            #expect(error?.code == .invalidSerialization)
        }
    }
}
