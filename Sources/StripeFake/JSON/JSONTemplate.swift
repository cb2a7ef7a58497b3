/// The serialized bytes of one object with holes where its varying members go, so that many
/// objects of one shape are written by copying bytes instead of building and sorting a tree each.
///
/// Made from a real object and the paths of its varying members; ``render(_:into:)`` writes
/// the literal bytes between the holes and each hole's fill in turn. Seeding checks a sample of
/// renders against the object builders, so the two cannot drift apart unnoticed.
struct JSONTemplate: Sendable {
    /// What goes into a hole.
    enum Fill: Sendable {
        case null
        case bool(Bool)
        case int(Int64)
        case string(String)
        case value(JSONValue)
        /// Already serialized JSON, e.g. a price embedded in every subscription item.
        case raw([UInt8])

        static func int(_ int: Int64?) -> Fill { int.map { .int($0) } ?? .null }
        static func string(_ string: String?) -> Fill { string.map { .string($0) } ?? .null }
    }

    /// `holes.count + 1` runs of literal bytes.
    private let literals: [[UInt8]]
    /// Which fill goes into each gap between literals.
    private let holes: [Int]

    /// - Parameters:
    ///   - object: a real object of the shape.
    ///   - paths: the varying members, dotted, with array indices as numbers (`items.data.0.price`).
    init?(_ object: JSONValue, holesAt paths: [String]) {
        var skeleton = object
        for (index, path) in paths.enumerated() {
            guard
                skeleton.replace(
                    at: path.split(separator: ".").map(String.init)[...], with: .string(Self.marker(index)))
            else { return nil }
        }
        let bytes = skeleton.serialized()
        var literals: [[UInt8]] = []
        var holes: [Int] = []
        var start = 0
        var position = 0
        let open = Array(#""\u0001"#.utf8)
        let close = Array(#"\u0001""#.utf8)
        while position + open.count <= bytes.count {
            guard bytes[position..<position + open.count].elementsEqual(open) else {
                position += 1
                continue
            }
            var end = position + open.count
            var number = 0
            while end < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]) {
                number = number * 10 + Int(bytes[end] - UInt8(ascii: "0"))
                end += 1
            }
            guard end + close.count <= bytes.count, bytes[end..<end + close.count].elementsEqual(close) else {
                return nil
            }
            literals.append(Array(bytes[start..<position]))
            holes.append(number)
            position = end + close.count
            start = position
        }
        literals.append(Array(bytes[start...]))
        guard holes.sorted() == Array(0..<paths.count) else { return nil }
        self.literals = literals
        self.holes = holes
    }

    private static func marker(_ index: Int) -> String { "\u{1}\(index)\u{1}" }

    /// Writes the object with `fills` (one per path, in the order of the paths).
    func render(_ fills: [Fill], into bytes: inout [UInt8]) {
        for (index, hole) in holes.enumerated() {
            bytes.append(contentsOf: literals[index])
            switch fills[hole] {
            case .null: bytes.append(contentsOf: "null".utf8)
            case .bool(let bool): bytes.append(contentsOf: bool ? "true".utf8 : "false".utf8)
            case .int(let int): JSONValue.writeInteger(int, into: &bytes)
            case .string(let string): JSONValue.writeString(string, into: &bytes)
            case .value(let value): value.write(into: &bytes)
            case .raw(let raw): bytes.append(contentsOf: raw)
            }
        }
        bytes.append(contentsOf: literals[literals.count - 1])
    }

    /// The object with `fills`, in an array no larger than it is, written through `scratch`.
    func render(_ fills: [Fill], using scratch: inout [UInt8]) -> [UInt8] {
        scratch.removeAll(keepingCapacity: true)
        render(fills, into: &scratch)
        return exactCopy(of: scratch)
    }

    func render(_ fills: [Fill]) -> [UInt8] {
        var scratch: [UInt8] = []
        return render(fills, using: &scratch)
    }
}

extension JSONValue {
    /// Replaces the member at `path` (numbers index arrays); false when the path does not exist.
    fileprivate mutating func replace(at path: ArraySlice<String>, with replacement: JSONValue) -> Bool {
        guard let first = path.first else {
            self = replacement
            return true
        }
        switch self {
        case .object(var members):
            guard var member = members[first] else { return false }
            self = .null
            defer { self = .object(members) }
            guard member.replace(at: path.dropFirst(), with: replacement) else { return false }
            members[first] = member
            return true
        case .array(var elements):
            guard let index = Int(first), elements.indices.contains(index) else { return false }
            self = .null
            defer { self = .array(elements) }
            return elements[index].replace(at: path.dropFirst(), with: replacement)
        default:
            return false
        }
    }
}
