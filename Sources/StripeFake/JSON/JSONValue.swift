/// A JSON value as Stripe sends it, for building objects and for tests that change them.
///
/// Integers are kept apart from floating-point numbers so that amounts and timestamps stay exact.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

// MARK: - Reading and writing members

extension JSONValue {
    /// The member `key` of an object; nil for a missing member or a non-object. Setting on a
    /// non-object makes it an object; setting nil removes the member.
    public subscript(key: String) -> JSONValue? {
        get {
            guard case .object(let members) = self else { return nil }
            return members[key]
        }
        set {
            var members: [String: JSONValue]
            if case .object(let existing) = self {
                members = existing
                self = .null  // drop the second reference so that the dictionary is changed in place
            } else {
                members = [:]
            }
            members[key] = newValue
            self = .object(members)
        }
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The value at a dotted path of object members, e.g. `"parent.subscription_details.subscription"`.
    public subscript(path path: String) -> JSONValue? {
        var value = self
        var rest = path[...]
        while let dot = rest.firstIndex(of: ".") {
            guard let member = value[String(rest[..<dot])] else { return nil }
            value = member
            rest = rest[rest.index(after: dot)...]
        }
        return value[String(rest)]
    }

    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    public var intValue: Int64? {
        if case .int(let int) = self { return int }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let bool) = self { return bool }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The members that differ from `old`, with their old values (null where a member was absent),
    /// recursing into objects: the shape of an event's `data.previous_attributes`.
    func previousAttributes(comparedTo old: JSONValue) -> JSONValue? {
        guard case .object(let new) = self, case .object(let previous) = old else { return nil }
        var changed: [String: JSONValue] = [:]
        for key in Set(new.keys).union(previous.keys) {
            let before = previous[key] ?? .null
            let after = new[key] ?? .null
            guard before != after else { continue }
            if case .object = before, case .object = after, let nested = after.previousAttributes(comparedTo: before) {
                changed[key] = nested
            } else {
                changed[key] = before
            }
        }
        return changed.isEmpty ? nil : .object(changed)
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue {
    /// A string, or null when nil.
    init(_ string: String?) { self = string.map { .string($0) } ?? .null }
    /// An integer, or null when nil.
    init(_ int: Int64?) { self = int.map { .int($0) } ?? .null }
    /// An object of string members, Stripe's `metadata`.
    init(_ strings: [String: String]) { self = .object(strings.mapValues { .string($0) }) }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { String(decoding: serialized(), as: UTF8.self) }
}
