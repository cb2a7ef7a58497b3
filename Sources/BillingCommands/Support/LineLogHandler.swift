#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
// BillingCore depends on swift-certificates, which loads CoreFoundation; Swift then counts libc's
// `timespec` as CoreFoundation's, and MemberImportVisibility wants that module imported here.
#if canImport(CoreFoundation)
import CoreFoundation
#endif
import Foundation
import Logging

/// Writes one line per log record to standard error: readable `key=value` text, or JSON
/// lines for log shippers. As a last line of defence it masks anything shaped like a Stripe
/// secret or key, an e-mail address or a card number, and the configured secrets themselves,
/// whatever code logged it; cuts every value to ``Redaction/maximumLength``; and in text
/// escapes control characters, so that no logged value (an event type with `\n`, an id with a
/// NUL, a terminal escape) can forge or break a line.
public struct LineLogHandler: LogHandler {
    public enum Format: String, Sendable, CaseIterable {
        case text, json
    }

    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let format: Format
    /// Values that must never be logged as they are (API tokens, webhook secrets, keys).
    let secrets: [String]
    let sink: @Sendable (String) -> Void

    /// - Parameter secrets: configured secret values, masked wherever they appear (a token used
    ///   as a path segment, say); values under 8 characters are ignored.
    public init(
        label: String, level: Logger.Level, format: Format, secrets: [String] = [], sink: (@Sendable (String) -> Void)? = nil
    ) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.secrets = secrets.filter { $0.utf8.count >= 8 }
        self.sink = sink ?? { line in
            // write(2) on descriptor 2: one call per line, so lines from concurrent tasks
            // never interleave mid-line (stdio's `stderr` is not Sendable in Swift 6).
            var bytes = Array(line.utf8)
            bytes.withUnsafeMutableBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { break }
                    offset += written
                }
            }
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let timestamp = Self.timestamp()
        let message = Redaction.clean("\(event.message)", secrets: secrets)
        let pairs = merged.sorted { $0.key < $1.key }.map { ($0.key, Redaction.clean("\($0.value)", secrets: secrets)) }
        switch format {
        case .text:
            var line = "\(timestamp) \(event.level.rawValue.uppercased().padding(toLength: 7, withPad: " ", startingAt: 0)) \(Redaction.escaped(message))"
            for (key, value) in pairs {
                line += " \(Redaction.escaped(key))=\(Redaction.quoted(value))"
            }
            sink(line + "\n")
        case .json:
            var object: [String: String] = ["ts": timestamp, "level": event.level.rawValue, "msg": message, "logger": label]
            for (key, value) in pairs where object[key] == nil { object[key] = value }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            sink(String(decoding: data, as: UTF8.self) + "\n")
        }
    }

    private static func timestamp() -> String {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        var seconds = time_t(time.tv_sec)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(time.tv_nsec / 1_000_000))
    }
}

/// Masks what must never reach a log: Stripe secrets and keys, e-mail addresses, card numbers
/// (13 to 19 digits passing the Luhn check, wherever they stand: a path segment, inside an event
/// type) and configured secrets; cuts what is left to a bounded length. Cheap when there is
/// nothing to mask.
public enum Redaction {
    static let secretPrefixes = ["whsec_", "sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_"]

    /// The most characters of one logged value (or message); a 60 KB path is cut to this.
    public static let maximumLength = 1024

    /// `text` masked (``mask(_:secrets:)``), then cut to ``maximumLength`` characters.
    public static func clean(_ text: String, secrets: [String] = []) -> String {
        let masked = mask(text, secrets: secrets)
        guard masked.utf8.count > maximumLength, masked.count > maximumLength else { return masked }
        return String(masked.prefix(maximumLength)) + "…[cut, \(masked.utf8.count) bytes]"
    }

    public static func mask(_ text: String, secrets: [String] = []) -> String {
        var text = text
        for secret in secrets where text.contains(secret) {
            text = text.replacingOccurrences(of: secret, with: "[redacted]")
        }
        guard needsMasking(text) else { return text }
        var words: [String] = []
        var current = ""
        for character in text {
            if character.isWhitespace || character == "," || character == "\"" || character == "'" || character == "=" {
                words.append(maskWord(current))
                words.append(String(character))
                current = ""
            } else {
                current.append(character)
            }
        }
        words.append(maskWord(current))
        return maskCardNumbers(words.joined())
    }

    private static func needsMasking(_ text: String) -> Bool {
        if text.contains("@") { return true }
        if secretPrefixes.contains(where: text.contains) { return true }
        var run = 0
        for byte in text.utf8 {
            if byte >= 0x30 && byte <= 0x39 {
                run += 1
                if run >= 13 { return true }
            } else if byte != 0x20 && byte != 0x2D {
                run = 0
            }
        }
        return false
    }

    private static func maskWord(_ word: String) -> String {
        if let prefix = secretPrefixes.first(where: word.contains) { return "\(prefix)[redacted]" }
        if let at = word.firstIndex(of: "@"), at != word.startIndex, word[word.index(after: at)...].contains(".") {
            return "[email redacted]"
        }
        return word
    }

    /// Masks every run of digits (single hyphens between them allowed, as `4242-4242-…`) that is
    /// a card number: 13 to 19 digits passing the Luhn check, or more than 19, which may hide one.
    /// Letters or punctuation around a run do not shield it.
    private static func maskCardNumbers(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
        while index < bytes.count {
            guard isDigit(bytes[index]) else {
                output.append(bytes[index])
                index += 1
                continue
            }
            var end = index
            var digits: [Int] = []
            while end < bytes.count {
                if isDigit(bytes[end]) {
                    digits.append(Int(bytes[end] - 0x30))
                    end += 1
                } else if bytes[end] == 0x2D, end + 1 < bytes.count, isDigit(bytes[end + 1]) {
                    end += 1
                } else {
                    break
                }
            }
            if digits.count > 19 || (digits.count >= 13 && passesLuhn(digits)) {
                output.append(contentsOf: Array("[card number redacted]".utf8))
            } else {
                output.append(contentsOf: bytes[index..<end])
            }
            index = end
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The check every card number passes (and 9 in 10 other digit strings fail).
    static func passesLuhn(_ digits: [Int]) -> Bool {
        var sum = 0
        for (offset, digit) in digits.reversed().enumerated() {
            if offset % 2 == 1 {
                let doubled = digit * 2
                sum += doubled > 9 ? doubled - 9 : doubled
            } else {
                sum += digit
            }
        }
        return sum % 10 == 0
    }

    /// `text` with every control character escaped (`\n`, `\r`, `\t`, `\u{1B}` …), the line and
    /// paragraph separators too, and backslashes doubled, so that it stays on its line and reads
    /// back unambiguously.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where needsEscape(scalar): result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// A text-format value: escaped, and in double quotes (inner quotes escaped) when it is
    /// empty or holds a space, a quote or `=`, so that it cannot pass for another `key=value`.
    public static func quoted(_ value: String) -> String {
        let value = escaped(value)
        guard value.isEmpty || value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
            || scalar == "\\"
    }
}
