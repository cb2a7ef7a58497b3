import BillingCore
internal import SwiftASN1

/// A StoreKit 1 app receipt made here, for tests and local tools: a PKCS#7 SignedData (RFC 5652,
/// OID 1.2.840.113549.1.7.2) whose encapsulated content, of type data (1.2.840.113549.1.7.1), is
/// the receipt's `SET OF ReceiptAttribute` — all DER as the App Store writes it, or as Xcode's
/// StoreKit testing writes it: BER with indefinite lengths and a chunked OCTET STRING outside,
/// definite lengths but unsorted SETs inside.
///
/// Unsigned by default — no certificates and an empty set of signers: a structurally real
/// SignedData that proves nothing, which ``AppStoreReceipt`` reads and ``AppStoreReceiptVerifier``
/// reports as unverified. With a ``Signer`` (a test PKI's, e.g. ``AppStoreTestPKI/receiptSigner``)
/// it is signed the way Apple signs receipts: one SignerInfo naming the signer by issuer and
/// serial number, no signed attributes, the signature over the content, the chain in
/// `certificates`.
public enum AppStoreSampleReceipt {
    /// Who signs a sample receipt: a certificate chain and a key, as a closure.
    public struct Signer: Sendable {
        /// How the SignerInfo names its algorithms.
        public enum Algorithm: Sendable {
            /// Digest SHA-1, signature `rsaEncryption`: Apple's older receipts.
            case rsaSHA1
            /// Digest SHA-256, signature `rsaEncryption`: Apple's newer receipts.
            case rsaSHA256
            /// Digest SHA-256, signature `ecdsa-with-SHA256` (DER): a P-256 test PKI.
            case ecdsaSHA256
        }

        /// DER certificates the receipt carries, in order (Apple's: signer, intermediate, root).
        public var certificates: [[UInt8]]
        /// DER of the signer's certificate, whose issuer and serial number the SignerInfo names.
        public var signerCertificate: [UInt8]
        public var algorithm: Algorithm
        /// The signature of the bytes given (the receipt's content) by the signer's key.
        public var sign: @Sendable ([UInt8]) -> [UInt8]

        public init(
            certificates: [[UInt8]], signerCertificate: [UInt8], algorithm: Algorithm, sign: @escaping @Sendable ([UInt8]) -> [UInt8]
        ) {
            self.certificates = certificates
            self.signerCertificate = signerCertificate
            self.algorithm = algorithm
            self.sign = sign
        }
    }

    /// The creation date (attribute 12) samples carry unless told otherwise: 2026-01-01T00:00:00Z.
    public static let defaultCreationDate: Int64 = 1_767_225_600_000

    /// The receipt's bytes; base64 them to send them as an app would.
    ///
    /// Each purchase is written with attributes 1701 (quantity 1), 1702, 1703, 1705 (left out
    /// when nil), and 1704, 1706, 1708, 1712 (an empty string when nil, as Apple writes "none").
    /// Dates are written in whole seconds, as Apple writes them: milliseconds are dropped.
    /// DER orders every SET by encoding (X.690 §11.6), so in DER the purchases read back in that
    /// order, as in the App Store's receipts; in BER they keep the order given, as in Xcode's.
    /// - Parameters:
    ///   - receiptType: attribute 0; Apple writes `Production`, `ProductionSandbox` or `Xcode`.
    ///   - indefiniteLength: BER as Xcode writes it, rather than DER.
    ///   - createdAt: attribute 12, the time a verifier checks the signer's chain at.
    ///   - signer: signs the receipt; nil leaves it unsigned.
    public static func make(
        bundleID: String, inApp: [AppStoreReceipt.InAppPurchase], receiptType: String = "ProductionSandbox",
        indefiniteLength: Bool = false, createdAt: Int64 = defaultCreationDate, signer: Signer? = nil
    ) -> [UInt8] {
        var attributes: [Element] = [
            attribute(0, .utf8(receiptType)),
            attribute(2, .utf8(bundleID)),
            attribute(3, .utf8("1")),
            attribute(12, .date(createdAt)),
        ]
        for purchase in inApp {
            var fields: [Element] = [
                attribute(1701, .integer(1)),
                attribute(1702, .utf8(purchase.productID)),
                attribute(1703, .utf8(purchase.transactionID)),
                attribute(1704, .date(purchase.purchaseDate)),
                attribute(1706, .date(purchase.originalPurchaseDate)),
                attribute(1708, .date(purchase.expiresDate)),
                attribute(1712, .date(purchase.cancellationDate)),
            ]
            if let original = purchase.originalTransactionID {
                fields.append(attribute(1705, .utf8(original)))
            }
            attributes.append(attribute(17, .constructed(tag: set, fields)))
        }
        // Inside, definite lengths in both forms; sorted SETs only in DER.
        let receipt = encode(.constructed(tag: set, attributes), indefinite: false, sorted: !indefiniteLength)

        // Xcode's BER splits the OCTET STRING into a constructed one of chunks (1000 bytes, as CER does).
        let chunks = stride(from: 0, to: receipt.count, by: 1000).map { Array(receipt[$0..<min($0 + 1000, receipt.count)]) }
        let content: Element = indefiniteLength ? .constructed(tag: 0x24, chunks.map(Element.octetString)) : .octetString(receipt)
        var signedData: [Element] = [.integer(1)]
        if let signer {
            let (digest, signature) = algorithms(signer.algorithm)
            let digestAlgorithm: Element = .constructed(tag: sequence, [.oid(digest), .primitive(tag: 0x05, [])])
            // ECDSA's AlgorithmIdentifier has no parameters; RSA's has NULL.
            let signatureAlgorithm: Element = .constructed(
                tag: sequence, signer.algorithm == .ecdsaSHA256 ? [.oid(signature)] : [.oid(signature), .primitive(tag: 0x05, [])])
            let signerInfo: Element = .constructed(tag: sequence, [
                .integer(1),
                .constructed(tag: sequence, issuerAndSerialNumber(signer.signerCertificate).map(Element.raw)),
                digestAlgorithm,
                signatureAlgorithm,
                .octetString(signer.sign(receipt)),
            ])
            signedData += [
                .constructed(tag: set, [digestAlgorithm]),
                .constructed(tag: sequence, [.oid(data), .constructed(tag: contextZero, [content])]),
                .constructed(tag: contextZero, signer.certificates.map(Element.raw)),  // [0] IMPLICIT certificates
                .constructed(tag: set, [signerInfo]),
            ]
        } else {
            signedData += [
                .constructed(tag: set, [.constructed(tag: sequence, [.oid(sha256), .primitive(tag: 0x05, [])])]),
                .constructed(tag: sequence, [.oid(data), .constructed(tag: contextZero, [content])]),
                .constructed(tag: set, []),  // signerInfos: none
            ]
        }
        let contentInfo: Element = .constructed(
            tag: sequence, [.oid(signedDataType), .constructed(tag: contextZero, [.constructed(tag: sequence, signedData)])])
        return encode(contentInfo, indefinite: indefiniteLength, sorted: !indefiniteLength)
    }

    // MARK: - A small BER/DER writer

    /// An ASN.1 element before encoding.
    private indirect enum Element {
        case primitive(tag: UInt8, [UInt8])
        case constructed(tag: UInt8, [Element])
        /// An OCTET STRING holding the encoding of an element, as a receipt attribute's value.
        case encapsulated(Element)
        /// An element already encoded (a certificate, a name), written as it is.
        case raw([UInt8])

        static func octetString(_ bytes: [UInt8]) -> Element { .primitive(tag: 0x04, bytes) }
        static func utf8(_ text: String) -> Element { .primitive(tag: 0x0c, Array(text.utf8)) }
        /// An IA5String RFC 3339 date, empty for nil.
        static func date(_ milliseconds: Int64?) -> Element {
            .primitive(tag: 0x16, Array((milliseconds.map(ReceiptDate.text) ?? "").utf8))
        }

        /// Minimal two's complement, big-endian.
        static func integer(_ value: Int64) -> Element {
            var bytes = withUnsafeBytes(of: value.bigEndian, Array.init)
            while bytes.count > 1, (bytes[0] == 0x00 && bytes[1] & 0x80 == 0) || (bytes[0] == 0xff && bytes[1] & 0x80 != 0) {
                bytes.removeFirst()
            }
            return .primitive(tag: 0x02, bytes)
        }

        static func oid(_ arcs: [UInt64]) -> Element {
            var bytes: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
            for arc in arcs.dropFirst(2) {
                var groups: [UInt8] = [UInt8(arc & 0x7f)]
                var rest = arc >> 7
                while rest > 0 {
                    groups.insert(UInt8(rest & 0x7f) | 0x80, at: 0)
                    rest >>= 7
                }
                bytes += groups
            }
            return .primitive(tag: 0x06, bytes)
        }
    }

    private static let sequence: UInt8 = 0x30
    private static let set: UInt8 = 0x31
    private static let contextZero: UInt8 = 0xa0
    private static let signedDataType: [UInt64] = [1, 2, 840, 113_549, 1, 7, 2]
    private static let data: [UInt64] = [1, 2, 840, 113_549, 1, 7, 1]
    private static let sha256: [UInt64] = [2, 16, 840, 1, 101, 3, 4, 2, 1]
    private static let sha1: [UInt64] = [1, 3, 14, 3, 2, 26]
    private static let rsaEncryption: [UInt64] = [1, 2, 840, 113_549, 1, 1, 1]
    private static let ecdsaWithSHA256: [UInt64] = [1, 2, 840, 10045, 4, 3, 2]

    /// The digest and signature algorithm OIDs a SignerInfo names, as Apple writes them for RSA.
    private static func algorithms(_ algorithm: Signer.Algorithm) -> (digest: [UInt64], signature: [UInt64]) {
        switch algorithm {
        case .rsaSHA1: (sha1, rsaEncryption)
        case .rsaSHA256: (sha256, rsaEncryption)
        case .ecdsaSHA256: (sha256, ecdsaWithSHA256)
        }
    }

    /// The encoded issuer Name and serialNumber INTEGER of a DER certificate (RFC 5280 §4.1:
    /// `TBSCertificate ::= SEQUENCE { [0] version OPTIONAL, serialNumber, signature, issuer, … }`);
    /// empty for bytes that are not a certificate, which then names no signer.
    private static func issuerAndSerialNumber(_ certificate: [UInt8]) -> [[UInt8]] {
        guard let root = try? DER.parse(certificate), case .constructed(let parts) = root.content,
            let tbs = parts.first(where: { _ in true }), case .constructed(let fields) = tbs.content
        else { return [] }
        var remaining = Array(fields)
        if remaining.first?.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) { remaining.removeFirst() }
        guard remaining.count >= 3 else { return [] }
        return [Array(remaining[2].encodedBytes), Array(remaining[0].encodedBytes)]
    }

    /// `SEQUENCE { type INTEGER, version INTEGER (1), value OCTET STRING }` with `value` encoded inside.
    private static func attribute(_ type: Int64, _ value: Element) -> Element {
        .constructed(tag: sequence, [.integer(type), .integer(1), .encapsulated(value)])
    }

    /// `element` with every constructed element in indefinite-length form (BER) or in definite
    /// form, and each SET's elements in the order DER requires (X.690 §11.6) or as given.
    /// Encapsulated elements always get definite lengths.
    private static func encode(_ element: Element, indefinite: Bool, sorted: Bool) -> [UInt8] {
        switch element {
        case .primitive(let tag, let content):
            return [tag] + length(content.count) + content
        case .encapsulated(let inner):
            let content = encode(inner, indefinite: false, sorted: sorted)
            return [0x04] + length(content.count) + content
        case .raw(let bytes):
            return bytes
        case .constructed(let tag, let children):
            var encoded = children.map { encode($0, indefinite: indefinite, sorted: sorted) }
            if sorted && tag == set { encoded.sort(by: derOrder) }
            let content = encoded.flatMap { $0 }
            return indefinite ? [tag, 0x80] + content + [0x00, 0x00] : [tag] + length(content.count) + content
        }
    }

    /// Definite length: short form below 128, else 0x80 + byte count, then big-endian bytes.
    private static func length(_ count: Int) -> [UInt8] {
        guard count >= 0x80 else { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xff), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// X.690 §11.6: encodings compared as octet strings, the shorter padded with trailing zeros.
    private static func derOrder(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        for index in 0..<max(a.count, b.count) {
            let left = index < a.count ? a[index] : 0
            let right = index < b.count ? b[index] : 0
            if left != right { return left < right }
        }
        return false
    }
}
