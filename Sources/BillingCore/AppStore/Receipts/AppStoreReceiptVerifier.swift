import Crypto
import Foundation
internal import SwiftASN1
@_spi(FixedExpiryValidationTime) internal import X509

/// Reads StoreKit 1 app receipts and checks that Apple signed them: the PKCS#7 signature over the
/// receipt's content, by a certificate that chains to a configured root (Apple Inc. Root, which
/// signs receipts through its Worldwide Developer Relations intermediate).
///
/// A receipt that does not verify still reads: what it names may be *looked at* for a user who
/// already holds the purchase, never claimed (see the receipts route). The rules, in order (the
/// first that fails names why the receipt is unverified):
/// 1. a root is configured → `receipt_root_not_configured`;
/// 2. exactly one SignerInfo, and certificates → `unsigned_receipt`;
/// 3. the signer's certificate (by issuer and serial number, or subject key identifier) is among
///    the receipt's, at most ``maximumCertificates`` DER X.509 certificates, and its signature
///    over the content (or over the signed attributes, whose message digest must be the
///    content's) verifies under an algorithm below → `receipt_signature_mismatch`;
/// 4. the signer carries Apple's receipt-signing extension 1.2.840.113635.100.6.11.1, and with
///    swift-certificates' `Verifier` and `RFC5280Policy` at the receipt's creation date
///    (attribute 12) it chains signer → an intermediate carrying Apple's WWDR extension
///    1.2.840.113635.100.6.2.1 → a configured root (never a root the receipt brings) →
///    `untrusted_receipt_chain`.
///
/// Algorithms: Apple signs receipts with RSA PKCS#1 v1.5, SHA-1 in old receipts and SHA-256 in
/// new ones, and writes the signature algorithm as `rsaEncryption` with the hash in the digest
/// algorithm — a shape swift-certificates' own CMS verification (`@_spi(CMS)`
/// `CMS.isValidSignature`, 1.21) refuses, as it maps only `sha…WithRSAEncryption` to a digest. So
/// the SignedData is walked here and the signature checked with swift-certificates' public
/// `Certificate.PublicKey.isValidSignature(_:for:signatureAlgorithm:)`, which verifies RSA with
/// SHA-1 or SHA-256 (and certificates signed with either, as Apple's old chain is). Accepted:
/// digest SHA-1 with `rsaEncryption` or `sha1WithRSAEncryption`; digest SHA-256 with
/// `rsaEncryption`, `sha256WithRSAEncryption` or `ecdsa-with-SHA256` (local mode's P-256 PKI).
///
/// Pure: no clock (the chain is judged at the receipt's creation date), no network, no files.
public struct AppStoreReceiptVerifier: Sendable {
    /// The most certificates a receipt may carry; Apple's carries three.
    public static let maximumCertificates = 8

    private let roots: [Certificate]

    /// A verifier with no root: every receipt reads, none verifies.
    public init() {
        roots = []
    }

    /// Parses the roots once; a root that is not DER X.509 is `invalid_receipt_root`.
    public init(rootCertificates: [[UInt8]]) throws(AppStoreReceiptError) {
        var parsed: [Certificate] = []
        for (index, der) in rootCertificates.enumerated() {
            guard let certificate = try? Certificate(derEncoded: der) else {
                throw AppStoreReceiptError(
                    .invalidReceiptRoot,
                    "Configured receipt root certificate #\(index + 1) (\(der.count) bytes) is not a DER X.509 certificate.")
            }
            parsed.append(certificate)
        }
        roots = parsed
    }

    /// Whether any root is configured, i.e. whether a receipt can verify at all.
    public var hasRoots: Bool { !roots.isEmpty }

    /// Reads a base64 app receipt (see ``AppStoreReceipt/init(base64:)``) and checks its signature.
    /// Throws only when it is not a receipt; an unverified receipt is returned as such.
    public func read(base64: String) async throws(AppStoreReceiptError) -> AppStoreVerifiedReceipt {
        try await read(der: AppStoreReceipt.der(base64: base64))
    }

    /// Reads an app receipt's bytes (see ``AppStoreReceipt/init(der:)``) and checks its signature.
    public func read(der: [UInt8]) async throws(AppStoreReceiptError) -> AppStoreVerifiedReceipt {
        try AppStoreReceipt.checkSize(der)
        let signedData = try ReceiptContainer.signedData(of: der)
        let receipt = try AppStoreReceipt(signedData)
        do {
            try await verify(signedData, at: receipt.creationDate)
            return AppStoreVerifiedReceipt(receipt: receipt, problem: nil)
        } catch {
            return AppStoreVerifiedReceipt(receipt: receipt, problem: error)
        }
    }

    // MARK: - Steps

    private func verify(_ signedData: ReceiptContainer.SignedData, at creationDate: Int64?) async throws(AppStoreReceiptError) {
        guard !roots.isEmpty else {
            throw AppStoreReceiptError(
                .receiptRootNotConfigured, "No receipt root certificate is configured (APPSTORE_RECEIPT_ROOT_CERTIFICATES), so no receipt can be verified.")
        }
        guard signedData.signerInfos.count == 1, !signedData.certificates.isEmpty else {
            throw AppStoreReceiptError(
                .unsignedReceipt,
                "The receipt has \(signedData.signerInfos.count) signers and \(signedData.certificates.count) certificates; "
                    + "Apple's receipts have one signer and its certificate chain.")
        }
        guard signedData.certificates.count <= Self.maximumCertificates else {
            throw Self.mismatch("The receipt carries \(signedData.certificates.count) certificates, more than the \(Self.maximumCertificates) accepted.")
        }
        var certificates: [Certificate] = []
        for node in signedData.certificates {
            guard let certificate = try? Certificate(derEncoded: Array(node.encodedBytes)) else {
                throw Self.mismatch("A certificate in the receipt is not DER X.509.")
            }
            certificates.append(certificate)
        }
        let signer = try SignerInfo(signedData.signerInfos[0])
        guard let certificate = certificates.first(where: signer.identifies) else {
            throw Self.mismatch("The receipt's signer names no certificate the receipt carries.")
        }
        let signedBytes = try signer.signedBytes(content: signedData.content)
        guard certificate.publicKey.isValidSignature(signer.signature, for: signedBytes, signatureAlgorithm: signer.algorithm) else {
            throw Self.mismatch("The receipt's signature does not match its content under the signer's key; the receipt was altered or not signed by that certificate.")
        }
        try await checkChain(signer: certificate, certificates: certificates, at: creationDate)
    }

    private func checkChain(signer: Certificate, certificates: [Certificate], at creationDate: Int64?) async throws(AppStoreReceiptError) {
        guard signer.extensions.contains(where: { $0.oid == AppleOID.receiptSigner }) else {
            throw Self.untrusted(
                "The signer's certificate lacks Apple's receipt-signing extension 1.2.840.113635.100.6.11.1; it is not the App Store's receipt signer.")
        }
        guard let creationDate else {
            throw Self.untrusted("The receipt has no creation date (attribute 12), the time its certificates are checked at.")
        }
        let validationTime = Date(timeIntervalSince1970: Double(creationDate) / 1000)
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: validationTime)
            ReceiptChainShapePolicy()
        }
        let intermediates = CertificateStore(certificates.filter { $0 != signer })
        guard case .validCertificate = await verifier.validate(leaf: signer, intermediates: intermediates) else {
            throw Self.untrusted(
                "The receipt's certificates do not chain to a configured receipt root through Apple's WWDR intermediate "
                    + "(RFC 5280, at the receipt's creation date \(validationTime.formatted(.iso8601))); the root a receipt brings is never trusted.")
        }
    }

    private static func mismatch(_ message: String) -> AppStoreReceiptError {
        AppStoreReceiptError(.receiptSignatureMismatch, message)
    }

    private static func untrusted(_ message: String) -> AppStoreReceiptError {
        AppStoreReceiptError(.untrustedReceiptChain, message)
    }
}

/// A receipt as read, and whether Apple's signature on it verified.
public struct AppStoreVerifiedReceipt: Sendable {
    public let receipt: AppStoreReceipt
    /// Why the receipt is not verified; nil when it is.
    public let problem: AppStoreReceiptError?

    public var isVerified: Bool { problem == nil }
}

/// A receipt's one SignerInfo (RFC 5652 §5.3), the parts the signature check needs.
private struct SignerInfo {
    enum Identifier {
        case issuerAndSerial(issuer: DistinguishedName, serial: ArraySlice<UInt8>)
        case subjectKeyIdentifier(ArraySlice<UInt8>)
    }

    let identifier: Identifier
    let algorithm: Certificate.SignatureAlgorithm
    /// The `[0] signedAttrs` node, when present.
    let signedAttributes: ASN1Node?
    let digest: ASN1ObjectIdentifier
    let signature: ArraySlice<UInt8>

    static let sha1: ASN1ObjectIdentifier = [1, 3, 14, 3, 2, 26]
    static let sha256: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 2, 1]
    static let rsaEncryption: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 1, 1]
    static let sha1WithRSA: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 1, 5]
    static let sha256WithRSA: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 1, 11]
    static let ecdsaWithSHA256: ASN1ObjectIdentifier = [1, 2, 840, 10045, 4, 3, 2]
    static let contentTypeAttribute: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 9, 3]
    static let messageDigestAttribute: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 9, 4]
    private static let contextZero = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)

    /// `SEQUENCE { version, sid, digestAlgorithm, [0] signedAttrs OPTIONAL, signatureAlgorithm,
    /// signature OCTET STRING, [1] unsignedAttrs OPTIONAL }`.
    init(_ node: ASN1Node) throws(AppStoreReceiptError) {
        guard let fields = ReceiptContainer.children(node, .sequence), fields.count >= 5, fields[0].identifier == .integer else {
            throw Self.malformed("is not a SignerInfo SEQUENCE")
        }
        if let sid = ReceiptContainer.children(fields[1], .sequence), sid.count == 2,
            let issuer = try? DistinguishedName(derEncoded: sid[0]),
            sid[1].identifier == .integer, case .primitive(let serial) = sid[1].content
        {
            identifier = .issuerAndSerial(issuer: issuer, serial: serial)
        } else if fields[1].identifier == Self.contextZero, case .primitive(let keyID) = fields[1].content {
            identifier = .subjectKeyIdentifier(keyID)
        } else {
            throw Self.malformed("names its signer neither by issuer and serial number nor by subject key identifier")
        }
        var index = 3
        if fields[index].identifier == Self.contextZero {
            signedAttributes = fields[index]
            index += 1
        } else {
            signedAttributes = nil
        }
        guard index + 1 < fields.count, let digest = Self.algorithm(fields[2]), let signatureOID = Self.algorithm(fields[index]),
            let signature = try? ASN1OctetString(berEncoded: fields[index + 1])
        else {
            throw Self.malformed("has no digest algorithm, signature algorithm and signature")
        }
        switch (digest, signatureOID) {
        case (Self.sha1, Self.rsaEncryption), (Self.sha1, Self.sha1WithRSA): algorithm = .sha1WithRSAEncryption
        case (Self.sha256, Self.rsaEncryption), (Self.sha256, Self.sha256WithRSA): algorithm = .sha256WithRSAEncryption
        case (Self.sha256, Self.ecdsaWithSHA256): algorithm = .ecdsaWithSHA256
        default:
            throw AppStoreReceiptError(
                .receiptSignatureMismatch,
                "The receipt is signed with digest \(AppStoreVerificationError.excerpt(digest.description)) and signature algorithm "
                    + "\(AppStoreVerificationError.excerpt(signatureOID.description)); accepted are RSA with SHA-1 or SHA-256, "
                    + "as Apple signs receipts, and ECDSA P-256 with SHA-256.")
        }
        self.digest = digest
        self.signature = signature.bytes
    }

    /// Whether `certificate` is the one this signer names.
    func identifies(_ certificate: Certificate) -> Bool {
        switch identifier {
        case .issuerAndSerial(let issuer, let serial):
            return certificate.issuer == issuer && Self.magnitude(certificate.serialNumber.bytes).elementsEqual(Self.magnitude(serial))
        case .subjectKeyIdentifier(let keyID):
            guard let extensionKeyID = try? certificate.extensions.subjectKeyIdentifier?.keyIdentifier else { return false }
            return extensionKeyID.elementsEqual(keyID)
        }
    }

    /// What the signature covers: the content itself, or — with signed attributes — their DER as
    /// a SET (RFC 5652 §5.4), once their message digest is found to be the content's and their
    /// content type data.
    func signedBytes(content: ArraySlice<UInt8>) throws(AppStoreReceiptError) -> [UInt8] {
        guard let signedAttributes else { return Array(content) }
        guard let attributes = ReceiptContainer.children(signedAttributes, Self.contextZero) else {
            throw Self.malformed("has signed attributes that are not a SET")
        }
        var contentType: ASN1ObjectIdentifier?
        var messageDigest: ArraySlice<UInt8>?
        for attribute in attributes {
            guard let parts = ReceiptContainer.children(attribute, .sequence), parts.count == 2,
                let type = try? ASN1ObjectIdentifier(berEncoded: parts[0]),
                let values = ReceiptContainer.children(parts[1], .set), values.count == 1
            else { throw Self.malformed("has a signed attribute that is not SEQUENCE { type, SET OF value }") }
            switch type {
            case Self.contentTypeAttribute: contentType = try? ASN1ObjectIdentifier(berEncoded: values[0])
            case Self.messageDigestAttribute: messageDigest = (try? ASN1OctetString(berEncoded: values[0]))?.bytes
            default: continue
            }
        }
        let expected: [UInt8] = digest == Self.sha1 ? Array(Insecure.SHA1.hash(data: content)) : Array(SHA256.hash(data: content))
        guard contentType == ReceiptContainer.data, let messageDigest, messageDigest.elementsEqual(expected) else {
            throw AppStoreReceiptError(
                .receiptSignatureMismatch, "The receipt's signed attributes do not name its content (content type data, and its message digest).")
        }
        // The signature covers the attributes as a DER SET: the same bytes with the SET tag.
        return [0x31] + signedAttributes.encodedBytes.dropFirst()
    }

    /// A positive INTEGER's bytes without the 0x00 DER puts before a first byte ≥ 0x80, so that
    /// a serial number compares equal however it was kept.
    private static func magnitude(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var bytes = bytes
        while bytes.count > 1, bytes.first == 0 { bytes = bytes.dropFirst() }
        return bytes
    }

    /// The OID of an AlgorithmIdentifier SEQUENCE.
    private static func algorithm(_ node: ASN1Node) -> ASN1ObjectIdentifier? {
        guard let parts = ReceiptContainer.children(node, .sequence), let first = parts.first else { return nil }
        return try? ASN1ObjectIdentifier(berEncoded: first)
    }

    private static func malformed(_ problem: String) -> AppStoreReceiptError {
        AppStoreReceiptError(.receiptSignatureMismatch, "The receipt's signer \(problem) (RFC 5652 §5.3).")
    }
}

/// Accepts only signer → an intermediate marked as Apple's WWDR CA → a configured root, the shape
/// of Apple's receipt chain; without it a certificate issued straight by a root would do.
private struct ReceiptChainShapePolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "Apple's receipt chain is signer, intermediate, root; this one has \(chain.count) certificates")
        }
        guard chain[1].extensions.contains(where: { $0.oid == AppleOID.wwdrIntermediate }) else {
            return .failsToMeetPolicy(reason: "the intermediate lacks Apple's WWDR extension 1.2.840.113635.100.6.2.1")
        }
        return .meetsPolicy
    }
}
