import BillingCore
import Foundation
import Hummingbird

/// A JSON object request body read strictly: `application/json` (or no content type), a size
/// limit, only known members, and typed getters whose errors name the member (`events[3].quantity`).
package struct JSONObjectBody {
    /// A member as sent: JSON's types, with integers apart from other numbers.
    package enum Value: Decodable {
        case integer(Int64)
        case number(Double)
        case string(String)
        case bool(Bool)
        case object([String: Value])
        case array([Value])
        case null

        /// Tries the likeliest types first: each failed attempt throws, which costs more than
        /// the decoding itself.
        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let integer = try? container.decode(Int64.self) {
                self = .integer(integer)
            } else if let text = try? container.decode(String.self) {
                self = .string(text)
            } else if container.decodeNil() {
                self = .null
            } else if let bool = try? container.decode(Bool.self) {
                self = .bool(bool)
            } else if let number = try? container.decode(Double.self) {
                self = .number(number)
            } else if let array = try? container.decode([Value].self) {
                self = .array(array)
            } else {
                self = .object(try container.decode([String: Value].self))
            }
        }

        var typeName: String {
            switch self {
            case .integer: "an integer"
            case .number: "a number with a fraction"
            case .string: "a string"
            case .bool: "a boolean"
            case .object: "an object"
            case .array: "an array"
            case .null: "null"
            }
        }
    }

    package let members: [String: Value]
    /// Where the object is, for error messages: "" for the body, "events[3]." in a list.
    package let place: String

    init(members: [String: Value], place: String = "", allowed: [String]) throws {
        for name in members.keys.sorted() where !allowed.contains(name) {
            throw APIError(
                .badRequest, code: "unknown_field",
                message: "Unknown field \"\(place)\(UserRequest.printable(name))\"; this takes \(allowed.joined(separator: ", ")).")
        }
        self.members = members
        self.place = place
    }

    /// Reads the request's body as a JSON object with only `allowed` members.
    init(_ request: Request, limit: Int, allowed: [String]) async throws {
        let bytes = try await RequestBody.collect(request, limit: limit)
        try RequestBody.requireJSON(request, body: bytes)
        try self.init(bytes: bytes, allowed: allowed)
    }

    /// Reads a body's bytes as a JSON object with only `allowed` members; pure, so that the
    /// usage fuzz target reaches it without a server.
    package init(bytes: [UInt8], allowed: [String]) throws {
        try RequestBody.refuseDuplicateMembers(bytes)
        guard let members = try? JSONDecoder().decode([String: Value].self, fromUntrusted: bytes) else {
            throw APIError(
                .badRequest, code: "invalid_body",
                message: "The body is not a JSON object; send {\(allowed.map { "\"\($0)\": …" }.joined(separator: ", "))}.")
        }
        try self.init(members: members, allowed: allowed)
    }

    func invalid(_ name: String, _ expected: String) -> APIError {
        APIError(.badRequest, code: "invalid_field", message: "\(place)\(name) must be \(expected).", extra: ["field": place + name])
    }

    func missing(_ name: String, _ expected: String) -> APIError {
        APIError(.badRequest, code: "missing_field", message: "\(place)\(name) is required: \(expected).", extra: ["field": place + name])
    }

    /// An integer in `range`; nil when absent (or null) and not required.
    package func integer(_ name: String, in range: ClosedRange<Int64>, required: Bool, _ expected: String) throws -> Int64? {
        switch members[name] {
        case nil, .null?:
            if required { throw missing(name, expected) }
            return nil
        case .integer(let value)?:
            guard range.contains(value) else { throw invalid(name, expected + ", not \(value)") }
            return value
        case let other?:
            throw invalid(name, expected + ", not \(other.typeName)")
        }
    }

    /// A non-empty string of at most `maximumBytes` UTF-8 bytes without control characters.
    package func string(_ name: String, maximumBytes: Int, _ expected: String) throws -> String {
        switch members[name] {
        case nil, .null?:
            throw missing(name, expected)
        case .string(let text)?:
            guard !text.isEmpty, text.utf8.count <= maximumBytes,
                !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { throw invalid(name, expected) }
            return text
        case let other?:
            throw invalid(name, expected + ", not \(other.typeName)")
        }
    }

    /// A list of objects, each with only `allowed` members.
    package func objects(_ name: String, maximum: Int, allowed: [String]) throws -> [JSONObjectBody] {
        guard case .array(let items)? = members[name] else {
            throw members[name] == nil ? missing(name, "a list of at most \(maximum) objects") : invalid(name, "a list of objects")
        }
        guard !items.isEmpty, items.count <= maximum else {
            throw APIError(
                .badRequest, code: "invalid_field", message: "\(place)\(name) holds \(items.count) items; send 1 to \(maximum).",
                extra: ["field": place + name])
        }
        return try items.enumerated().map { index, item in
            guard case .object(let members) = item else { throw invalid("\(name)[\(index)]", "an object") }
            return try JSONObjectBody(members: members, place: "\(place)\(name)[\(index)].", allowed: allowed)
        }
    }
}
