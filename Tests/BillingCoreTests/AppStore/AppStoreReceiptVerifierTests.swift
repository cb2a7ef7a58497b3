@testable import BillingCore
import BillingSamples
import Crypto
import Foundation
import SwiftASN1
import Testing
import X509
import _CryptoExtras

@Suite("App Store receipts: Apple's PKCS#7 signature (StoreKit 1)")
struct AppStoreReceiptVerifierTests {
    static let purchases: [AppStoreReceipt.InAppPurchase] = [
        .init(
            transactionID: "2000000100000002", originalTransactionID: "2000000100000001", productID: "com.example.radar.pro.monthly",
            purchaseDate: 1_735_689_600_000, originalPurchaseDate: 1_733_011_200_000, expiresDate: 1_738_368_000_000)
    ]

    static func sample(signer: AppStoreSampleReceipt.Signer?, indefiniteLength: Bool = false) -> [UInt8] {
        AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: purchases, indefiniteLength: indefiniteLength, signer: signer)
    }

    // MARK: - Apple's own receipts

    /// `app_receipt_sandbox` (see AppStoreReceiptTests): a receipt the App Store signed in April
    /// 2025, RSA, through Apple's WWDR G5 intermediate to Apple Inc. Root.
    @Test("A receipt the App Store signed verifies to the bundled Apple Inc. Root, and to no other root")
    func appleSignedSandbox() async throws {
        let base64 = try AppStoreReceiptTests.fixture("app_receipt_sandbox")
        let apple = try AppStoreReceiptVerifier(rootCertificates: [AppleRootCertificates.appleIncRoot])
        let read = try await apple.read(base64: base64)
        #expect(read.problem == nil, "\(String(describing: read.problem))")
        #expect(read.receipt.transactionIDForLookup == "2000000909538865")
        #expect(read.receipt.creationDate != nil)

        let other = try AppStoreReceiptVerifier(rootCertificates: [try AppStoreTestPKI().rootDER, AppleRootCertificates.g3])
        #expect(try await other.read(base64: base64).problem?.code == .untrustedReceiptChain)
        #expect(try await AppStoreReceiptVerifier().read(base64: base64).problem?.code == .receiptRootNotConfigured)
    }

    @Test("The bundled Apple Inc. Root is Apple's, by its SHA-256 fingerprint")
    func bundledRoot() {
        let fingerprint = SHA256.hash(data: AppleRootCertificates.appleIncRoot).map { String(format: "%02x", $0) }.joined()
        #expect(fingerprint == "b0b1730ecbc7ff4505142c49f1295e6eda6bcaed7e2c68c5be91b5a11001f024")
    }

    @Test("Xcode's receipts, signed on the developer's machine, do not verify to Apple's root")
    func xcodeReceipt() async throws {
        let apple = try AppStoreReceiptVerifier(rootCertificates: [AppleRootCertificates.appleIncRoot])
        let read = try await apple.read(base64: try AppStoreReceiptTests.fixture("app_receipt_xcode_three_purchases"))
        #expect(read.problem != nil)
        #expect(read.receipt.inAppPurchases.count == 3)
    }

    // MARK: - Test PKIs

    @Test("A receipt signed by a configured test PKI verifies, in DER and in Xcode's BER", arguments: [false, true])
    func testPKISigned(indefiniteLength: Bool) async throws {
        let pki = try AppStoreTestPKI()
        let verifier = try AppStoreReceiptVerifier(rootCertificates: [pki.rootDER])
        let read = try await verifier.read(der: Self.sample(signer: pki.receiptSigner, indefiniteLength: indefiniteLength))
        #expect(read.isVerified, "\(String(describing: read.problem))")
        #expect(read.receipt.transactionIDForLookup == "2000000100000001")
        #expect(read.receipt.creationDate == AppStoreSampleReceipt.defaultCreationDate)
    }

    @Test("Receipts signed as Apple signs them — RSA, SHA-1 or SHA-256, rsaEncryption — verify", arguments: [
        AppStoreSampleReceipt.Signer.Algorithm.rsaSHA1, .rsaSHA256,
    ])
    func rsaSigned(_ algorithm: AppStoreSampleReceipt.Signer.Algorithm) async throws {
        let pki = try RSAReceiptPKI.shared
        let verifier = try AppStoreReceiptVerifier(rootCertificates: [pki.rootDER])
        let read = try await verifier.read(der: Self.sample(signer: pki.signer(algorithm)))
        #expect(read.isVerified, "\(String(describing: read.problem))")
    }

    @Test("What Apple did not sign reads, unverified, with the reason", arguments: UnverifiedReceipt.allCases)
    func unverified(_ case: UnverifiedReceipt) async throws {
        let pki = try AppStoreTestPKI()
        var roots = [pki.rootDER]
        var signer: AppStoreSampleReceipt.Signer? = pki.receiptSigner
        switch `case` {
        case .unsigned: signer = nil
        case .alteredContent:
            let sign = pki.receiptSigner.sign
            signer?.sign = { content in sign(content + [0]) }
        case .anotherRoot: roots = [try AppStoreTestPKI(options: .init(name: "Other")).rootDER]
        case .rootItBrings:
            let mallory = try AppStoreTestPKI(options: .init(name: "Mallory"))
            signer = mallory.receiptSigner
        case .notAReceiptSigner: signer = try AppStoreTestPKI(options: .init(leafHasAppleOID: false)).receiptSigner
        case .noWWDRIntermediate: signer = try AppStoreTestPKI(options: .init(intermediateHasAppleOID: false)).receiptSigner
        case .expiredAtCreation: signer = try AppStoreTestPKI(options: .init(leafNotValidAfter: 1_000_000_000_000)).receiptSigner
        case .signerNotCarried: signer?.signerCertificate = try AppStoreTestPKI().leafDER
        case .unsupportedAlgorithm: signer?.algorithm = .rsaSHA256
        }
        if `case` == .notAReceiptSigner || `case` == .noWWDRIntermediate || `case` == .expiredAtCreation {
            roots = [try #require(signer?.certificates.last)]
        }
        let verifier = try AppStoreReceiptVerifier(rootCertificates: roots)
        let read = try await verifier.read(der: Self.sample(signer: signer))
        #expect(read.problem?.code == `case`.code, "\(read.problem?.message ?? "verified")")
        #expect((read.problem?.message.count ?? 0) < 300)
        // It still reads: what it names is the caller's to weigh.
        #expect(read.receipt.transactionIDForLookup == "2000000100000001")
    }

    @Test("A receipt root that is not a certificate is refused when the verifier is made")
    func invalidRoot() {
        let error = #expect(throws: AppStoreReceiptError.self) { try AppStoreReceiptVerifier(rootCertificates: [Array("-----BEGIN".utf8)]) }
        #expect(error?.code == .invalidReceiptRoot)
    }

    @Test("Every single-byte change of a signed receipt is unverified or refused, never a crash")
    func mutations() async throws {
        let pki = try AppStoreTestPKI()
        let verifier = try AppStoreReceiptVerifier(rootCertificates: [pki.rootDER])
        let der = Self.sample(signer: pki.receiptSigner)
        var verified = 0
        for index in stride(from: 0, to: der.count, by: 7) {
            var mutated = der
            mutated[index] ^= 0x01
            if let read = try? await verifier.read(der: mutated), read.isVerified { verified += 1 }
            await Task.yield()
        }
        // A flip in an unsigned part (a certificate's unused fields aside) can still verify; never most.
        #expect(verified < der.count / 7 / 4)
    }
}

/// Receipts Apple's signature does not vouch for, each with the reason it reads as.
enum UnverifiedReceipt: String, CaseIterable, Sendable {
    case unsigned, alteredContent, anotherRoot, rootItBrings, notAReceiptSigner, noWWDRIntermediate, expiredAtCreation
    case signerNotCarried, unsupportedAlgorithm

    var code: AppStoreReceiptError.Code {
        switch self {
        case .unsigned: .unsignedReceipt
        case .alteredContent, .signerNotCarried, .unsupportedAlgorithm: .receiptSignatureMismatch
        case .anotherRoot, .rootItBrings, .notAReceiptSigner, .noWWDRIntermediate, .expiredAtCreation: .untrustedReceiptChain
        }
    }
}

/// An all-RSA chain in the shape of Apple's receipt PKI (Apple Inc. Root → WWDR → receipt
/// signer), made once: RSA keys are slow to generate.
struct RSAReceiptPKI: Sendable {
    let rootDER: [UInt8]
    let intermediateDER: [UInt8]
    let leafDER: [UInt8]
    let leafKey: _RSA.Signing.PrivateKey

    static let made = Result { try RSAReceiptPKI() }
    static var shared: RSAReceiptPKI { get throws { try made.get() } }

    init() throws {
        let rootKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let intermediateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        leafKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let from = Date(timeIntervalSince1970: 978_307_200)
        let until = Date(timeIntervalSince1970: 4_070_908_800)
        let rootName = try DistinguishedName { CommonName("Test Apple Root CA"); OrganizationName("billingd") }
        let intermediateName = try DistinguishedName { CommonName("Test WWDR CA"); OrganizationName("billingd") }
        let leafName = try DistinguishedName { CommonName("Test Receipt Signing"); OrganizationName("billingd") }
        func marker(_ oid: ASN1ObjectIdentifier) -> Certificate.Extension { .init(oid: oid, critical: false, value: [0x05, 0x00]) }
        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: from, notValidAfter: until,
            issuer: rootName, subject: rootName, signatureAlgorithm: .sha256WithRSAEncryption,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: from, notValidAfter: until,
            issuer: rootName, subject: intermediateName, signatureAlgorithm: .sha1WithRSAEncryption,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                marker([1, 2, 840, 113_635, 100, 6, 2, 1])
            },
            issuerPrivateKey: .init(rootKey))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: from, notValidAfter: until,
            issuer: intermediateName, subject: leafName, signatureAlgorithm: .sha256WithRSAEncryption,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                marker([1, 2, 840, 113_635, 100, 6, 11, 1])
            },
            issuerPrivateKey: .init(intermediateKey))
        func der(_ certificate: Certificate) throws -> [UInt8] {
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return serializer.serializedBytes
        }
        rootDER = try der(root)
        intermediateDER = try der(intermediate)
        leafDER = try der(leaf)
    }

    /// Signs as Apple does: PKCS#1 v1.5 over the content's SHA-1 or SHA-256.
    func signer(_ algorithm: AppStoreSampleReceipt.Signer.Algorithm) -> AppStoreSampleReceipt.Signer {
        let key = leafKey
        return .init(certificates: [leafDER, intermediateDER, rootDER], signerCertificate: leafDER, algorithm: algorithm) { content in
            let signature =
                algorithm == .rsaSHA1
                ? try? key.signature(for: Insecure.SHA1.hash(data: content), padding: .insecurePKCS1v1_5)
                : try? key.signature(for: SHA256.hash(data: content), padding: .insecurePKCS1v1_5)
            return signature.map { Array($0.rawRepresentation) } ?? []
        }
    }
}
