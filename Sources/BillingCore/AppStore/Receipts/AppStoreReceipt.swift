/// A StoreKit 1 app receipt (the base64 of `Bundle.main.appStoreReceiptURL`), read for the
/// purchases it names, so that billingd can fetch their history with Get Transaction History —
/// what Apple offers in place of the deprecated `verifyReceipt` (the App Store Server Library's
/// `ReceiptUtility.extractTransactionId(appReceipt:)`).
///
/// Reading does **not** verify the receipt's PKCS#7 signature, so nothing read here proves a
/// purchase: anyone can make a receipt that parses (BillingSamples' `AppStoreSampleReceipt` does).
/// ``AppStoreReceiptVerifier`` reads a receipt and checks that Apple signed it; only a verified
/// receipt may tie a purchase to a user. Even then its ids only say which history to ask the App
/// Store Server API for, whose signed answer is the source of truth — Apple's own advice for
/// `ReceiptUtility`. Every string here is the sender's text: check a transaction id with
/// ``AppStoreTransactionID`` before it goes into a URL.
public struct AppStoreReceipt: Sendable, Equatable {
    /// One in-app purchase receipt (receipt attribute 17). Dates are Unix milliseconds, nil when
    /// absent or empty (Apple writes an empty string for "none").
    public struct InAppPurchase: Sendable, Equatable {
        /// Attribute 1703. `0`, `1`, … in receipts made by Xcode's StoreKit testing, which the App
        /// Store Server API does not know.
        public var transactionID: String
        /// Attribute 1705: the first transaction of this purchase, shared by its renewals and
        /// restores. Xcode's StoreKit testing sometimes leaves it out.
        public var originalTransactionID: String?
        /// Attribute 1702.
        public var productID: String
        /// Attribute 1704.
        public var purchaseDate: Int64?
        /// Attribute 1706.
        public var originalPurchaseDate: Int64?
        /// Attribute 1708: the end of the period paid for (auto-renewable subscriptions only).
        public var expiresDate: Int64?
        /// Attribute 1712: when Apple refunded or revoked the purchase.
        public var cancellationDate: Int64?

        public init(
            transactionID: String, originalTransactionID: String?, productID: String, purchaseDate: Int64? = nil,
            originalPurchaseDate: Int64? = nil, expiresDate: Int64? = nil, cancellationDate: Int64? = nil
        ) {
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID
            self.productID = productID
            self.purchaseDate = purchaseDate
            self.originalPurchaseDate = originalPurchaseDate
            self.expiresDate = expiresDate
            self.cancellationDate = cancellationDate
        }
    }

    /// Attribute 2, the app's bundle id.
    public var bundleID: String?
    /// Attribute 0, which Apple does not document: `Production`, `ProductionSandbox` or `Xcode`
    /// in the receipts seen. A hint for which environment to ask first, no more.
    public var receiptType: String?
    /// Attribute 12, when the App Store signed the receipt (Unix milliseconds): the time its
    /// certificate chain is checked at, as a JWS's at its `signedDate`.
    public var creationDate: Int64?
    /// In the receipt's order; empty when the user bought nothing in the app.
    public var inAppPurchases: [InAppPurchase]

    /// The id to pass to Get Transaction History, nil when the receipt names no purchase.
    ///
    /// Apple's `ReceiptUtility` returns whichever transaction id or original transaction id its
    /// walk over the purchases meets last (its documentation says "a transaction id from the array
    /// of in-app purchases"). Any of them would do: Get Transaction History answers with the customer's whole
    /// history for the app from any one transaction id of theirs. This takes the first purchase's
    /// original transaction id (its transaction id when it has none), because that id stays the
    /// same across renewals and restores — the same receipt asked twice names the same history —
    /// and it is the key the ledger keeps App Store subscriptions under, so logs and records line up.
    public var transactionIDForLookup: String? {
        guard let first = inAppPurchases.first else { return nil }
        return first.originalTransactionID ?? first.transactionID
    }

    /// The longest base64 receipt accepted. Apple's receipts grow with the purchase history
    /// (about 400 bytes per in-app purchase); this bounds the work a hostile body can cause.
    public static let maximumBase64Length = 1 << 20
    /// The longest DER (or BER) receipt accepted: what ``maximumBase64Length`` characters decode to.
    public static let maximumDERLength = maximumBase64Length / 4 * 3

    /// Reads a base64 app receipt, as an app sends it. Line breaks and spaces are ignored.
    public init(base64: String) throws(AppStoreReceiptError) {
        try self.init(der: Self.der(base64: base64))
    }

    /// Reads an app receipt's bytes: PKCS#7 signed data in DER, or in BER as Xcode writes it.
    public init(der: [UInt8]) throws(AppStoreReceiptError) {
        try Self.checkSize(der)
        try self.init(ReceiptContainer.signedData(of: der))
    }

    /// The bytes of a base64 app receipt, refused when too long or not base64.
    static func der(base64: String) throws(AppStoreReceiptError) -> [UInt8] {
        let text = base64.utf8
        guard text.count <= Self.maximumBase64Length else {
            throw AppStoreReceiptError(
                .receiptTooLarge,
                "The receipt is \(text.count) bytes of base64, more than the \(Self.maximumBase64Length) accepted.")
        }
        let digits = text.filter { !Self.isWhitespace($0) }
        guard !digits.isEmpty else {
            throw .invalid("The receipt is empty; expected the base64 of the app's receipt file.")
        }
        guard let der = JWSBase64.decode(String(decoding: digits, as: UTF8.self), alphabet: .standard) else {
            throw .invalid(Self.base64Problem(Array(text), digitCount: digits.count))
        }
        return der
    }

    /// Refuses receipt bytes that are empty or longer than ``maximumDERLength``, before any parse.
    static func checkSize(_ der: [UInt8]) throws(AppStoreReceiptError) {
        guard der.count <= Self.maximumDERLength else {
            throw AppStoreReceiptError(
                .receiptTooLarge, "The receipt is \(der.count) bytes, more than the \(Self.maximumDERLength) accepted.")
        }
        guard !der.isEmpty else {
            throw .invalid("The receipt is empty; expected the bytes of the app's receipt file.")
        }
    }

    /// Reads the receipt's attributes from its parsed SignedData.
    init(_ signedData: ReceiptContainer.SignedData) throws(AppStoreReceiptError) {
        var bundleID: String?
        var receiptType: String?
        var purchases: [InAppPurchase] = []
        var creationDate: Int64??
        for attribute in try ReceiptContainer.attributes(in: signedData.content, place: "The receipt's content") {
            switch attribute.type {
            case 0:
                let what = "The receipt type (attribute 0)"
                try Self.setOnce(&receiptType, ReceiptContainer.string(attribute.value, what), what)
            case 2:
                let what = "The bundle id (attribute 2)"
                try Self.setOnce(&bundleID, ReceiptContainer.string(attribute.value, what), what)
            case 12 where creationDate == nil:
                // Read leniently: a receipt without a readable date still reads (unverified).
                creationDate = .some((try? ReceiptContainer.date(attribute.value, "")) ?? nil)
            case 17:
                purchases.append(try InAppPurchase(attribute.value, number: purchases.count + 1))
            default:
                continue  // version, hashes, dates …: not needed to find the history
            }
        }
        self.bundleID = bundleID
        self.receiptType = receiptType
        self.creationDate = creationDate ?? nil
        self.inAppPurchases = purchases
    }

    public init(bundleID: String?, receiptType: String?, creationDate: Int64? = nil, inAppPurchases: [InAppPurchase]) {
        self.bundleID = bundleID
        self.receiptType = receiptType
        self.creationDate = creationDate
        self.inAppPurchases = inAppPurchases
    }

    /// Sets `field` to `value`, refusing a second value: one receipt must read one way.
    static func setOnce<T>(_ field: inout T?, _ value: T, _ what: String) throws(AppStoreReceiptError) {
        guard field == nil else {
            throw .invalid("\(what) appears more than once.")
        }
        field = value
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\t")
    }

    /// Why `text` is not base64, without quoting more than one character of it.
    private static func base64Problem(_ text: [UInt8], digitCount: Int) -> String {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=".utf8)
        if let index = text.firstIndex(where: { !alphabet.contains($0) && !isWhitespace($0) }) {
            let character = String(decoding: text[index...].prefix(4), as: UTF8.self).prefix(1)
            return "The receipt is not base64: byte \(index + 1) (\(AppStoreVerificationError.excerpt(character, limit: 1))) "
                + "is not one of A-Z a-z 0-9 + / = (or a space or line break)."
        }
        return "The receipt is not base64: its length (\(digitCount) characters) or its = padding is wrong, "
            + "or it was cut short."
    }
}

extension AppStoreReceipt.InAppPurchase {
    /// Reads the value of receipt attribute 17, the `number`th in the receipt.
    init(_ value: ArraySlice<UInt8>, number: Int) throws(AppStoreReceiptError) {
        let place = "In-app purchase \(number)"
        var transactionID: String?
        var originalTransactionID: String?
        var productID: String?
        var purchaseDate: Int64??
        var originalPurchaseDate: Int64??
        var expiresDate: Int64??
        var cancellationDate: Int64??
        for attribute in try ReceiptContainer.attributes(in: value, place: "\(place)'s content") {
            /// Decodes the attribute into `field`, which must still be empty.
            func read<T>(
                _ field: inout T?, _ name: String, _ decode: (ArraySlice<UInt8>, String) throws(AppStoreReceiptError) -> T
            ) throws(AppStoreReceiptError) {
                let what = "\(place)'s \(name) (attribute \(attribute.type))"
                try AppStoreReceipt.setOnce(&field, decode(attribute.value, what), what)
            }
            switch attribute.type {
            case 1702: try read(&productID, "product id", ReceiptContainer.string)
            case 1703: try read(&transactionID, "transaction id", ReceiptContainer.string)
            case 1705: try read(&originalTransactionID, "original transaction id", ReceiptContainer.string)
            case 1704: try read(&purchaseDate, "purchase date", ReceiptContainer.date)
            case 1706: try read(&originalPurchaseDate, "original purchase date", ReceiptContainer.date)
            case 1708: try read(&expiresDate, "expires date", ReceiptContainer.date)
            case 1712: try read(&cancellationDate, "cancellation date", ReceiptContainer.date)
            default: continue  // quantity, web order line item, offer …: not needed to find the history
            }
        }
        guard let transactionID, !transactionID.isEmpty else {
            throw .invalid("\(place) has no transaction id (attribute 1703).")
        }
        guard let productID else {
            throw .invalid("\(place) has no product id (attribute 1702).")
        }
        self.init(
            transactionID: transactionID,
            originalTransactionID: originalTransactionID.flatMap { $0.isEmpty ? nil : $0 },
            productID: productID,
            purchaseDate: purchaseDate ?? nil, originalPurchaseDate: originalPurchaseDate ?? nil,
            expiresDate: expiresDate ?? nil, cancellationDate: cancellationDate ?? nil)
    }
}
