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
/// secret or key, an e-mail address or a card number, whatever code logged it.
public struct LineLogHandler: LogHandler {
    public enum Format: String, Sendable, CaseIterable {
        case text, json
    }

    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let format: Format
    let sink: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level, format: Format, sink: (@Sendable (String) -> Void)? = nil) {
        self.label = label
        self.logLevel = level
        self.format = format
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
        let message = Redaction.mask("\(event.message)")
        let pairs = merged.sorted { $0.key < $1.key }.map { ($0.key, Redaction.mask("\($0.value)")) }
        switch format {
        case .text:
            var line = "\(timestamp) \(event.level.rawValue.uppercased().padding(toLength: 7, withPad: " ", startingAt: 0)) \(message)"
            for (key, value) in pairs {
                line += " \(key)=\(value.contains(" ") || value.isEmpty ? "\"\(value)\"" : value)"
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

/// Masks what must never reach a log: Stripe secrets and keys, e-mail addresses and card
/// numbers (runs of 13 to 19 digits). Cheap when there is nothing to mask.
public enum Redaction {
    static let secretPrefixes = ["whsec_", "sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_"]

    public static func mask(_ text: String) -> String {
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
        return words.joined()
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
        let digits = word.compactMap(\.wholeNumberValue)
        if digits.count >= 13, digits.count <= 19, word.allSatisfy({ $0.isNumber || $0 == "-" }), passesLuhn(digits) {
            return "[card number redacted]"
        }
        return word
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
}
