import Foundation

/// Finds the exact bytes of `data.object` inside an event body without re-serialising it, so
/// the ledger can keep Stripe's own JSON of each object byte for byte.
///
/// A small validating scanner: it walks keys and skips values (strings with escapes, numbers,
/// literals, nested containers) and gives up (nil) on anything that is not well-formed. It reads
/// keys as a JSON decoder does (`"d\u0061ta"` is `data`) and gives up on a member named twice,
/// so that the object it finds is always the one the envelope was decoded from.
public enum RawObjectLocator {
    /// The byte range of `data.object` in an event body, nil when absent or malformed.
    public static func objectRange(in body: [UInt8]) -> Range<Int>? {
        body.withUnsafeBufferPointer { bytes in
            var scanner = Scanner(bytes: bytes)
            guard let data = scanner.member(named: "data", inObjectAt: 0) else { return nil }
            var inner = Scanner(bytes: bytes)
            return inner.member(named: "object", inObjectAt: data.lowerBound)
        }
    }

    /// The raw JSON of `data.object`.
    public static func object(in body: [UInt8]) -> ArraySlice<UInt8>? {
        objectRange(in: body).map { body[$0] }
    }

    /// The byte range of each member's value of the object `json` is, by name as a JSON decoder
    /// reads it; nil when `json` is not one well-formed object or names a member twice. For
    /// BillingSamples, which keeps its samples' bytes as they are in one file.
    package static func memberRanges(in json: [UInt8]) -> [String: Range<Int>]? {
        json.withUnsafeBufferPointer { bytes in
            var scanner = Scanner(bytes: bytes)
            var ranges: [String: Range<Int>] = [:]
            var duplicate = false
            let complete = scanner.forEachMember(inObjectAt: 0) { key, value in
                let quoted = Data(bytes[key])
                guard let name = try? JSONDecoder().decode(String.self, from: quoted), ranges[name] == nil else {
                    duplicate = true
                    return
                }
                ranges[name] = value
            }
            scanner.skipWhitespace()
            return complete && !duplicate && scanner.position == bytes.count ? ranges : nil
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        /// Scans the object that starts at `start` and returns the range of the value of the
        /// member whose key is `name`; nil when there is none, or more than one.
        mutating func member(named name: String, inObjectAt start: Int) -> Range<Int>? {
            let wanted = Array(name.utf8)
            let bytes = self.bytes
            var found: Range<Int>?
            var twice = false
            let complete = forEachMember(inObjectAt: start) { key, value in
                guard Self.keyEquals(key, wanted, in: bytes) else { return }
                // Which of two a JSON decoder keeps is its own choice: take neither.
                if found != nil { twice = true }
                found = value
            }
            return complete && !twice ? found : nil
        }

        /// Scans the object that starts at `start`, handing `visit` each member's key (quotes
        /// included) and value range in order; false when the object is not well-formed.
        mutating func forEachMember(inObjectAt start: Int, _ visit: (Range<Int>, Range<Int>) -> Void) -> Bool {
            position = start
            skipWhitespace()
            guard consume(UInt8(ascii: "{")) else { return false }
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return true }
            while true {
                skipWhitespace()
                guard let key = skipString() else { return false }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return false }
                skipWhitespace()
                let valueStart = position
                guard skipValue(depth: 0) else { return false }
                visit(key, valueStart..<position)
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "}"))
            }
        }

        private static func keyEquals(_ key: Range<Int>, _ wanted: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            // key includes the quotes.
            let inner = (key.lowerBound + 1)..<(key.upperBound - 1)
            if bytes[inner].contains(UInt8(ascii: "\\")) {
                // Escaped, as `"d\u0061ta"`: compare what a JSON decoder reads.
                let decoded = try? JSONDecoder().decode(String.self, from: Data(bytes[key]))
                return decoded.map { Array($0.utf8) == wanted } ?? false
            }
            guard inner.count == wanted.count else { return false }
            var index = 0
            for offset in inner {
                if bytes[offset] != wanted[index] { return false }
                index += 1
            }
            return true
        }

        private mutating func consume(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x09, 0x0A, 0x0D: position += 1
                default: return
                }
            }
        }

        /// Skips a string starting at `position`; returns its range including quotes.
        private mutating func skipString() -> Range<Int>? {
            let start = position
            guard consume(UInt8(ascii: "\"")) else { return nil }
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\\") {
                    position += 2
                } else if byte == UInt8(ascii: "\"") {
                    position += 1
                    return start..<position
                } else if byte < 0x20 {
                    return nil
                } else {
                    position += 1
                }
            }
            return nil
        }

        private mutating func skipValue(depth: Int) -> Bool {
            guard depth < 512, position < bytes.count else { return false }
            switch bytes[position] {
            case UInt8(ascii: "\""):
                return skipString() != nil
            case UInt8(ascii: "{"):
                position += 1
                skipWhitespace()
                if consume(UInt8(ascii: "}")) { return true }
                while true {
                    skipWhitespace()
                    guard skipString() != nil else { return false }
                    skipWhitespace()
                    guard consume(UInt8(ascii: ":")) else { return false }
                    skipWhitespace()
                    guard skipValue(depth: depth + 1) else { return false }
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    return consume(UInt8(ascii: "}"))
                }
            case UInt8(ascii: "["):
                position += 1
                skipWhitespace()
                if consume(UInt8(ascii: "]")) { return true }
                while true {
                    skipWhitespace()
                    guard skipValue(depth: depth + 1) else { return false }
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    return consume(UInt8(ascii: "]"))
                }
            default:
                // number, true, false, null: everything up to the next delimiter
                let start = position
                while position < bytes.count {
                    switch bytes[position] {
                    case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D:
                        return position > start
                    default:
                        position += 1
                    }
                }
                return position > start
            }
        }
    }
}
