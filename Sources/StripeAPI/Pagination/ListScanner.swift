/// Splits a Stripe list object (`{"object":"list","data":[…],"has_more":…}`) into the exact bytes
/// of each element of `data` without decoding or re-encoding them, and reads each element's `id`.
///
/// A small validating scanner over the whole body: strings with escapes, nested containers, and
/// `"data"` keys inside elements are all skipped correctly; anything malformed is an error.
package enum ListScanner {
    package struct Element: Equatable {
        package let range: Range<Int>
        /// The element's top-level `id`, "" when it has none.
        package let id: String
    }

    package struct Result: Equatable {
        package var elements: [Element] = []
        package var hasMore = false
        /// `next_page` of a search result, nil for ordinary lists.
        package var nextPage: String?
    }

    package struct Failure: Error, Equatable {
        package let reason: String
        package let offset: Int
    }

    package static func scan(_ body: [UInt8]) throws(Failure) -> Result {
        try body.withUnsafeBufferPointer { (bytes) throws(Failure) -> Result in
            var scanner = Scanner(bytes: bytes)
            return try scanner.list()
        }
    }

    private static let maxDepth = 512

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func list() throws(Failure) -> Result {
            var result = Result()
            var sawData = false
            skipWhitespace()
            try expect(UInt8(ascii: "{"), "the answer is not a JSON object")
            try members { (scanner, key) throws(Failure) in
                if !sawData, scanner.keyEquals(key, "data") {
                    sawData = true
                    result.elements = try scanner.dataArray()
                } else if scanner.keyEquals(key, "has_more") {
                    result.hasMore = try scanner.boolean()
                } else if scanner.keyEquals(key, "next_page") {
                    result.nextPage = try scanner.stringOrNull()
                } else {
                    try scanner.skipValue(depth: 1)
                }
            }
            skipWhitespace()
            guard position == bytes.count else { throw fail("unexpected bytes after the list object") }
            guard sawData else { throw Failure(reason: "the list has no \"data\" array", offset: 0) }
            return result
        }

        /// Walks the members of an object whose `{` was just consumed, through its `}`.
        private mutating func members(_ body: (inout Scanner, Range<Int>) throws(Failure) -> Void) throws(Failure) {
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return }
            while true {
                skipWhitespace()
                let key = try string()
                skipWhitespace()
                try expect(UInt8(ascii: ":"), "expected ':' after a key")
                skipWhitespace()
                try body(&self, key)
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                try expect(UInt8(ascii: "}"), "expected ',' or '}' in an object")
                return
            }
        }

        private mutating func dataArray() throws(Failure) -> [Element] {
            try expect(UInt8(ascii: "["), "\"data\" is not an array")
            var elements: [Element] = []
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return elements }
            while true {
                skipWhitespace()
                let start = position
                var id = ""
                if consume(UInt8(ascii: "{")) {
                    var sawID = false
                    try members { (scanner, key) throws(Failure) in
                        if !sawID, scanner.keyEquals(key, "id"), scanner.peek == UInt8(ascii: "\"") {
                            sawID = true
                            let range = try scanner.string()
                            id = try scanner.decodeString(range)
                        } else {
                            try scanner.skipValue(depth: 3)
                        }
                    }
                } else {
                    throw fail("an element of \"data\" is not an object")
                }
                elements.append(Element(range: start..<position, id: id))
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                try expect(UInt8(ascii: "]"), "expected ',' or ']' in \"data\"")
                return elements
            }
        }

        private mutating func boolean() throws(Failure) -> Bool {
            if consumeLiteral("true") { return true }
            if consumeLiteral("false") { return false }
            throw fail("\"has_more\" is not a boolean")
        }

        private mutating func stringOrNull() throws(Failure) -> String? {
            if consumeLiteral("null") { return nil }
            guard peek == UInt8(ascii: "\"") else { throw fail("\"next_page\" is not a string") }
            return try decodeString(string())
        }

        private var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

        private func fail(_ reason: String) -> Failure { Failure(reason: reason, offset: position) }

        private mutating func consume(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        private mutating func expect(_ byte: UInt8, _ reason: String) throws(Failure) {
            guard consume(byte) else { throw fail(reason) }
        }

        private mutating func consumeLiteral(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - position >= count else { return false }
            for index in 0..<count where bytes[position + index] != literal.utf8Start[index] { return false }
            position += count
            return true
        }

        private mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x09, 0x0A, 0x0D: position += 1
                default: return
                }
            }
        }

        /// Skips a string; returns its range including the quotes.
        private mutating func string() throws(Failure) -> Range<Int> {
            let start = position
            try expect(UInt8(ascii: "\""), "expected a string")
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\\") {
                    position += 2
                } else if byte == UInt8(ascii: "\"") {
                    position += 1
                    return start..<position
                } else if byte < 0x20 {
                    throw fail("control character in a string")
                } else {
                    position += 1
                }
            }
            throw Failure(reason: "unterminated string", offset: start)
        }

        /// Whether a key (range including quotes) is `name`, escapes decoded.
        func keyEquals(_ key: Range<Int>, _ name: StaticString) -> Bool {
            let inner = (key.lowerBound + 1)..<(key.upperBound - 1)
            if !bytes[inner].contains(UInt8(ascii: "\\")) {
                guard inner.count == name.utf8CodeUnitCount else { return false }
                for (index, offset) in inner.enumerated() where bytes[offset] != name.utf8Start[index] { return false }
                return true
            }
            return (try? decodeString(key)) == name.description
        }

        /// The text of a string (range including quotes) with its escapes decoded.
        func decodeString(_ range: Range<Int>) throws(Failure) -> String {
            var utf8: [UInt8] = []
            utf8.reserveCapacity(range.count)
            var index = range.lowerBound + 1
            let end = range.upperBound - 1
            while index < end {
                let byte = bytes[index]
                guard byte == UInt8(ascii: "\\") else {
                    utf8.append(byte)
                    index += 1
                    continue
                }
                guard index + 1 < end else { throw Failure(reason: "bad escape", offset: index) }
                let escaped = bytes[index + 1]
                index += 2
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escaped)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4(at: index, end: end)
                    index += 4
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard index + 6 <= end, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw Failure(reason: "unpaired surrogate", offset: index)
                        }
                        let low = try hex4(at: index + 2, end: end)
                        guard (0xDC00..<0xE000).contains(low) else { throw Failure(reason: "unpaired surrogate", offset: index) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        index += 6
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw Failure(reason: "unpaired surrogate", offset: index) }
                    utf8.append(contentsOf: UTF8.encode(unicode)!)
                default:
                    throw Failure(reason: "bad escape", offset: index - 1)
                }
            }
            guard let text = String(validating: utf8, as: UTF8.self) else {
                throw Failure(reason: "string is not UTF-8", offset: range.lowerBound)
            }
            return text
        }

        private func hex4(at index: Int, end: Int) throws(Failure) -> UInt32 {
            guard index + 4 <= end else { throw Failure(reason: "short \\u escape", offset: index) }
            var value: UInt32 = 0
            for offset in index..<(index + 4) {
                let byte = bytes[offset]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw Failure(reason: "bad \\u escape", offset: offset)
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }

        private mutating func skipValue(depth: Int) throws(Failure) {
            guard depth < maxDepth else { throw fail("nested too deeply") }
            guard let byte = peek else { throw fail("unexpected end of the answer") }
            switch byte {
            case UInt8(ascii: "\""):
                _ = try string()
            case UInt8(ascii: "{"):
                position += 1
                try members { (scanner, _) throws(Failure) in try scanner.skipValue(depth: depth + 1) }
            case UInt8(ascii: "["):
                position += 1
                skipWhitespace()
                if consume(UInt8(ascii: "]")) { return }
                while true {
                    skipWhitespace()
                    try skipValue(depth: depth + 1)
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    try expect(UInt8(ascii: "]"), "expected ',' or ']' in an array")
                    return
                }
            case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                guard consumeLiteral("true") || consumeLiteral("false") || consumeLiteral("null") else {
                    throw fail("unexpected literal")
                }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                let start = position
                position += 1
                while let next = peek {
                    switch next {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"),
                        UInt8(ascii: "+"), UInt8(ascii: "-"):
                        position += 1
                    default:
                        if bytes[position - 1] == UInt8(ascii: "-"), position - 1 == start { throw fail("bad number") }
                        return
                    }
                }
            default:
                throw fail("unexpected character")
            }
        }
    }
}
