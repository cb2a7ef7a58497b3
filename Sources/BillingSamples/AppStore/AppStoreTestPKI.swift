import BillingCore
import Crypto
import Foundation
internal import SwiftASN1
internal import X509

/// A stand-in for Apple's App Store signing PKI: a root CA, an intermediate CA marked with Apple's
/// WWDR extension and a leaf marked as a receipt signer, in the shape of Apple's own chain; and a
/// signer of compact JWS with that chain in `x5c`.
///
/// For tests, and for `billingd appstore trigger` in local mode, where the verifier is configured
/// with this PKI's ``rootDER`` as its root (and local mode's receipt verifier too, so that a
/// receipt signed with ``receiptSigner`` verifies there). Options make the faulty chains tests need; the lower
/// level ``sign(payload:header:signature:)`` forges anything else.
public struct AppStoreTestPKI: Sendable {
    public struct Options: Sendable {
        /// The leaf's validity, Unix milliseconds (certificates keep whole seconds).
        public var leafNotValidBefore: Int64
        public var leafNotValidAfter: Int64
        /// Whether the leaf carries 1.2.840.113635.100.6.11.1 (receipt signer).
        public var leafHasAppleOID: Bool
        /// Whether the intermediate carries 1.2.840.113635.100.6.2.1 (Apple WWDR).
        public var intermediateHasAppleOID: Bool
        /// Distinguishes the names of this PKI's certificates from another's (e.g. an attacker's).
        public var name: String

        /// A chain valid from 2001 to 2099, both OIDs present.
        public init(
            leafNotValidBefore: Int64 = AppStoreTestPKI.defaultNotValidBefore,
            leafNotValidAfter: Int64 = AppStoreTestPKI.defaultNotValidAfter,
            leafHasAppleOID: Bool = true, intermediateHasAppleOID: Bool = true, name: String = "billingd Test"
        ) {
            self.leafNotValidBefore = leafNotValidBefore
            self.leafNotValidAfter = leafNotValidAfter
            self.leafHasAppleOID = leafHasAppleOID
            self.intermediateHasAppleOID = intermediateHasAppleOID
            self.name = name
        }
    }

    /// How the third segment of a JWS is made.
    public enum Signature: Sendable {
        /// ES256 with the leaf's key, raw r‖s (what Apple does).
        case es256
        /// HMAC-SHA256 with `key` (HS256), e.g. the leaf's public key bytes for a key-confusion attack.
        case hmacSHA256(key: [UInt8])
        /// These bytes as they are; `[]` for `alg: none`.
        case raw([UInt8])
    }

    /// 2001-01-01T00:00:00Z in Unix milliseconds.
    public static let defaultNotValidBefore: Int64 = 978_307_200_000
    /// 2099-01-01T00:00:00Z in Unix milliseconds.
    public static let defaultNotValidAfter: Int64 = 4_070_908_800_000

    public let rootDER: [UInt8]
    public let intermediateDER: [UInt8]
    public let leafDER: [UInt8]
    private let leafKey: P256.Signing.PrivateKey

    /// The leaf's public key, the one a verifier checks signatures with.
    public var leafPublicKey: P256.Signing.PublicKey { leafKey.publicKey }

    /// The `x5c` chain, leaf first, as DER.
    public var chainDER: [[UInt8]] { [leafDER, intermediateDER, rootDER] }

    /// Generates fresh keys and certificates.
    public init(options: Options = Options()) throws(AppStoreTestPKIError) {
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        let caFrom = Self.date(Self.defaultNotValidBefore)
        let caUntil = Self.date(Self.defaultNotValidAfter)
        do {
            let rootName = try Self.name(options.name + " Root CA")
            let intermediateName = try Self.name(options.name + " Worldwide Developer Relations CA")
            let leafName = try Self.name(options.name + " App Store Receipt Signing")
            let rootPublic = Certificate.PublicKey(rootKey.publicKey)
            let intermediatePublic = Certificate.PublicKey(intermediateKey.publicKey)
            let leafPublic = Certificate.PublicKey(leafKey.publicKey)
            let rootKeyID = SubjectKeyIdentifier(hash: rootPublic)
            let intermediateKeyID = SubjectKeyIdentifier(hash: intermediatePublic)

            let root = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: rootPublic, notValidBefore: caFrom, notValidAfter: caUntil,
                issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    rootKeyID
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                },
                issuerPrivateKey: .init(rootKey))
            let intermediate = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: intermediatePublic, notValidBefore: caFrom,
                notValidAfter: caUntil, issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    AuthorityKeyIdentifier(keyIdentifier: rootKeyID.keyIdentifier)
                    intermediateKeyID
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    if options.intermediateHasAppleOID { Self.marker(Self.wwdrIntermediateOID) }
                },
                issuerPrivateKey: .init(rootKey))
            let leaf = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: leafPublic,
                notValidBefore: Self.date(options.leafNotValidBefore), notValidAfter: Self.date(options.leafNotValidAfter),
                issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    AuthorityKeyIdentifier(keyIdentifier: intermediateKeyID.keyIdentifier)
                    SubjectKeyIdentifier(hash: leafPublic)
                    Critical(KeyUsage(digitalSignature: true))
                    if options.leafHasAppleOID { Self.marker(Self.receiptSignerOID) }
                },
                issuerPrivateKey: .init(intermediateKey))
            rootDER = try Self.der(root)
            intermediateDER = try Self.der(intermediate)
            leafDER = try Self.der(leaf)
        } catch {
            throw AppStoreTestPKIError(
                .invalidOptions, "Could not build the test certificates (are the validity dates between years 1 and 9999?): \(error)")
        }
        self.leafKey = leafKey
    }

    // MARK: - Signing

    /// A compact JWS of `payload` with header `{"alg":"ES256","x5c":[leaf,intermediate,root]}`, as Apple signs.
    public func sign(payload: [UInt8]) -> String {
        sign(payload: payload, header: header())
    }

    /// A JOSE header in Apple's shape; `x5c` defaults to this PKI's chain (pass DER to forge another).
    public func header(alg: String = "ES256", x5c certificates: [[UInt8]]? = nil) -> [String: Any] {
        ["alg": alg, "x5c": (certificates ?? chainDER).map { JWSBase64.encode($0, alphabet: .standard) }]
    }

    /// A compact JWS with any header and any signature, to forge what a verifier must refuse.
    public func sign(payload: [UInt8], header: [String: Any], signature: Signature = .es256) -> String {
        // Sorted keys and unescaped slashes: deterministic, and x5c's base64 reads as it is.
        let headerJSON =
            (try? JSONSerialization.data(withJSONObject: header, options: [.sortedKeys, .withoutEscapingSlashes]))
            .map(Array.init) ?? Array("{}".utf8)
        let signingInput = JWSBase64.encode(headerJSON, alphabet: .url) + "." + JWSBase64.encode(payload, alphabet: .url)
        let signatureBytes: [UInt8]
        switch signature {
        case .es256:
            // Signing with a valid P-256 key over in-memory bytes does not fail.
            signatureBytes = (try? Array(leafKey.signature(for: Array(signingInput.utf8)).rawRepresentation)) ?? []
        case .hmacSHA256(let key):
            signatureBytes = Array(HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: SymmetricKey(data: key)))
        case .raw(let bytes):
            signatureBytes = bytes
        }
        return signingInput + "." + JWSBase64.encode(signatureBytes, alphabet: .url)
    }

    /// Signs StoreKit 1 sample receipts (``AppStoreSampleReceipt``) with the leaf's key and this
    /// chain, ECDSA P-256 with SHA-256: a receipt a verifier that trusts ``rootDER`` accepts.
    public var receiptSigner: AppStoreSampleReceipt.Signer {
        let key = leafKey
        return AppStoreSampleReceipt.Signer(certificates: chainDER, signerCertificate: leafDER, algorithm: .ecdsaSHA256) { content in
            // Signing with a valid P-256 key over in-memory bytes does not fail.
            (try? Array(key.signature(for: content).derRepresentation)) ?? []
        }
    }

    // MARK: - Serialization

    /// PEM blocks: the leaf, intermediate and root certificates, then the leaf's PKCS#8 private
    /// key, so that local mode can keep one PKI (in its database) across runs.
    public func serialized() -> String {
        [
            PEMDocument(type: "CERTIFICATE", derBytes: leafDER),
            PEMDocument(type: "CERTIFICATE", derBytes: intermediateDER),
            PEMDocument(type: "CERTIFICATE", derBytes: rootDER),
            PEMDocument(type: "PRIVATE KEY", derBytes: Array(leafKey.derRepresentation)),
        ].map(\.pemString).joined(separator: "\n") + "\n"
    }

    /// Reads what ``serialized()`` wrote; checks the shape and that the key is the leaf's.
    public init(serialized: String) throws(AppStoreTestPKIError) {
        guard let documents = try? PEMDocument.parseMultiple(pemString: serialized),
            documents.map(\.discriminator) == ["CERTIFICATE", "CERTIFICATE", "CERTIFICATE", "PRIVATE KEY"]
        else {
            throw AppStoreTestPKIError(
                .invalidSerialization,
                "A serialized test PKI is four PEM blocks: three CERTIFICATE (leaf, intermediate, root) and a PRIVATE KEY.")
        }
        guard let leaf = try? Certificate(derEncoded: documents[0].derBytes),
            (try? Certificate(derEncoded: documents[1].derBytes)) != nil,
            (try? Certificate(derEncoded: documents[2].derBytes)) != nil
        else {
            throw AppStoreTestPKIError(.invalidSerialization, "A CERTIFICATE block of the serialized test PKI is not DER X.509.")
        }
        guard let key = try? P256.Signing.PrivateKey(derRepresentation: documents[3].derBytes) else {
            throw AppStoreTestPKIError(.invalidSerialization, "The PRIVATE KEY block of the serialized test PKI is not a P-256 key.")
        }
        guard P256.Signing.PublicKey(leaf.publicKey)?.rawRepresentation == key.publicKey.rawRepresentation else {
            throw AppStoreTestPKIError(.invalidSerialization, "The serialized test PKI's private key is not the leaf certificate's.")
        }
        leafDER = documents[0].derBytes
        intermediateDER = documents[1].derBytes
        rootDER = documents[2].derBytes
        leafKey = key
    }

    // MARK: - Building blocks

    private static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    private static func name(_ commonName: String) throws -> DistinguishedName {
        try DistinguishedName {
            CommonName(commonName)
            OrganizationalUnitName("billingd Test Certification Authority")
            OrganizationName("billingd")
            CountryName("US")
        }
    }

    /// Apple's marker of its Worldwide Developer Relations intermediate CA, written out here rather
    /// than taken from the verifier, so that a wrong OID there fails the tests.
    private static let wwdrIntermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    /// Apple's marker of the App Store's receipt-signing leaf.
    private static let receiptSignerOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]

    /// Apple's marker extensions are non-critical and hold an ASN.1 NULL.
    private static func marker(_ oid: ASN1ObjectIdentifier) -> Certificate.Extension {
        Certificate.Extension(oid: oid, critical: false, value: [0x05, 0x00])
    }

    private static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}

/// Why a test PKI could not be made or read back.
public struct AppStoreTestPKIError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidOptions = "invalid_test_pki_options"
        case invalidSerialization = "invalid_test_pki_serialization"
    }

    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
