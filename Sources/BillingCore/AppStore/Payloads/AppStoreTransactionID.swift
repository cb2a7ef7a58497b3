/// What an App Store transaction id looks like: decimal digits. Apple's are 15 or 16 of them
/// (`2000000123456789`), Xcode's StoreKit testing counts from `0`.
///
/// An id goes into the path of an App Store Server API call; anything else — `.` or `..`, which a
/// URL resolves to another path, a slash, a query — is refused before a request is made.
public enum AppStoreTransactionID {
    /// The longest id accepted; Apple's are 16 digits today.
    public static let maximumLength = 32

    /// Whether `text` is 1 to ``maximumLength`` ASCII digits.
    public static func isWellFormed(_ text: some StringProtocol) -> Bool {
        let bytes = text.utf8
        return !bytes.isEmpty && bytes.count <= maximumLength && bytes.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
