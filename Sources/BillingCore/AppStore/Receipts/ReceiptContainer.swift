internal import SwiftASN1

/// The layers of an app receipt, outside in: base64 → PKCS#7 `ContentInfo` of type signed data
/// (RFC 5652 §3, §5.1) → its encapsulated content of type data, an OCTET STRING → a `SET OF
/// ReceiptAttribute` (`SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`), where an
/// in-app purchase (type 17) holds another such SET in its value.
///
/// Everything goes through swift-asn1's BER parser, which reads DER too: receipts made by
/// Xcode's StoreKit testing use BER indefinite lengths and a constructed OCTET STRING. That parser
/// refuses nesting deeper than 50 levels, and this walk descends a fixed number of layers (never
/// as deep as the input asks), so hostile input costs time linear in its size and nothing more.
enum ReceiptContainer {
    static let signedData: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 2]
    static let data: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 1]
    /// `[0]`, the explicit tag around a ContentInfo's content and an encapsulated content.
    private static let contextZero = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)

    /// One `ReceiptAttribute`: its type and the bytes of its value OCTET STRING.
    struct Attribute {
        let type: Int64
        let value: ArraySlice<UInt8>
    }

    /// The parts of a receipt's SignedData (RFC 5652 §5.1) that reading and verifying it need,
    /// still encoded: found by one parse, checked by ``AppStoreReceiptSignature``.
    struct SignedData {
        /// The encapsulated content: the receipt's attribute SET, which the signature covers.
        let content: ArraySlice<UInt8>
        /// `[0] certificates`, each an encoded certificate (or another choice), as the receipt has them.
        let certificates: [ASN1Node]
        /// `signerInfos`, each a SignerInfo SEQUENCE (or whatever the receipt holds there).
        let signerInfos: [ASN1Node]
    }

    /// `[0]`, the implicit tag of SignedData's certificates.
    private static let certificatesTag = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)

    /// The SignedData of the PKCS#7 in `der`: its content, certificates and signers. Nothing is
    /// verified here; a receipt with no certificates or signers reads (it is then unverified).
    static func signedData(of der: [UInt8]) throws(AppStoreReceiptError) -> SignedData {
        let root: ASN1Node
        do {
            root = try BER.parse(der)
        } catch {
            throw .invalid("The receipt \(describe(error)); an app receipt is a PKCS#7 container in BER or DER.")
        }
        guard let contentInfo = children(root, .sequence) else {
            throw .invalid("The receipt is an ASN.1 \(name(root.identifier)), not a PKCS#7 ContentInfo SEQUENCE.")
        }
        guard let typeNode = contentInfo.first, let contentType = try? ASN1ObjectIdentifier(berEncoded: typeNode) else {
            throw .invalid(
                "The receipt is an ASN.1 SEQUENCE that does not start with a content type OID, so it is not PKCS#7 "
                    + "(a certificate or a key, perhaps?).")
        }
        guard contentType == signedData else {
            throw .invalid("The receipt is PKCS#7 of content type \(oid(contentType)), not signed data (\(signedData)).")
        }
        guard contentInfo.count >= 2, let explicit = children(contentInfo[1], contextZero), explicit.count == 1,
            let signed = children(explicit[0], .sequence)
        else {
            throw .invalid("The receipt's PKCS#7 signed data has no SignedData SEQUENCE inside its [0] content.")
        }
        // SignedData: version, digestAlgorithms, encapContentInfo, [0] certificates, [1] crls, signerInfos.
        guard signed.count >= 3, signed[0].identifier == .integer, signed[1].identifier == .set,
            let encapsulated = children(signed[2], .sequence)
        else {
            throw .invalid(
                "The receipt's SignedData is not SEQUENCE { version, digestAlgorithms, encapContentInfo, … } (RFC 5652 §5.1).")
        }
        guard let eTypeNode = encapsulated.first, let eContentType = try? ASN1ObjectIdentifier(berEncoded: eTypeNode) else {
            throw .invalid("The receipt's encapsulated content has no content type OID.")
        }
        guard eContentType == data else {
            throw .invalid("The receipt signs content of type \(oid(eContentType)), not data (\(data)).")
        }
        guard encapsulated.count >= 2, let explicitContent = children(encapsulated[1], contextZero), explicitContent.count == 1
        else {
            throw .invalid("The receipt has no receipt content: its signed data is detached (no [0] eContent).")
        }
        let content: ArraySlice<UInt8>
        do {
            // Primitive in DER; constructed from chunks in Xcode's BER, which this flattens.
            content = try ASN1OctetString(berEncoded: explicitContent[0]).bytes
        } catch {
            throw .invalid("The receipt's content is not an OCTET STRING.")
        }
        // After encapContentInfo: [0] certificates and [1] crls, both optional, then signerInfos.
        let rest = signed.dropFirst(3)
        let certificates = rest.first.flatMap { children($0, certificatesTag) } ?? []
        let signerInfos = rest.last.flatMap { children($0, .set) } ?? []
        return SignedData(content: content, certificates: certificates, signerInfos: signerInfos)
    }

    /// The attributes of the `SET OF ReceiptAttribute` encoded in `bytes`, in their order.
    /// - Parameter place: what the bytes are, to begin messages with ("The receipt's content").
    static func attributes(in bytes: ArraySlice<UInt8>, place: String) throws(AppStoreReceiptError) -> [Attribute] {
        let root: ASN1Node
        do {
            root = try BER.parse(bytes)
        } catch {
            throw .invalid("\(place) \(describe(error)); it should be a SET of receipt attributes.")
        }
        guard let elements = children(root, .set) else {
            throw .invalid("\(place) is an ASN.1 \(name(root.identifier)), not a SET of receipt attributes.")
        }
        var attributes: [Attribute] = []
        attributes.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard let fields = children(element, .sequence), fields.count == 3,
                let type = try? Int64(berEncoded: fields[0]), fields[1].identifier == .integer,
                let value = try? ASN1OctetString(berEncoded: fields[2])
            else {
                throw .invalid(
                    "\(place): attribute \(index + 1) is not SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }.")
            }
            attributes.append(Attribute(type: type, value: value.bytes))
        }
        return attributes
    }

    /// The text of an attribute value that holds a UTF8String or an IA5String.
    /// - Parameter what: the attribute, for the message ("In-app purchase 2's product id (1702)").
    static func string(_ value: ArraySlice<UInt8>, _ what: String) throws(AppStoreReceiptError) -> String {
        let bytes: ArraySlice<UInt8>
        do {
            let node = try BER.parse(value)
            switch node.identifier {
            case .utf8String: bytes = try ASN1UTF8String(berEncoded: node).bytes
            case .ia5String: bytes = try ASN1IA5String(berEncoded: node).bytes
            default: throw ASN1Error.unexpectedFieldType(node.identifier)
            }
        } catch {
            throw .invalid("\(what) is not a UTF8String or IA5String.")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .invalid("\(what) is not valid UTF-8.")
        }
        return text
    }

    /// Unix milliseconds of an attribute value that holds an RFC 3339 date as a string; nil for
    /// the empty string, which Apple writes when there is no such date.
    static func date(_ value: ArraySlice<UInt8>, _ what: String) throws(AppStoreReceiptError) -> Int64? {
        let text = try string(value, what)
        if text.isEmpty { return nil }
        guard let milliseconds = ReceiptDate.milliseconds(text) else {
            throw .invalid("\(what) is not an RFC 3339 date: \(AppStoreVerificationError.excerpt(text)).")
        }
        return milliseconds
    }

    // MARK: - Node helpers

    /// The children of `node` when it is constructed with `identifier`.
    static func children(_ node: ASN1Node, _ identifier: ASN1Identifier) -> [ASN1Node]? {
        guard node.identifier == identifier, case .constructed(let nodes) = node.content else { return nil }
        return Array(nodes)
    }

    /// A short name for an ASN.1 tag, for messages.
    private static func name(_ identifier: ASN1Identifier) -> String {
        switch identifier {
        case .sequence: "SEQUENCE"
        case .set: "SET"
        case .integer: "INTEGER"
        case .octetString: "OCTET STRING"
        case .objectIdentifier: "OBJECT IDENTIFIER"
        default: "\(identifier.tagClass) tag \(identifier.tagNumber)"
        }
    }

    /// An OID from the input, for messages: dotted, at most 40 characters.
    private static func oid(_ oid: ASN1ObjectIdentifier) -> String {
        AppStoreVerificationError.excerpt(oid.description)
    }

    /// What swift-asn1's refusal says about the bytes, as the end of a sentence.
    private static func describe(_ error: any Error) -> String {
        switch (error as? ASN1Error)?.code {
        case .truncatedASN1Field?:
            "ends in the middle of an ASN.1 element (cut short, or not ASN.1 at all)"
        case .unsupportedFieldLength?:
            "uses an ASN.1 length that BER does not allow"
        default:
            "is not well-formed ASN.1 (malformed, followed by stray bytes, or nested more than 50 levels deep)"
        }
    }
}
