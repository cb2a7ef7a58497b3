import BillingCore

/// StoreKit 1 app receipts: the input is read as the receipt's bytes (PKCS#7 in DER or BER) and,
/// when it is text, as the base64 an app sends.
enum AppStoreReceiptTarget {
    static func run(_ input: [UInt8]) -> FuzzVerdict {
        var accepted = false
        if let receipt = try? AppStoreReceipt(der: input) {
            accepted = true
            _ = receipt.transactionIDForLookup
        }
        if let text = String(validating: input, as: UTF8.self), let receipt = try? AppStoreReceipt(base64: text) {
            accepted = true
            _ = receipt.transactionIDForLookup
        }
        return accepted ? .accepted : .rejected
    }
}
