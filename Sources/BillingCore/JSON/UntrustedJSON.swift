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
