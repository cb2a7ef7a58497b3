import Crypto

/// The `appAccountToken` billingd hands an app user: a name-based UUID (version 5, RFC 9562) of
/// the user id in a namespace kept in the ledger, so the same user always gets the same token
/// and nobody can guess another user's without the namespace. The app passes it to
/// `Product.purchase(options: [.appAccountToken(…)])`; Apple puts it in every transaction of
/// the purchase, which ties notifications to the user even when the app never reported them.
public enum AppAccountToken {
    /// The token of `user` in `namespace` (16 bytes), as a lowercase UUID string.
    public static func derive(user: String, namespace: [UInt8]) -> String {
        precondition(namespace.count == 16, "a UUID namespace is 16 bytes")
        var bytes = Array(Insecure.SHA1.hash(data: namespace + Array(user.utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50  // version 5
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        return format(bytes)
    }

    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` of 16 bytes.
    public static func format(_ bytes: [UInt8]) -> String {
        let hex = bytes.map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(separator: "-")
    }

    /// Whether `text` is a UUID in its canonical text form (any case).
    public static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let isHex = (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
                guard isHex else { return false }
            }
        }
        return true
    }
}
