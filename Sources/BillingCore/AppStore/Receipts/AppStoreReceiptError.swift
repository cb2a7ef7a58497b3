/// Why a StoreKit 1 app receipt could not be read, or is not verified. The code is stable (the JSON error body and
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
        /// A configured receipt root is not DER X.509 (a settings problem).
        case invalidReceiptRoot = "invalid_receipt_root"
        /// Why a receipt that reads is not verified (``AppStoreReceiptVerifier``): no root to
        /// verify to, no signer, a signature that does not match, a chain not to a root.
        case receiptRootNotConfigured = "receipt_root_not_configured"
        case unsignedReceipt = "unsigned_receipt"
        case receiptSignatureMismatch = "receipt_signature_mismatch"
        case untrustedReceiptChain = "untrusted_receipt_chain"
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
