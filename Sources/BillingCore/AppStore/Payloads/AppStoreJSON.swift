import Foundation

/// Lenient reads of Apple's JSON payloads. Apple adds fields and enum values over time, and a
/// payload that was verified is never refused for a shape billingd did not expect: every member
/// is optional, numbers may come as integers, floating point or strings, and unknown values stay
/// strings.
struct AppStoreJSON: Sendable {
    /// One JSON value, as far as the payload readers care.
    enum Value: Decodable, Sendable {
        case string(String)
        case integer(Int64)
        case number(Double)
        case bool(Bool)
        case object([String: Value])
        case other

        init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .other
            } else if let text = try? single.decode(String.self) {
                self = .string(text)
            } else if let bool = try? single.decode(Bool.self) {
                self = .bool(bool)
            } else if let integer = try? single.decode(Int64.self) {
                self = .integer(integer)
            } else if let number = try? single.decode(Double.self) {
                self = .number(number)
            } else if let object = try? single.decode([String: Value].self) {
                self = .object(object)
            } else {
                self = .other
            }
        }
    }

    let members: [String: Value]

    /// Parses a JSON object; throws when the bytes are not one, or when one of its strings holds
    /// a control character (Apple's never do; see ``StoredText``: the ids would be stored cut short).
    init(_ bytes: [UInt8]) throws(AppStorePayloadError) {
        guard let members = try? JSONDecoder().decode([String: Value].self, fromUntrusted: bytes) else {
            throw AppStorePayloadError("the payload is not a JSON object")
        }
        if let name = Self.memberWithControlCharacter(members) {
            throw AppStorePayloadError("the payload's \(name) holds a control character")
        }
        self.members = members
    }

    /// The path of the first member (at any depth) whose key or string value holds a control character.
    private static func memberWithControlCharacter(_ members: [String: Value], place: String = "") -> String? {
        for (key, value) in members {
            if StoredText.hasControlCharacter(key) { return place + "key" }
            switch value {
            case .string(let text) where StoredText.hasControlCharacter(text): return place + key
            case .object(let nested):
                if let found = memberWithControlCharacter(nested, place: place + key + ".") { return found }
            default: break
            }
        }
        return nil
    }

    init(members: [String: Value]) {
        self.members = members
    }

    func string(_ key: String) -> String? {
        switch members[key] {
        case .string(let text): text.isEmpty ? nil : text
        case .integer(let number): String(number)
        default: nil
        }
    }

    /// An integer member: Apple's ids (`appAppleId`, `webOrderLineItemId`) and Unix-millisecond
    /// dates; tolerated as floating point or a string of digits.
    func int64(_ key: String) -> Int64? {
        switch members[key] {
        case .integer(let number): number
        case .number(let number) where number.isFinite && abs(number) < 9.2e18: Int64(number)
        case .string(let text): Int64(text)
        default: nil
        }
    }

    func bool(_ key: String) -> Bool? {
        switch members[key] {
        case .bool(let value): value
        case .integer(let number): number != 0
        case .string(let text): text == "true" ? true : text == "false" ? false : nil
        default: nil
        }
    }

    func nested(_ key: String) -> AppStoreJSON? {
        if case .object(let members) = members[key] { return AppStoreJSON(members: members) }
        return nil
    }
}

/// A verified payload whose JSON billingd cannot read as the kind of data it claims to be.
public struct AppStorePayloadError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
