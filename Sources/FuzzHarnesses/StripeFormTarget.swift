import StripeAPI

/// The Stripe client's form encoder. The input describes parameters (strings with any bytes,
/// integers, booleans, nested arrays and dictionaries); the encoding must use only the bytes the
/// form allows and must read back, pair for pair, as the parameters' flattened names and values.
enum StripeFormTarget {
    static func run(_ input: [UInt8]) -> FuzzVerdict {
        var reader = Reader(bytes: input[...])
        let parameters = reader.parameters(depth: 0)
        let flattened = parameters.flattened()
        let encoded = Array(parameters.encoded().utf8)

        guard Set(parameters.keys).count == parameters.count else { return .violated("a key is repeated") }
        var pairs: [[UInt8]] = []
        if !encoded.isEmpty {
            pairs = encoded.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false).map(Array.init)
        }
        guard pairs.count == flattened.count else {
            return .violated("\(flattened.count) parameters encoded as \(pairs.count) pairs")
        }
        for (pair, (name, value)) in zip(pairs, flattened) {
            let parts = pair.split(separator: UInt8(ascii: "="), omittingEmptySubsequences: false)
            guard parts.count == 2, let decodedName = percentDecoded(parts[0]), let decodedValue = percentDecoded(parts[1]) else {
                return .violated("a pair is not name=value with only unreserved bytes and %XX escapes")
            }
            guard decodedName == Array(name.utf8), decodedValue == Array(value.utf8) else {
                return .violated("a pair does not read back as the parameter it encodes")
            }
        }
        return .accepted
    }

    /// The bytes a form component stands for; nil when it holds a byte the encoder must escape.
    private static func percentDecoded(_ component: ArraySlice<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        var index = component.startIndex
        while index < component.endIndex {
            let byte = component[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < component.endIndex,
                    let high = hexValue(component[index + 1]), let low = hexValue(component[index + 2])
                else { return nil }
                out.append(high << 4 | low)
                index += 3
            } else {
                guard isUnreserved(byte) else { return nil }
                out.append(byte)
                index += 1
            }
        }
        return out
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Upper-case hex only: the encoder writes `%5B`, never `%5b`.
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Reads parameters from bytes: each value starts with a byte that picks its kind; strings
    /// take a length byte and that many bytes (invalid UTF-8 reads as U+FFFD, as a Swift String holds it).
    private struct Reader {
        var bytes: ArraySlice<UInt8>
        static let maximumDepth = 4

        mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }

        mutating func string() -> String {
            let count = min(Int(byte() % 32), bytes.count)
            let text = String(decoding: bytes.prefix(count), as: UTF8.self)
            bytes = bytes.dropFirst(count)
            return text
        }

        mutating func parameters(depth: Int) -> StripeParameters {
            let count = Int(byte() % 8)
            var pairs: [(String, StripeFormValue)] = []
            for _ in 0..<count where !bytes.isEmpty { pairs.append((string(), value(depth: depth))) }
            return StripeParameters(pairs)
        }

        mutating func value(depth: Int) -> StripeFormValue {
            let kind = byte() % (depth < Self.maximumDepth ? 5 : 3)
            switch kind {
            case 0: return .string(string())
            case 1:
                var integer: UInt64 = 0
                for _ in 0..<8 { integer = integer << 8 | UInt64(byte()) }
                return .integer(Int64(bitPattern: integer))
            case 2: return .bool(byte() & 1 == 1)
            case 3:
                let count = Int(byte() % 6)
                var elements: [StripeFormValue] = []
                for _ in 0..<count where !bytes.isEmpty { elements.append(value(depth: depth + 1)) }
                return .array(elements)
            default:
                return .dictionary(parameters(depth: depth + 1))
            }
        }
    }
}
