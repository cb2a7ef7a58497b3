#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BillingStore
import Foundation

/// Writing results: JSON for scripts, aligned text for people, progress only on a terminal.
enum Output {
    /// Whether standard error is a terminal (progress lines go there).
    static var stderrIsTerminal: Bool { isatty(2) == 1 }

    /// `text` safe to print to a terminal: every control character but line feed and tab
    /// (escape sequences, carriage returns, backspaces, C1 controls) written as `\u{1B}`, so
    /// that an id or a path from outside can neither recolour nor rewrite what a person reads.
    static func printable(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if scalar.properties.generalCategory == .control, scalar != "\n", scalar != "\t" {
                result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Pretty, key-sorted JSON of a value made of dictionaries, arrays, strings and numbers.
    static func json(_ value: Any) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: unwrap(value), options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data("null".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Pretty, key-sorted JSON of an `Encodable` report; `fallback` if it cannot be encoded.
    static func json(encoding value: some Encodable, fallback: String = "{}") -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? fallback
    }

    private static func unwrap(_ value: Any) -> Any {
        switch value {
        case let json as LedgerJSON: return json.value
        case let dictionary as [String: any Sendable]: return dictionary.mapValues { unwrap($0) }
        case let dictionary as [String: Any]: return dictionary.mapValues { unwrap($0) }
        case let array as [any Sendable]: return array.map { unwrap($0) }
        case let array as [Any]: return array.map { unwrap($0) }
        default: return value
        }
    }

    /// A table with a header row and left-aligned columns.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n")
    }

    /// Writes a progress line in place on a terminal; does nothing otherwise.
    static func progress(_ text: String) {
        guard stderrIsTerminal else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K\(text)".utf8))
    }

    static func endProgress() {
        guard stderrIsTerminal else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }

    /// A line for the person at the terminal, on standard error (standard output stays the result).
    static func note(_ text: String) {
        FileHandle.standardError.write(Data("\(text)\n".utf8))
    }

    /// ISO 8601 UTC of Unix seconds.
    static func iso8601(seconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
