@testable import BillingCore
import BillingSamples
import Crypto
import Foundation
import SwiftASN1
import Testing

@Suite("App Store app receipts (StoreKit 1)")
struct AppStoreReceiptTests {
    /// `Fixtures/appstore/<name>.b64`, a base64 receipt as an app would send it.
    static func fixture(_ name: String) throws -> String {
        String(decoding: try Fixtures.data("appstore/\(name).b64"), as: UTF8.self)
    }

    static func milliseconds(_ text: String) throws -> Int64 {
        try #require(ReceiptDate.milliseconds(text))
    }

    // MARK: - Receipts Apple's tools made

    /// Apple's `xcode-app-receipt-empty` (apple/app-store-server-library-swift,
    /// Tests/AppStoreServerLibraryTests/resources/xcode/, MIT): made by Xcode's StoreKit testing,
    /// BER with indefinite lengths and a constructed OCTET STRING. Apple's test expects no id.
    @Test("Apple's empty Xcode receipt (BER, indefinite lengths) reads with no purchases and nothing to look up")
    func appleXcodeEmpty() throws {
        let receipt = try AppStoreReceipt(base64: Self.fixture("app_receipt_xcode_empty"))
        #expect(receipt.bundleID == "com.example.naturelab.backyardbirds.example")
        #expect(receipt.receiptType == "Xcode")
        #expect(receipt.inAppPurchases.isEmpty)
        #expect(receipt.transactionIDForLookup == nil)
    }

    /// `xcode-app-receipt-legacy` from namecare/app-store-server-library-rust (tests/resources/xcode/,
    /// MIT), a port of Apple's library: despite its name a Sandbox receipt the App Store signed in
    /// April 2025 (DER, Apple's WWDR G5 chain), one annual subscription. The port's test expects
    /// 2000000909538865 from `extract_transaction_id_from_app_receipt`.
    @Test("A Sandbox receipt the App Store signed (DER) names its one purchase, the id Apple's library finds")
    func appleSignedSandbox() throws {
        let receipt = try AppStoreReceipt(base64: Self.fixture("app_receipt_sandbox"))
        #expect(receipt.bundleID == "com.XMCodey.apple.ClipTrace")
        #expect(receipt.receiptType == "ProductionSandbox")
        let purchased = try Self.milliseconds("2025-04-30T02:17:37Z")
        #expect(receipt.inAppPurchases == [
            .init(
                transactionID: "2000000909538865", originalTransactionID: "2000000909538865",
                productID: "clip_trace_apple_store_annual_subscribe", purchaseDate: purchased, originalPurchaseDate: purchased,
                expiresDate: try Self.milliseconds("2025-04-30T02:53:37Z"), cancellationDate: nil)
        ])
        #expect(receipt.transactionIDForLookup == "2000000909538865")
    }

    /// From CthulhuDen/ios-receipt-parser (tests/ParserTest.php, MIT): an Xcode receipt with a
    /// subscription bought, upgraded and renewed. Xcode wrote its dates with a `+0300` offset and
    /// left 1705 out of the first purchase (that test's parser fills it in; this one does not).
    @Test("An Xcode receipt with three purchases reads each id, and dates written with a +0300 offset")
    func xcodeThreePurchases() throws {
        let receipt = try AppStoreReceipt(base64: Self.fixture("app_receipt_xcode_three_purchases"))
        #expect(receipt.bundleID == "com.flintcast.evermatch")
        #expect(receipt.receiptType == "Xcode")
        let first = try Self.milliseconds("2020-09-01T13:58:35Z")
        #expect(receipt.inAppPurchases == [
            .init(
                transactionID: "57", originalTransactionID: "56", productID: "ru.sub.vip.week2",
                purchaseDate: try Self.milliseconds("2020-09-01T13:58:42Z"), originalPurchaseDate: first,
                expiresDate: try Self.milliseconds("2020-09-01T13:58:49Z")),
            .init(
                transactionID: "58", originalTransactionID: "56", productID: "ru.sub.vip.month",
                purchaseDate: try Self.milliseconds("2020-09-01T13:58:49Z"), originalPurchaseDate: first,
                expiresDate: try Self.milliseconds("2020-09-01T13:59:19Z")),
            .init(
                transactionID: "56", originalTransactionID: nil, productID: "ru.sub.vip.week2", purchaseDate: first,
                expiresDate: try Self.milliseconds("2020-09-01T13:58:42Z")),
        ])
        #expect(receipt.transactionIDForLookup == "56")
    }

    // MARK: - Samples

    static let purchases: [AppStoreReceipt.InAppPurchase] = [
        .init(
            transactionID: "2000000100000002", originalTransactionID: "2000000100000001", productID: "com.example.radar.pro.monthly",
            purchaseDate: 1_735_689_600_000, originalPurchaseDate: 1_733_011_200_000, expiresDate: 1_738_368_000_000),
        .init(
            transactionID: "2000000100000003", originalTransactionID: "2000000100000003", productID: "com.example.radar.lifetime",
            purchaseDate: 1_704_067_200_000, originalPurchaseDate: 1_704_067_200_000, cancellationDate: 1_717_200_000_000),
        .init(transactionID: "0", originalTransactionID: nil, productID: "com.example.radar.coins"),
    ]

    @Test("A sample receipt reads back as it was made, in DER and in Xcode's indefinite-length BER", arguments: [false, true])
    func sampleRoundTrip(indefiniteLength: Bool) throws {
        let der = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: Self.purchases, indefiniteLength: indefiniteLength)
        #expect(Array(der.prefix(2)) == (indefiniteLength ? [0x30, 0x80] : [0x30, 0x82]))
        let base64 = Data(der).base64EncodedString()
        for receipt in [try AppStoreReceipt(der: der), try AppStoreReceipt(base64: base64)] {
            #expect(receipt.bundleID == "com.example.radar")
            #expect(receipt.receiptType == "ProductionSandbox")
            if indefiniteLength {
                // Xcode's form keeps the purchases in the order given.
                #expect(receipt.inAppPurchases == Self.purchases)
                #expect(receipt.transactionIDForLookup == "2000000100000001")
            } else {
                // DER sorts each SET by encoding, as the App Store's receipts are.
                let byID: (AppStoreReceipt.InAppPurchase, AppStoreReceipt.InAppPurchase) -> Bool = { $0.transactionID < $1.transactionID }
                #expect(receipt.inAppPurchases.sorted(by: byID) == Self.purchases.sorted(by: byID))
            }
        }
    }

    @Test("A sample with a long history reads back in both forms; BER splits its content into 1000-byte chunks")
    func sampleLongHistory() throws {
        let month: Int64 = 2_592_000_000
        let start: Int64 = 1_600_000_000_000
        var history: [AppStoreReceipt.InAppPurchase] = []
        for index in 0..<Int64(200) {
            history.append(
                .init(
                    transactionID: String(2_000_000_100_000_000 + index), originalTransactionID: "2000000100000000",
                    productID: "com.example.radar.pro.monthly", purchaseDate: start + index * month, originalPurchaseDate: start,
                    expiresDate: start + (index + 1) * month))
        }
        for indefiniteLength in [false, true] {
            let der = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: history, indefiniteLength: indefiniteLength)
            let read = try AppStoreReceipt(der: der).inAppPurchases
            #expect(read.sorted { $0.transactionID < $1.transactionID } == history)
        }
        let ber = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: history, indefiniteLength: true)
        // Outer ContentInfo, [0], SignedData, EncapsulatedContentInfo, OID data, [0], then a constructed OCTET STRING.
        let chunked: [UInt8] = [0x24, 0x80, 0x04, 0x82, 0x03, 0xe8]  // constructed OCTET STRING, then a 1000-byte chunk
        #expect((0..<60).contains { ber[$0...].starts(with: chunked) })
    }

    @Test("The DER sample is strict DER and a real SignedData: version 1, SHA-256, content of type data, no signers")
    func sampleIsSignedData() throws {
        let der = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: Self.purchases)
        let root = try DER.parse(der)  // DER's parser refuses indefinite and non-minimal lengths
        try DER.sequence(root, identifier: .sequence) { nodes in
            #expect(try ASN1ObjectIdentifier(derEncoded: &nodes) == [1, 2, 840, 113_549, 1, 7, 2])
            try DER.explicitlyTagged(&nodes, tagNumber: 0, tagClass: .contextSpecific) { signedData in
                try DER.sequence(signedData, identifier: .sequence) { nodes in
                    #expect(try Int(derEncoded: &nodes) == 1)
                    let digests = try DER.set(of: ASN1Any.self, identifier: .set, nodes: &nodes)
                    #expect(digests.count == 1)
                    let encapsulatedInfo = nodes.next()
                    try DER.sequence(try #require(encapsulatedInfo), identifier: .sequence) { encapsulated in
                        #expect(try ASN1ObjectIdentifier(derEncoded: &encapsulated) == [1, 2, 840, 113_549, 1, 7, 1])
                        try DER.explicitlyTagged(&encapsulated, tagNumber: 0, tagClass: .contextSpecific) { content in
                            _ = try ASN1OctetString(derEncoded: content)
                        }
                    }
                    let signers = try DER.set(of: ASN1Any.self, identifier: .set, nodes: &nodes)
                    #expect(signers.isEmpty)
                    #expect(nodes.next() == nil)
                }
            }
        }
        // DER's SET OF order: each SET's elements ascend by their encodings.
        let content = try ReceiptContainer.signedData(of: der).content
        guard case .constructed(let attributes) = try DER.parse(content).content else { throw ReceiptSampleError.notConstructed }
        let encodings = attributes.map { Array($0.encodedBytes) }
        #expect(encodings == encodings.sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test("A receipt with no in-app purchases reads as an empty list, with nothing to look up")
    func sampleEmpty() throws {
        for indefiniteLength in [false, true] {
            let receipt = try AppStoreReceipt(
                der: AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: [], indefiniteLength: indefiniteLength))
            #expect(receipt.bundleID == "com.example.radar")
            #expect(receipt.inAppPurchases.isEmpty)
            #expect(receipt.transactionIDForLookup == nil)
        }
    }

    @Test("The id to look up is the first purchase's original transaction id, else its transaction id")
    func lookupRule() {
        let renewal = AppStoreReceipt.InAppPurchase(
            transactionID: "2000000100000009", originalTransactionID: "2000000100000001", productID: "p")
        let xcode = AppStoreReceipt.InAppPurchase(transactionID: "0", originalTransactionID: nil, productID: "p")
        func lookup(_ purchases: [AppStoreReceipt.InAppPurchase]) -> String? {
            AppStoreReceipt(bundleID: nil, receiptType: nil, inAppPurchases: purchases).transactionIDForLookup
        }
        #expect(lookup([renewal, xcode]) == "2000000100000001")
        #expect(lookup([xcode, renewal]) == "0")
        #expect(lookup([]) == nil)
    }

    @Test("Base64 wrapped in lines, as some clients send it, reads the same")
    func wrappedBase64() throws {
        let der = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: Self.purchases)
        let wrapped = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithCarriageReturn, .endLineWithLineFeed])
        #expect(wrapped.contains("\r\n"))
        #expect(try AppStoreReceipt(base64: wrapped + "\n") == (try AppStoreReceipt(der: der)))
    }

    // MARK: - Refusals

    @Test("What is not an app receipt is refused as invalid_receipt, with a message that says what is wrong",
          arguments: NotAReceipt.allCases)
    func refused(_ input: NotAReceipt) throws {
        let base64 = try input.base64()
        let error = #expect(throws: AppStoreReceiptError.self) { try AppStoreReceipt(base64: base64) }
        #expect(error?.code == .invalidReceipt)
        let message = try #require(error?.message)
        #expect(message.contains(input.says), "\(message)")
        #expect(message.count < 300)
        if base64.count > 40 { #expect(!message.contains(base64.prefix(40))) }
    }

    @Test("A receipt over the size limit is refused as receipt_too_large before it is decoded")
    func tooLarge() throws {
        let over = String(repeating: "A", count: AppStoreReceipt.maximumBase64Length + 4)
        let error = #expect(throws: AppStoreReceiptError.self) { try AppStoreReceipt(base64: over) }
        #expect(error?.code == .receiptTooLarge)
        let derError = #expect(throws: AppStoreReceiptError.self) {
            try AppStoreReceipt(der: [UInt8](repeating: 0x30, count: AppStoreReceipt.maximumDERLength + 1))
        }
        #expect(derError?.code == .receiptTooLarge)
        // At the limit it is decoded, and refused for what it is.
        let atLimit = String(repeating: "A", count: AppStoreReceipt.maximumBase64Length)
        let limitError = #expect(throws: AppStoreReceiptError.self) { try AppStoreReceipt(base64: atLimit) }
        #expect(limitError?.code == .invalidReceipt)
    }

    @Test("Every truncation and every single-byte change of a receipt is read or refused, never a crash",
          arguments: ["sample DER", "sample BER", "app_receipt_xcode_three_purchases"])
    func mutations(_ name: String) async throws {
        let der: [UInt8]
        switch name {
        case "sample DER", "sample BER":
            der = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: Self.purchases, indefiniteLength: name == "sample BER")
        default:
            der = try #require(JWSBase64.decode(Self.fixture(name), alphabet: .standard))
        }
        // Every byte of the first 1,100 (the wrapping and the receipt's content), then every 50th
        // (certificates and signature): debug builds of swift-asn1 are slow.
        let positions = Array(0..<min(der.count, 1100)) + Array(stride(from: 1100, to: der.count, by: 50))
        // Thousands of parses in a debug build: yield between them, so that the live servers other
        // tests run in this process (on the same two cooperative threads) are not starved.
        for length in positions {
            #expect(throws: AppStoreReceiptError.self) { try AppStoreReceipt(der: Array(der[..<length])) }
            await Task.yield()
        }
        var read = 0
        var refused = 0
        for index in positions {
            await Task.yield()
            for change: UInt8 in [0x00, 0xff, der[index] ^ 0x01] where change != der[index] {
                var mutated = der
                mutated[index] = change
                do {
                    _ = try AppStoreReceipt(der: mutated)
                    read += 1
                } catch {
                    refused += 1
                }
            }
        }
        // Changes inside certificates and signatures go unnoticed (nothing is verified); changes to the structure do not.
        #expect(read > 0)
        #expect(refused > 0)
    }
}

/// Inputs that are not app receipts, each with what its refusal must say.
enum NotAReceipt: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case notBase64, empty, randomBytes, certificate, truncated, deeplyNested, trailingBytes, envelopedData, signedTimestamp,
        detachedContent, contentNotASN1, contentNotSet, attributeNotTriple, bundleIDNotString, inAppWithoutTransactionID,
        inAppWithBadDate, duplicateTransactionID

    var testDescription: String { rawValue }

    /// A fragment of the message.
    var says: String {
        switch self {
        case .notBase64: "is not base64: byte 6 (\"-\")"
        case .empty: "is empty"
        case .randomBytes: "not well-formed ASN.1"
        case .certificate: "does not start with a content type OID"
        case .truncated: "ends in the middle of an ASN.1 element"
        case .deeplyNested: "nested more than 50 levels deep"
        case .trailingBytes: "followed by stray bytes"
        case .envelopedData: "content type \"1.2.840.113549.1.7.3\", not signed data"
        case .signedTimestamp: "signs content of type \"1.2.840.113549.1.9.16.1.4\", not data"
        case .detachedContent: "has no receipt content"
        case .contentNotASN1: "The receipt's content ends in the middle"
        case .contentNotSet: "is an ASN.1 SEQUENCE, not a SET of receipt attributes"
        case .attributeNotTriple: "attribute 2 is not SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }"
        case .bundleIDNotString: "The bundle id (attribute 2) is not a UTF8String or IA5String"
        case .inAppWithoutTransactionID: "In-app purchase 1 has no transaction id (attribute 1703)"
        case .inAppWithBadDate: "In-app purchase 1's expires date (attribute 1708) is not an RFC 3339 date: \"next Tuesday\""
        case .duplicateTransactionID: "In-app purchase 1's transaction id (attribute 1703) appears more than once"
        }
    }

    func base64() throws -> String {
        typealias E = NotAReceipt
        let bytes: [UInt8]
        switch self {
        case .notBase64: return "MI\nAG-not-a-receipt"
        case .empty: return " \r\n"
        case .randomBytes: bytes = (0..<19).flatMap { SHA256.hash(data: Array("receipt garbage \($0)".utf8)) }
        case .certificate: bytes = AppleRootCertificates.g3
        case .truncated:
            let whole = try #require(JWSBase64.decode(AppStoreReceiptTests.fixture("app_receipt_sandbox"), alphabet: .standard))
            bytes = Array(whole.prefix(whole.count / 2))
        case .deeplyNested: bytes = Array([[UInt8]](repeating: [0x30, 0x80], count: 10_000).joined())
        case .trailingBytes: bytes = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: []) + [0x00]
        case .envelopedData: bytes = E.tlv(0x30, E.oid(3), E.tlv(0xa0, E.tlv(0x30, [0x02, 0x01, 0x00])))
        case .signedTimestamp:
            let tstInfo: [UInt8] = [0x06, 0x0b, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x10, 0x01, 0x04]
            bytes = E.signedData(E.tlv(0x30, tstInfo, E.tlv(0xa0, E.tlv(0x04, [0x30, 0x00]))))
        case .detachedContent: bytes = E.signedData(E.tlv(0x30, E.oid(1)))
        case .contentNotASN1: bytes = E.receipt(Array("not ASN.1".utf8))
        case .contentNotSet: bytes = E.receipt(E.tlv(0x30))
        case .attributeNotTriple:
            bytes = E.receipt(E.tlv(0x31, E.attribute(2, E.tlv(0x0c, Array("com.example.radar".utf8))), E.tlv(0x30, [0x02, 0x01, 0x11])))
        case .bundleIDNotString: bytes = E.receipt(E.tlv(0x31, E.attribute(2, [0x02, 0x01, 0x07])))
        case .inAppWithoutTransactionID:
            bytes = E.receipt(E.tlv(0x31, E.inApp([E.attribute(1702, E.utf8("p"))])))
        case .inAppWithBadDate:
            bytes = E.receipt(
                E.tlv(0x31, E.inApp([
                    E.attribute(1702, E.utf8("p")), E.attribute(1703, E.utf8("1")),
                    E.attribute(1708, E.tlv(0x16, Array("next Tuesday".utf8))),
                ])))
        case .duplicateTransactionID:
            bytes = E.receipt(
                E.tlv(0x31, E.inApp([E.attribute(1702, E.utf8("p")), E.attribute(1703, E.utf8("1")), E.attribute(1703, E.utf8("2"))])))
        }
        return Data(bytes).base64EncodedString()
    }

    // MARK: - DER by hand, for structures the sample builder would never make

    static func tlv(_ tag: UInt8, _ parts: [UInt8]...) -> [UInt8] {
        let content = parts.flatMap { $0 }
        if content.count < 0x80 { return [tag, UInt8(content.count)] + content }
        return [tag, 0x82, UInt8(content.count >> 8), UInt8(content.count & 0xff)] + content
    }

    /// 1.2.840.113549.1.7.`last` (PKCS#7 content types).
    static func oid(_ last: UInt8) -> [UInt8] { [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, last] }

    static func utf8(_ text: String) -> [UInt8] { tlv(0x0c, Array(text.utf8)) }

    static func signedData(_ encapsulated: [UInt8]) -> [UInt8] {
        let sha256: [UInt8] = [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]
        let body = tlv(0x30, [0x02, 0x01, 0x01], tlv(0x31, tlv(0x30, sha256, [0x05, 0x00])), encapsulated, tlv(0x31))
        return tlv(0x30, oid(2), tlv(0xa0, body))
    }

    /// Signed data whose content is `content`.
    static func receipt(_ content: [UInt8]) -> [UInt8] {
        signedData(tlv(0x30, oid(1), tlv(0xa0, tlv(0x04, content))))
    }

    static func attribute(_ type: Int, _ value: [UInt8]) -> [UInt8] {
        let typeBytes: [UInt8] = type < 0x80 ? [0x02, 0x01, UInt8(type)] : [0x02, 0x02, UInt8(type >> 8), UInt8(type & 0xff)]
        return tlv(0x30, typeBytes, [0x02, 0x01, 0x01], tlv(0x04, value))
    }

    static func inApp(_ attributes: [[UInt8]]) -> [UInt8] {
        attribute(17, tlv(0x31, attributes.flatMap { $0 }))
    }
}

private enum ReceiptSampleError: Error {
    case notConstructed
}

@Suite("App Store receipt dates")
struct AppStoreReceiptDateTests {
    @Test("RFC 3339 dates read as Unix milliseconds, with Xcode's offsets without a colon", arguments: [
        ("2025-04-30T02:17:37Z", 1_745_979_457_000),
        ("2025-04-30t02:17:37z", 1_745_979_457_000),
        ("2020-09-01T16:58:42+0300", 1_598_968_722_000),
        ("2020-09-01T16:58:42+03:00", 1_598_968_722_000),
        ("2020-09-01T10:28:42-03:30", 1_598_968_722_000),
        ("2024-02-29T23:59:59.123+05:30", 1_709_231_399_123),
        ("1970-01-01T00:00:00.5Z", 500),
        ("1970-01-01T00:00:00.123456789Z", 123),
        ("1969-12-31T23:59:59Z", -1000),
        ("4001-01-01T00:00:00Z", 64_092_211_200_000),
    ] as [(String, Int64)])
    func accepted(text: String, milliseconds: Int64) {
        #expect(ReceiptDate.milliseconds(text) == milliseconds)
    }

    @Test("What is not an RFC 3339 date-time is refused", arguments: [
        "", "2025-04-30", "2025-04-30T02:17:37", "2025-04-30 02:17:37Z", "2025-02-29T00:00:00Z", "2025-13-01T00:00:00Z",
        "2025-04-31T00:00:00Z", "2025-04-30T24:00:00Z", "2025-04-30T02:60:00Z", "2025-04-30T02:17:37.Z",
        "2025-04-30T02:17:37.1234567890Z", "2025-04-30T02:17:37+3", "2025-04-30T02:17:37+24:00", "2025-04-30T02:17:37Z ",
        "+2025-04-30T02:17:37Z", "2025-4-30T02:17:37Z", "next Tuesday",
    ])
    func refused(text: String) {
        #expect(ReceiptDate.milliseconds(text) == nil)
    }

    @Test("Written dates agree with Foundation's ISO 8601 and read back to the second")
    func roundTrip() {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        for milliseconds: Int64 in [0, 999, -1, -86_400_001, 951_782_400_000, 1_745_979_457_123, 4_102_444_799_999, 253_402_300_799_000] {
            let text = ReceiptDate.text(milliseconds)
            let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
            #expect(text == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))))
            #expect(ReceiptDate.milliseconds(text) == seconds * 1000)
        }
    }
}
