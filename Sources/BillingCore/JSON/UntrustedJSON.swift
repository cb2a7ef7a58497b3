import Foundation

/// Foundation's JSON scanner (FoundationEssentials, Swift 6.3.1 on Linux) traps instead of
/// throwing when the input ends exactly where it first nests deeper than its limit of 512 arrays
/// and objects: `JSONDecoder().decode(_:from:)` on 513 `[` ends the process. The fuzz target
/// event-envelope found it (Fixtures/fuzz-regressions/); any body billingd decodes, including the
/// unauthenticated App Store webhook's, could stop the daemon.
///
/// The rule kept here: bytes from outside reach `JSONDecoder` only through
/// ``Foundation/JSONDecoder/decode(_:fromUntrusted:)``, which refuses input nested deeper than the
/// scanner's limit before the scanner sees it. The scanner refuses such input anyway, so nothing
/// that decoded before is refused now; only the trap is gone.
public enum UntrustedJSON {
    /// The deepest nesting of arrays and objects Foundation's scanner accepts.
    public static let maximumDepth = 512

    /// Whether arrays and objects (outside strings) nest deeper than ``maximumDepth`` anywhere.
    public static func nestsTooDeeply(_ bytes: some Collection<UInt8>) -> Bool {
        // Called across modules, this generic function runs unspecialized: a byte at a time
        // through the collection's witnesses cost 17 % of App Store reconcile's CPU on its
        // 300 KB pages. Contiguous bytes ([UInt8], ArraySlice, Data) are scanned as a buffer.
        if let answer = bytes.withContiguousStorageIfAvailable(nestsTooDeeply(buffer:)) { return answer }
        return Array(bytes).withUnsafeBufferPointer(nestsTooDeeply(buffer:))
    }

    private static func nestsTooDeeply(buffer bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > maximumDepth { return true }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
            default:
                break
            }
        }
        return false
    }
}

extension UntrustedJSON {
    /// The first member name that an object in `bytes` holds twice (compared after unescaping,
    /// so `"a"` and `"\u0061"` are one name), or nil. Foundation's decoder keeps one of them
    /// silently; a request whose meaning depends on which one is refused instead, as a strict
    /// parser would (RFC 8259 leaves it to the receiver). Not a validator: on bytes that are not
    /// JSON it answers whatever it met, and the decoder refuses them after.
    public static func duplicateKey(in bytes: some Collection<UInt8>) -> String? {
        var stack: [JSONObjectNames?] = []  // nil: an array
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "\""):
                let text = readString(&iterator)
                if let last = stack.last, var object = last, object.expectingName {
                    guard object.names.insert(text).inserted else { return text }
                    object.expectingName = false
                    stack[stack.count - 1] = object
                }
            case UInt8(ascii: "{"):
                stack.append(JSONObjectNames())
            case UInt8(ascii: "["):
                stack.append(nil)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !stack.isEmpty { stack.removeLast() }
            case UInt8(ascii: ","):
                if let last = stack.last, var object = last {
                    object.expectingName = true
                    stack[stack.count - 1] = object
                }
            default:
                break
            }
        }
        return nil
    }

    /// The rest of a string whose opening quote was read, unescaped (a bad escape is kept as
    /// read; the decoder refuses it later).
    private static func readString<Bytes: IteratorProtocol<UInt8>>(_ iterator: inout Bytes) -> String {
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        func flush() {
            scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
            raw.removeAll(keepingCapacity: true)
        }
        var pendingHighSurrogate: UInt32?
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "\"") { break }
            guard byte == UInt8(ascii: "\\") else {
                raw.append(byte)
                continue
            }
            guard let escaped = iterator.next() else { break }
            switch escaped {
            case UInt8(ascii: "u"):
                var value: UInt32 = 0
                for _ in 0..<4 {
                    guard let digit = iterator.next(), let nibble = UInt32(String(UnicodeScalar(digit)), radix: 16) else { break }
                    value = value << 4 | nibble
                }
                flush()
                if (0xD800..<0xDC00).contains(value) {
                    pendingHighSurrogate = value
                    continue
                }
                if let high = pendingHighSurrogate, (0xDC00..<0xE000).contains(value) {
                    value = 0x10000 + ((high - 0xD800) << 10) + (value - 0xDC00)
                }
                pendingHighSurrogate = nil
                scalars.append(UnicodeScalar(value) ?? "\u{FFFD}")
                continue
            case UInt8(ascii: "n"): raw.append(0x0A)
            case UInt8(ascii: "t"): raw.append(0x09)
            case UInt8(ascii: "r"): raw.append(0x0D)
            case UInt8(ascii: "b"): raw.append(0x08)
            case UInt8(ascii: "f"): raw.append(0x0C)
            default: raw.append(escaped)  // \" \\ \/
            }
            pendingHighSurrogate = nil
        }
        flush()
        return String(scalars)
    }
}

/// An object's member names so far, and whether the next string is a name (for
/// ``UntrustedJSON/duplicateKey(in:)``).
private struct JSONObjectNames {
    var names: Set<String> = []
    var expectingName = true
}

extension JSONDecoder {
    /// `decode(_:from:)` for bytes billingd does not control; see ``UntrustedJSON``.
    public func decode<T: Decodable>(_ type: T.Type, fromUntrusted bytes: some Collection<UInt8>) throws -> T {
        if UntrustedJSON.nestsTooDeeply(bytes) {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: [],
                    debugDescription: "The given data was not valid JSON: it nests more than \(UntrustedJSON.maximumDepth) arrays and objects."))
        }
        return try decode(type, from: Data(bytes))
    }
}
