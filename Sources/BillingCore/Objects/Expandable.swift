/// A reference to another Stripe object: the id, whether Stripe sent the bare id or the expanded object.
public struct Expandable: Decodable, Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let id: String

    public init(id: String) {
        self.id = id
    }

    public init(stringLiteral id: String) {
        self.id = id
    }

    public init(from decoder: any Decoder) throws {
        if let id = try? decoder.singleValueContainer().decode(String.self) {
            self.id = id
        } else {
            // An expanded object: only its id matters here; its other fields are decoded elsewhere if needed.
            self.id = try ExpandedObject(from: decoder).id
        }
    }

    public var description: String { id }

    private struct ExpandedObject: Decodable {
        let id: String
    }
}
