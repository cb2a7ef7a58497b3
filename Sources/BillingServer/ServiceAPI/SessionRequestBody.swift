import BillingCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The JSON object body of a service API write, read strictly: at most 64 KiB, an object at the
/// top, no field outside the endpoint's list (a mistyped optional field is never silently
/// ignored), and each field read with the type it must have. `null` counts as absent.
struct SessionRequestBody {
    /// One JSON value, typed only as far as the checks need.
    enum Value: Decodable {
        case null
        case bool(Bool)
        case integer(Int64)
        case number(Double)
        case string(String)
        case array
        case object

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int64.self) {
                self = .integer(value)
            } else if let value = try? container.decode(Double.self) {
                self = .number(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if (try? container.decode([Value].self)) != nil {
                self = .array
            } else {
                _ = try container.decode([String: Value].self)
                self = .object
            }
        }

        /// "a string", "a number" …, for messages.
        var typeName: String {
            switch self {
            case .null: "null"
            case .bool: "a boolean"
            case .integer, .number: "a number"
            case .string: "a string"
            case .array: "an array"
            case .object: "an object"
            }
        }
    }

    static let maximumSize = 64 * 1024

    let fields: [String: Value]

    init(fields: [String: Value]) {
        self.fields = fields
    }

    /// Reads and checks the body. An empty body is an empty object when `emptyAllowed`.
    static func read(_ request: Request, allowed: [String], emptyAllowed: Bool = false) async throws(APIError) -> SessionRequestBody {
        let bytes: [UInt8]
        do {
            bytes = try await RequestBody.collect(request, limit: maximumSize)
        } catch let error as APIError where error.reason == .bodyTooLarge {
            throw APIError(
                .contentTooLarge, reason: .bodyTooLarge,
                message: "The body is larger than \(maximumSize / 1024) KiB; these requests need a few hundred bytes.")
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError(.badRequest, code: "malformed_request", message: "The request body could not be read.")
        }
        try RequestBody.requireJSON(request, body: bytes)
        if bytes.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
            guard emptyAllowed else {
                throw APIError(.badRequest, code: "invalid_json", message: "The body is empty; send a JSON object with \(allowed.joined(separator: ", ")).")
            }
            return SessionRequestBody(fields: [:])
        }
        if let name = UntrustedJSON.duplicateKey(in: bytes) {
            throw APIError(
                .badRequest, code: "duplicate_field",
                message: "The body names \"\(UserRequest.printable(name))\" twice; send each field once.")
        }
        let fields: [String: Value]
        do {
            fields = try JSONDecoder().decode([String: Value].self, fromUntrusted: bytes)
        } catch {
            let isObject = bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "{")
            throw APIError(
                .badRequest, code: "invalid_json",
                message: isObject ? "The body is not valid JSON." : "The body must be a JSON object, such as {\"user\": \"user_42\", …}.")
        }
        for name in fields.keys.sorted() where !allowed.contains(name) {
            throw APIError(
                .badRequest, code: "unknown_field",
                message: "Unknown field \"\(UserRequest.printable(name))\"; this endpoint takes \(allowed.joined(separator: ", ")).")
        }
        return SessionRequestBody(fields: fields)
    }

    /// Whether the field is present and not null.
    func has(_ name: String) -> Bool {
        if case .null = fields[name] ?? .null { return false }
        return true
    }

    func string(_ name: String) throws(APIError) -> String? {
        switch fields[name] ?? .null {
        case .null: return nil
        case .string(let value): return value
        case let other: throw Self.wrongType(name, expected: "a string", got: other)
        }
    }

    func requiredString(_ name: String, hint: String = "") throws(APIError) -> String {
        guard let value = try string(name) else { throw .missingField(name, hint) }
        return value
    }

    func integer(_ name: String) throws(APIError) -> Int64? {
        switch fields[name] ?? .null {
        case .null: return nil
        case .integer(let value): return value
        case .number(let value) where value.rounded() == value && abs(value) < 1e15: return Int64(value)
        case let other: throw Self.wrongType(name, expected: "a whole number", got: other)
        }
    }

    func bool(_ name: String) throws(APIError) -> Bool? {
        switch fields[name] ?? .null {
        case .null: return nil
        case .bool(let value): return value
        case let other: throw Self.wrongType(name, expected: "true or false", got: other)
        }
    }

    static func wrongType(_ name: String, expected: String, got: Value) -> APIError {
        APIError(.badRequest, code: "invalid_field", message: "The field \"\(name)\" must be \(expected), not \(got.typeName).")
    }
}
