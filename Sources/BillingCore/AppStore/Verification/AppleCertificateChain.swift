import Crypto
import Foundation
internal import SwiftASN1
@_spi(FixedExpiryValidationTime) internal import X509

/// The extensions by which Apple marks the certificates that sign App Store data.
enum AppleOID {
    /// On the Apple Worldwide Developer Relations intermediate CA.
    static let wwdrIntermediate: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    /// On the App Store's receipt-signing leaf.
    static let receiptSigner: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
}

/// Checks a JWS's `x5c` chain the way Apple's `ChainVerifier` does, offline: leaf and intermediate
/// must chain under RFC 5280 to one of the configured roots, carry Apple's marker extensions, and
/// be valid at the payload's `signedDate`. Yields the leaf's P-256 key, which signed the JWS.
///
/// The rules, in the order they are checked (the first that fails names the error):
/// 1. `x5c` holds exactly three certificates (leaf, intermediate, root) → `invalid_chain_length`;
/// 2. each is standard base64 of a DER X.509 certificate → `invalid_certificate`;
/// 3. leaf and intermediate are valid at `signedDate` → `certificate_expired_at_signed_date`;
/// 4. the intermediate carries 1.2.840.113635.100.6.2.1, the leaf 1.2.840.113635.100.6.11.1 →
///    `missing_apple_oid`;
/// 5. swift-certificates' `Verifier` with `RFC5280Policy` at `signedDate` builds leaf →
///    intermediate → a configured root (never the root the JWS brings) → `untrusted_chain`;
/// 6. the leaf's key is P-256, as ES256 needs → `invalid_certificate`.
///
/// Step 5 is the costly one (two signature checks); its outcome is cached per (leaf, intermediate)
/// together with the window in which every certificate of the verified chain is valid, and reused
/// only for a `signedDate` inside that window, so the cache never changes an answer.
struct AppleCertificateChain: Sendable {
    private let roots: CertificateStore
    private let cache: VerifiedChainCache

    init(rootCertificates: [[UInt8]]) throws(AppStoreVerificationError) {
        guard !rootCertificates.isEmpty else {
            throw AppStoreVerificationError(
                .invalidCertificate, "No root certificate is configured; pass Apple's (AppleRootCertificates.g3).")
        }
        var parsed: [Certificate] = []
        for (index, der) in rootCertificates.enumerated() {
            guard let certificate = try? Certificate(derEncoded: der) else {
                throw AppStoreVerificationError(
                    .invalidCertificate,
                    "Configured root certificate #\(index + 1) (\(der.count) bytes) is not a DER X.509 certificate; "
                        + "pass the DER bytes of Apple's root (AppleRootCertificates.g3), not PEM text.")
            }
            parsed.append(certificate)
        }
        roots = CertificateStore(parsed)
        cache = VerifiedChainCache(capacity: 32)
    }

    /// The leaf's key, once the chain in `x5c` is verified at `signedDate` (Unix milliseconds).
    func leafKey(x5c: SignedDataFields.Header.X5C, signedDate: Int64) async throws(AppStoreVerificationError)
        -> P256.Signing.PublicKey
    {
        let encoded: [String]
        switch x5c {
        case .absent:
            throw AppStoreVerificationError(
                .invalidChainLength,
                "The JWS header has no x5c certificate chain; Apple's signed data carries three (leaf, intermediate, root).")
        case .notAnArray:
            throw AppStoreVerificationError(
                .invalidChainLength, "The JWS header's x5c is not an array of certificates; Apple sends three (leaf, intermediate, root).")
        case .malformed(let count):
            guard count == 3 else { throw Self.chainLengthError(count) }
            throw AppStoreVerificationError(.invalidCertificate, "The JWS header's x5c has an entry that is not a base64 string.")
        case .strings(let strings):
            guard strings.count == 3 else { throw Self.chainLengthError(strings.count) }
            encoded = strings
        }

        let names = ["leaf", "intermediate", "root"]
        var ders: [[UInt8]] = []
        var certificates: [Certificate] = []
        for (index, text) in encoded.enumerated() {
            guard let der = JWSBase64.decode(text, alphabet: .standard),
                let certificate = try? Certificate(derEncoded: der)
            else {
                throw AppStoreVerificationError(
                    .invalidCertificate,
                    "x5c[\(index)] (the \(names[index])) is not standard base64 of a DER X.509 certificate: "
                        + "\(AppStoreVerificationError.excerpt(text, limit: 24)).")
            }
            ders.append(der)
            certificates.append(certificate)
        }
        let leaf = certificates[0]
        let intermediate = certificates[1]
        // certificates[2], the root the JWS brings, is parsed only to report a malformed chain
        // early: trust comes from the configured roots alone.

        let validationTime = Date(timeIntervalSince1970: Double(signedDate) / 1000)
        for (index, certificate) in [leaf, intermediate].enumerated()
        where !(certificate.notValidBefore <= validationTime && validationTime <= certificate.notValidAfter) {
            throw AppStoreVerificationError(
                .certificateExpiredAtSignedDate,
                "The \(names[index]) certificate is valid from \(Self.iso8601(certificate.notValidBefore)) to "
                    + "\(Self.iso8601(certificate.notValidAfter)), which does not include the payload's signedDate "
                    + "\(Self.iso8601(validationTime)) (\(signedDate) ms); the data was not signed while the certificate was valid.")
        }

        guard intermediate.extensions.contains(where: { $0.oid == AppleOID.wwdrIntermediate }) else {
            throw AppStoreVerificationError(
                .missingAppleOID,
                "The intermediate certificate lacks Apple's WWDR extension 1.2.840.113635.100.6.2.1; "
                    + "this chain is not Apple's App Store signing chain.")
        }
        guard leaf.extensions.contains(where: { $0.oid == AppleOID.receiptSigner }) else {
            throw AppStoreVerificationError(
                .missingAppleOID,
                "The leaf certificate lacks Apple's receipt-signing extension 1.2.840.113635.100.6.11.1; "
                    + "this was not signed by the App Store.")
        }

        let cacheKey = VerifiedChainCache.Key(leaf: ders[0], intermediate: ders[1])
        if let key = cache.leafKey(for: cacheKey, at: validationTime) { return key }

        var verifier = Verifier(rootCertificates: roots) {
            RFC5280Policy(fixedExpiryValidationTime: validationTime)
            AppleChainShapePolicy(intermediate: intermediate)
        }
        let chain: [Certificate]
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate])) {
        case .validCertificate(let validated):
            chain = Array(validated)
        case .couldNotValidate:
            throw AppStoreVerificationError(
                .untrustedChain,
                "The x5c chain does not verify to a configured root certificate (RFC 5280, at signedDate "
                    + "\(Self.iso8601(validationTime))); the root a payload brings is never trusted. "
                    + "This is not Apple's data, or the configured roots are wrong.")
        }

        guard let key = P256.Signing.PublicKey(leaf.publicKey) else {
            throw AppStoreVerificationError(
                .invalidCertificate, "The leaf certificate's key is not an EC P-256 key, which ES256 requires.")
        }
        cache.insert(
            key, for: cacheKey,
            validFrom: chain.map(\.notValidBefore).max() ?? leaf.notValidBefore,
            validUntil: chain.map(\.notValidAfter).min() ?? leaf.notValidAfter)
        return key
    }

    private static func chainLengthError(_ count: Int) -> AppStoreVerificationError {
        AppStoreVerificationError(
            .invalidChainLength,
            "The JWS header's x5c holds \(count) certificate\(count == 1 ? "" : "s"); Apple's holds exactly three "
                + "(leaf, intermediate, root).")
    }

    static func iso8601(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}

/// Accepts only a chain of exactly leaf → the JWS's intermediate → a configured root, as Apple's
/// library requires; without it the `Verifier` could settle for a leaf issued straight by a root.
private struct AppleChainShapePolicy: VerifierPolicy {
    let intermediate: Certificate
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "Apple's chain is leaf, intermediate, root; this one has \(chain.count) certificates")
        }
        guard chain[1] == intermediate else {
            return .failsToMeetPolicy(reason: "the chain does not go through the JWS's intermediate certificate")
        }
        return .meetsPolicy
    }
}
