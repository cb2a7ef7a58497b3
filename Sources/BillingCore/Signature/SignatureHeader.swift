/// The parsed `Stripe-Signature` header: one timestamp and any number of `v1` signatures.
///
/// The header is comma-separated `key=value` pairs, e.g. `t=1492774577,v1=5257a8…,v0=6ffbb5…`.
/// Only `v1` (HMAC-SHA256) is a signature scheme billingd accepts; `v0` and unknown keys are
/// ignored, as Stripe documents, so that new schemes do not break old receivers.
public struct SignatureHeader: Sendable, Equatable {
    /// Unix seconds at which Stripe signed the delivery.
    public let timestamp: Int64
    /// The `v1` signatures, each 32 raw bytes (decoded from hex).
    public let signatures: [[UInt8]]

    /// The longest header accepted: Stripe sends one `t` and one `v1` per endpoint secret
    /// (a handful during rotation), far below this.
    public static let maximumLength = 4096

    /// Parses a header value; throws a ``SignatureError`` naming what is wrong.
    public init(parsing header: String) throws(SignatureError) {
        let utf8 = header.utf8
        if utf8.isEmpty || header.allSatisfy(\.isWhitespace) { throw .missingHeader }
        if utf8.count > Self.maximumLength { throw .headerTooLong }
        var timestamp: Int64?
        var signatures: [[UInt8]] = []
        for element in utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            let pair = Substring(element).trimmingASCIISpaces()
            guard let equals = pair.firstIndex(of: "=") else { throw .malformedPair }
            let key = pair[..<equals].trimmingASCIISpaces()
            let value = pair[pair.index(after: equals)...].trimmingASCIISpaces()
            switch key {
            case "t":
                guard timestamp == nil else { throw .duplicateTimestamp }
                guard !value.isEmpty, value.utf8.count <= 12, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                    let seconds = Int64(value)
                else { throw .invalidTimestamp }
                timestamp = seconds
            case "v1":
                // A v1 value that is not 64 hex digits can never match; keep parsing so that a
                // good signature beside it still verifies, but do not keep the bad one.
                if let bytes = Self.decodeHex(value) { signatures.append(bytes) }
            default:
                continue
            }
        }
        guard let timestamp else { throw .missingTimestamp }
        guard !signatures.isEmpty else { throw .noV1Signature }
        self.timestamp = timestamp
        self.signatures = signatures
    }

    /// Decodes exactly 64 hex digits (either case) into 32 bytes; nil for anything else.
    static func decodeHex(_ text: Substring) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(32)
        var index = 0
        while index < 64 {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension Substring {
    fileprivate func trimmingASCIISpaces() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
