/// Compact JSON bytes with sorted keys, the form every object is cached in.
extension JSONValue {
    /// Compact JSON bytes with sorted keys, in an array no larger than they are (objects stay
    /// cached for the fake's lifetime, so spare capacity would add up).
    public func serialized() -> [UInt8] {
        var scratch: [UInt8] = []
        scratch.reserveCapacity(4096)
        return serialized(using: &scratch)
    }

    /// ``serialized()`` through a reusable buffer.
    func serialized(using scratch: inout [UInt8]) -> [UInt8] {
        scratch.removeAll(keepingCapacity: true)
        write(into: &scratch)
        return exactCopy(of: scratch)
    }

    /// Key order: byte-wise, which for Stripe's ASCII member names is alphabetical, and cheaper
    /// than `String`'s Unicode-aware comparison.
    static func precedes(_ lhs: String, _ rhs: String) -> Bool {
        var lhs = lhs
        var rhs = rhs
        return lhs.withUTF8 { left in rhs.withUTF8 { right in left.lexicographicallyPrecedes(right) } }
    }

    func write(into bytes: inout [UInt8]) {
        switch self {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let bool):
            bytes.append(contentsOf: bool ? "true".utf8 : "false".utf8)
        case .int(let int):
            JSONValue.writeInteger(int, into: &bytes)
        case .double(let double):
            if double.isFinite {
                bytes.append(contentsOf: "\(double)".utf8)
            } else {
                bytes.append(contentsOf: "null".utf8)
            }
        case .string(let string):
            JSONValue.writeString(string, into: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                element.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted(by: JSONValue.precedes).enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONValue.writeString(key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                members[key].unsafelyUnwrapped.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Writes decimal digits without making a `String` first.
    static func writeInteger(_ int: Int64, into bytes: inout [UInt8]) {
        if int < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = int.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes for at most 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
        }
    }

    /// Writes a JSON string literal; slashes and non-ASCII characters are left as they are, as Stripe does.
    static func writeString(_ string: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Most strings need no escape: copy them whole.
            guard utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 { appendEscaped(byte, to: &bytes) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ byte: UInt8, to bytes: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0..<0x20:
            let hex = Array("0123456789abcdef".utf8)
            bytes.append(contentsOf: "\\u00".utf8)
            bytes.append(hex[Int(byte >> 4)])
            bytes.append(hex[Int(byte & 0x0f)])
        default: bytes.append(byte)
        }
    }
}

/// A new array holding `bytes` with no spare capacity (`Array(bytes[...])` may share the buffer).
func exactCopy(of bytes: [UInt8]) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
        count = buffer.initialize(fromContentsOf: bytes)
    }
}

// MARK: - Parsing

/// Why bytes are not a JSON document.
struct JSONParseError: Error, CustomStringConvertible {
    let offset: Int
    let reason: String
    var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Parses one JSON document; numbers without a fraction or exponent that fit are integers.
    public init(parsing bytes: some Collection<UInt8>) throws {
        var parser = JSONParser(bytes: Array(bytes))
        self = try parser.parseDocument()
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var position = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        let value = try parseValue(depth: 0)
        skipWhitespace()
        guard position == bytes.count else { throw error("trailing characters") }
        return value
    }

    private func error(_ reason: String) -> JSONParseError { JSONParseError(offset: position, reason: reason) }

    private mutating func skipWhitespace() {
        while position < bytes.count,
            bytes[position] == 0x20 || bytes[position] == 0x0a || bytes[position] == 0x0d || bytes[position] == 0x09
        {
            position += 1
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < 512 else { throw error("nested too deeply") }
        skipWhitespace()
        guard position < bytes.count else { throw error("unexpected end") }
        switch bytes[position] {
        case UInt8(ascii: "{"):
            position += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                let key = try parseString()
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                members[key] = try parseValue(depth: depth + 1)
                skipWhitespace()
                if try consumeSeparator(closing: UInt8(ascii: "}")) { return .object(members) }
            }
        case UInt8(ascii: "["):
            position += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                position += 1
                return .array(elements)
            }
            while true {
                elements.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                if try consumeSeparator(closing: UInt8(ascii: "]")) { return .array(elements) }
            }
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectWord("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectWord("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectWord("null")
            return .null
        default:
            return try parseNumber()
        }
    }

    /// After a member or element: true at the closing bracket, false after a comma.
    private mutating func consumeSeparator(closing: UInt8) throws(JSONParseError) -> Bool {
        guard position < bytes.count else { throw error("unexpected end") }
        if bytes[position] == closing {
            position += 1
            return true
        }
        try expect(UInt8(ascii: ","))
        return false
    }

    private mutating func expect(_ byte: UInt8) throws(JSONParseError) {
        guard position < bytes.count, bytes[position] == byte else {
            throw error("expected '\(Character(Unicode.Scalar(byte)))'")
        }
        position += 1
    }

    private mutating func expectWord(_ word: String) throws(JSONParseError) {
        for byte in word.utf8 { try expect(byte) }
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = position
        var isInteger = true
        while position < bytes.count {
            let byte = bytes[position]
            if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") {
                position += 1
            } else if byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
                || byte == UInt8(ascii: "+")
            {
                isInteger = false
                position += 1
            } else {
                break
            }
        }
        let text = String(decoding: bytes[start..<position], as: UTF8.self)
        if isInteger, let int = Int64(text) { return .int(int) }
        guard !text.isEmpty, let double = Double(text) else {
            position = start
            throw error("unexpected character")
        }
        return .double(double)
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        try expect(UInt8(ascii: "\""))
        let start = position
        // Fast path: no escapes.
        while position < bytes.count, bytes[position] != UInt8(ascii: "\""), bytes[position] != UInt8(ascii: "\\") {
            position += 1
        }
        guard position < bytes.count else { throw error("unterminated string") }
        if bytes[position] == UInt8(ascii: "\"") {
            defer { position += 1 }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        }
        var scalars: [UInt8] = Array(bytes[start..<position])
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: scalars, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard position < bytes.count else { throw error("unterminated escape") }
                let escaped = bytes[position]
                position += 1
                switch escaped {
                case UInt8(ascii: "n"): scalars.append(0x0a)
                case UInt8(ascii: "r"): scalars.append(0x0d)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0c)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800..<0xDC00).contains(code), position + 1 < bytes.count,
                        bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u")
                    {
                        position += 2
                        let low = try parseHex4()
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    let scalar = Unicode.Scalar(code) ?? "\u{FFFD}"
                    scalars.append(contentsOf: String(Character(scalar)).utf8)
                default: scalars.append(escaped)
                }
            default:
                scalars.append(byte)
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard position + 4 <= bytes.count,
            let code = UInt32(String(decoding: bytes[position..<position + 4], as: UTF8.self), radix: 16)
        else { throw error("invalid \\u escape") }
        position += 4
        return code
    }
}
