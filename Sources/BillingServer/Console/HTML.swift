/// HTML text in which every interpolated `String` is escaped: `"<td>\(name)</td>"` cannot inject
/// markup, whatever `name` holds. Literals are trusted; other HTML values are inserted as they are.
public struct HTML: Sendable, Equatable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public private(set) var text: String

    public init(stringLiteral value: String) {
        text = value
    }

    public init(stringInterpolation: StringInterpolation) {
        text = stringInterpolation.text
    }

    /// Markup joined.
    public init(_ parts: [HTML]) {
        text = parts.map(\.text).joined()
    }

    public static let empty: HTML = ""

    public var description: String { text }

    /// `&`, `<`, `>`, `"` and `'` as entities: safe in text and in quoted attribute values.
    public static func escape(_ value: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(value.utf8.count)
        for character in value.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var text = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            text.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        public mutating func appendLiteral(_ literal: String) {
            text += literal
        }

        /// Text, escaped.
        public mutating func appendInterpolation(_ value: String) {
            text += HTML.escape(value)
        }

        /// Text, escaped; nothing for nil.
        public mutating func appendInterpolation(_ value: String?) {
            if let value { text += HTML.escape(value) }
        }

        public mutating func appendInterpolation(_ value: some BinaryInteger) {
            text += String(value)
        }

        public mutating func appendInterpolation(_ html: HTML) {
            text += html.text
        }

        public mutating func appendInterpolation(_ parts: [HTML]) {
            for part in parts { text += part.text }
        }
    }
}
