import BillingStore
import Foundation
import Hummingbird

/// The validated inputs of a user endpoint: the app user of the path and the scope (mode and
/// account) the answer comes from. Anything malformed is a 400 that names it.
public struct UserRequest: Sendable {
    /// The app user id, percent-decoded.
    public let user: String
    public let scope: ServiceScope

    /// Parameters every user endpoint takes.
    static let commonParameters: Set<Substring> = ["account"]

    /// Reads the `{user}` path parameter and `?account=`; refuses query parameters that are not
    /// in `allowed` (plus `account`), so that a mistyped one is never silently ignored.
    public init(_ request: Request, context: some RequestContext, scope base: ServiceScope, allowed: Set<Substring> = []) throws {
        try Self.refuseParameters(request, allowed: allowed)
        user = try Self.user(context.parameters.get("user"))
        scope = base.account(try Self.account(request))
    }

    /// Refuses query parameters that are not in `allowed` (plus `account`).
    static func refuseParameters(_ request: Request, allowed: Set<Substring>) throws {
        for (name, _) in request.uri.queryParameters where !Self.commonParameters.contains(name) && !allowed.contains(name) {
            let names = Self.commonParameters.union(allowed)
            throw APIError(
                .badRequest, code: "unknown_parameter",
                message: "Unknown query parameter \"\(Self.printable(name))\"; this endpoint takes \(names.sorted().joined(separator: ", ")).")
        }
    }

    /// `?account=acct_…`, nil for the platform account.
    static func account(_ request: Request) throws -> String? {
        try account(Self.single(request.uri.queryParameters, "account"))
    }

    /// An `account` value: a connected account's `acct_…` id, nil when absent.
    static func account(_ account: String?) throws -> String? {
        if let account, !ServiceScope.isAccountID(account) {
            throw APIError(
                .badRequest, code: "invalid_parameter",
                message: "account=\(Self.printable(account)) is not a Stripe account id; use acct_… (a connected account), or leave it out for the platform account.")
        }
        return account
    }

    /// The largest app user id accepted, in UTF-8 bytes.
    package static let maximumUserBytes = 255

    /// The app user of a raw path segment: percent-decoded, 1 to 255 bytes of UTF-8, no control
    /// characters.
    static func user(_ raw: String?) throws -> String {
        guard let raw, !raw.isEmpty else {
            throw APIError(.badRequest, code: "invalid_user", message: "The app user id in the path is empty.")
        }
        guard let decoded = percentDecoded(raw) else {
            throw APIError(
                .badRequest, code: "invalid_user",
                message: "The app user id in the path is not valid percent-encoded UTF-8; encode it as a URL path segment.")
        }
        if let problem = userProblem(decoded) {
            throw APIError(.badRequest, code: "invalid_user", message: "The app user id in the path \(problem).")
        }
        return decoded
    }

    /// What is wrong with an app user id (already decoded), nil when nothing: empty, over 255
    /// bytes of UTF-8, or holding a control character.
    static func userProblem(_ user: String) -> String? {
        if user.isEmpty { return "is empty" }
        if user.utf8.count > maximumUserBytes {
            return "is \(user.utf8.count) bytes long; at most \(maximumUserBytes) bytes of UTF-8 are accepted"
        }
        if user.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) { return "contains a control character" }
        return nil
    }

    /// `text` with `%XX` escapes decoded; nil when an escape is malformed or the result is not
    /// UTF-8. Text without `%` is returned as it is.
    static func percentDecoded(_ text: String) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The value of a parameter given at most once; nil when absent, 400 when empty.
    static func single(_ parameters: Parameters, _ name: Substring) throws -> String? {
        let values = parameters[values: name]
        guard values.count <= 1 else {
            throw APIError(.badRequest, code: "invalid_parameter", message: "Give \(name) at most once.")
        }
        guard let value = values.first else { return nil }
        // An empty value is refused, not taken as absent: `?account=` from an unset template
        // variable must not quietly answer for the platform account.
        guard !value.isEmpty else {
            throw APIError(.badRequest, code: "invalid_parameter", message: "\(name) is empty: give it a value, or leave it out.")
        }
        return String(value)
    }

    /// `limit` of a list: 1 to 100, 10 when absent.
    static func limit(_ parameters: Parameters) throws -> Int {
        guard let text = try single(parameters, "limit") else { return 10 }
        guard let limit = Int(text), (1...100).contains(limit) else {
            throw APIError(.badRequest, code: "invalid_parameter", message: "limit=\(printable(text)) is not valid: use a whole number from 1 to 100 (default 10).")
        }
        return limit
    }

    /// Whether `text` is shaped like a Stripe object id: at most 255 letters, digits and underscores.
    static func isObjectID(_ text: some StringProtocol) -> Bool {
        let bytes = Array(text.utf8)
        return !bytes.isEmpty && bytes.count <= 255 && bytes.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == UInt8(ascii: "_")
        }
    }

    /// `starting_after` of a list: an object id as Stripe writes them.
    static func startingAfter(_ parameters: Parameters) throws -> String? {
        guard let text = try single(parameters, "starting_after") else { return nil }
        guard isObjectID(text) else {
            throw APIError(
                .badRequest, code: "invalid_parameter",
                message: "starting_after=\(printable(text)) is not an invoice id; use the id of the last invoice of the previous page (in_…).")
        }
        return text
    }

    /// A value safe to echo in a message: control characters dropped, at most 100 characters.
    static func printable(_ value: some StringProtocol) -> String {
        let cleaned = String(String.UnicodeScalarView(value.unicodeScalars.filter { $0.properties.generalCategory != .control }))
        return cleaned.count > 100 ? String(cleaned.prefix(100)) + "…" : cleaned
    }
}
