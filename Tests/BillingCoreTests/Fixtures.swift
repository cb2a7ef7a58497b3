import Foundation
import Testing

/// The committed fixtures under `Fixtures/` (written by scripts/gen-fixtures), found from this file's path.
enum Fixtures {
    /// The repository root: Tests/BillingCoreTests/Fixtures.swift is three levels below it.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The bytes of `Fixtures/<path>`.
    static func data(_ path: String) throws -> Data {
        try Data(contentsOf: root.appendingPathComponent("Fixtures").appendingPathComponent(path))
    }

    /// The bytes of `Fixtures/objects/<name>.json`.
    static func object(_ name: String) throws -> Data {
        try data("objects/\(name).json")
    }

    /// `Fixtures/objects/<name>.json` decoded as `type`.
    static func decode<T: Decodable>(_ type: T.Type, _ name: String) throws -> T {
        try JSONDecoder().decode(type, from: object(name))
    }

    /// `Fixtures/objects/<name>.json` as a mutable JSON object, to derive variants from.
    static func jsonObject(_ name: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: object(name)) as? [String: Any])
    }

    /// `object` as JSON bytes.
    static func json(_ object: [String: Any]) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// Every line of Stripe's event type list (`Fixtures/event-types.txt`).
    static func eventTypes() throws -> [String] {
        let text = try #require(String(data: data("event-types.txt"), encoding: .utf8))
        return text.split(whereSeparator: \.isNewline).map(String.init)
    }
}
