@testable import BillingCore
import Foundation
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

    // MARK: - Refusals

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
