/// Why a StoreKit 1 app receipt could not be read. The code is stable (the JSON error body and
/// the metrics label); the message says what was wrong with the receipt.
///
/// Messages quote at most a short excerpt of the receipt's text, never the receipt itself, so
/// that a hostile body cannot flood or forge a log line.
public struct AppStoreReceiptError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// Not base64, not a PKCS#7 signed-data container, or its content is not a receipt.
        case invalidReceipt = "invalid_receipt"
        /// Longer than ``AppStoreReceipt/maximumBase64Length`` (or its DER, than
        /// ``AppStoreReceipt/maximumDERLength``): refused before any decoding.
        case receiptTooLarge = "receipt_too_large"
    }

    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// An `invalid_receipt` error.
    static func invalid(_ message: String) -> Self {
        Self(.invalidReceipt, message)
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
