/// A problem in a plan catalog: where it is (`tiers[2].limits.seats`) and what is expected there.
public struct PlanCatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One step of the path to the offending value.
    public enum PathComponent: Sendable, Hashable {
        case key(String)
        case index(Int)
    }

    /// Where the problem is, from the document's root; empty for the document itself.
    public var path: [PathComponent]
    /// What is wrong and what is expected, for the operator who edits the file.
    public var message: String

    public init(_ path: [PathComponent], _ message: String) {
        self.path = path
        self.message = message
    }

    /// The path as the operator reads it: `tiers[2].limits.seats`, or `(the document)`.
    public var pathDescription: String {
        Self.describe(path)
    }

    public var description: String {
        "\(pathDescription): \(message)"
    }

    /// `tiers[2].limits.seats` for the given components.
    public static func describe(_ path: [PathComponent]) -> String {
        var text = ""
        for component in path {
            switch component {
            case .key(let key):
                if !text.isEmpty { text += "." }
                text += key
            case .index(let index):
                text += "[\(index)]"
            }
        }
        return text.isEmpty ? "(the document)" : text
    }

    /// The path of a decoder's coding path: integer keys are list indices.
    public static func path(_ codingPath: [any CodingKey]) -> [PathComponent] {
        codingPath.map { key in key.intValue.map(PathComponent.index) ?? .key(key.stringValue) }
    }

    /// The same problem, said in the catalog's words, for an error a decoder threw while reading
    /// the document (a wrong type, a missing key, a bad value).
    public init(decoding error: DecodingError) {
        switch error {
        case .typeMismatch(let type, let context):
            self.init(Self.path(context.codingPath), "expected \(Self.describe(type))")
        case .valueNotFound(let type, let context):
            self.init(Self.path(context.codingPath), "is empty; expected \(Self.describe(type))")
        case .keyNotFound(let key, let context):
            self.init(Self.path(context.codingPath + [key]), "is missing; it is required")
        case .dataCorrupted(let context):
            self.init(Self.path(context.codingPath), context.debugDescription)
        @unknown default:
            self.init([], "\(error)")
        }
    }

    /// What a value of `type` looks like in the file.
    static func describe(_ type: Any.Type) -> String {
        let name = String(describing: type)
        if type == Int64.self || type == Int.self { return "a whole number" }
        if type == String.self { return "a string" }
        if type == Bool.self { return "true or false" }
        if name.contains("Mapping") || name.hasPrefix("Dictionary") || name.hasPrefix("[String") {
            return "a mapping (key: value lines)"
        }
        if name.contains("Sequence") || name.hasPrefix("Array") || name.hasPrefix("[") { return "a list" }
        return name
    }
}
