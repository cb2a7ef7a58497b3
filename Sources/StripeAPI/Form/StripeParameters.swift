/// The parameters of one Stripe call, in the order given, encoded the way Stripe's own libraries
/// encode them: nested values with brackets (`metadata[app_user_id]=u1`, `expand[0]=data.items`).
///
/// Encoding rules, fixed so that the same parameters always give the same bytes:
/// - every byte outside RFC 3986's unreserved set (`A-Z a-z 0-9 - . _ ~`) is percent-encoded,
///   brackets included (`%5B`, `%5D`), a space as `%20`;
/// - arrays use explicit indexes (`expand[0]`, `line_items[1][price]`);
/// - an empty array or dictionary encodes nothing; to clear a value on Stripe send `""`.
public struct StripeParameters: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    /// One parameter; its value may nest.
    public struct Entry: Sendable, Equatable {
        public var key: String
        public var value: StripeFormValue

        public init(key: String, value: StripeFormValue) {
            self.key = key
            self.value = value
        }
    }

    /// The parameters in order; keys are unique.
    public private(set) var entries: [Entry]

    public init() { entries = [] }

    /// Builds parameters in the given order; a repeated key keeps its first place and last value.
    public init(_ pairs: some Sequence<(String, StripeFormValue)>) {
        entries = []
        for (key, value) in pairs { self[key] = value }
    }

    public init(dictionaryLiteral elements: (String, StripeFormValue)...) {
        self.init(elements)
    }

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }
    public var keys: [String] { entries.map(\.key) }

    /// The value for a key; setting a new key appends it, setting nil removes it.
    public subscript(key: String) -> StripeFormValue? {
        get { entries.first { $0.key == key }?.value }
        set {
            let index = entries.firstIndex { $0.key == key }
            switch (index, newValue) {
            case let (index?, value?): entries[index].value = value
            case let (index?, nil): entries.remove(at: index)
            case let (nil, value?): entries.append(Entry(key: key, value: value))
            case (nil, nil): break
            }
        }
    }

    /// These parameters followed by `other`'s; on a repeated key `other`'s value wins.
    public func merging(_ other: StripeParameters) -> StripeParameters {
        var merged = self
        for entry in other.entries { merged[entry.key] = entry.value }
        return merged
    }

    /// The flat `name=value` pairs before percent-encoding, e.g. `("metadata[app_user_id]", "u1")`.
    public func flattened() -> [(name: String, value: String)] {
        var pairs: [(name: String, value: String)] = []
        for entry in entries { entry.value.flatten(into: &pairs, name: entry.key) }
        return pairs
    }

    /// The `application/x-www-form-urlencoded` form, also used as a query string.
    public func encoded() -> String {
        var out = [UInt8]()
        for (name, value) in flattened() {
            if !out.isEmpty { out.append(UInt8(ascii: "&")) }
            FormEncoding.percentEncode(name, into: &out)
            out.append(UInt8(ascii: "="))
            FormEncoding.percentEncode(value, into: &out)
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// One parameter value: a scalar, or an array or dictionary encoded with brackets.
public indirect enum StripeFormValue: Sendable, Equatable, ExpressibleByStringInterpolation, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    case string(String)
    case integer(Int64)
    case bool(Bool)
    case array([StripeFormValue])
    case dictionary(StripeParameters)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: StripeFormValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, StripeFormValue)...) { self = .dictionary(StripeParameters(elements)) }

    /// Metadata or any other string map, keys sorted so that the encoding is stable.
    public static func strings(_ values: [String: String]) -> StripeFormValue {
        .dictionary(StripeParameters(values.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
    }

    func flatten(into pairs: inout [(name: String, value: String)], name: String) {
        switch self {
        case .string(let value): pairs.append((name, value))
        case .integer(let value): pairs.append((name, String(value)))
        case .bool(let value): pairs.append((name, value ? "true" : "false"))
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                element.flatten(into: &pairs, name: "\(name)[\(index)]")
            }
        case .dictionary(let parameters):
            for entry in parameters.entries {
                entry.value.flatten(into: &pairs, name: "\(name)[\(entry.key)]")
            }
        }
    }
}

/// Percent-encoding shared by the form body and the query string.
enum FormEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Whether a byte is in RFC 3986's unreserved set and so is sent as it is.
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    static func percentEncode(_ text: String, into out: inout [UInt8]) {
        for byte in text.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0f)])
            }
        }
    }

    static func percentEncode(_ text: String) -> String {
        var out = [UInt8]()
        percentEncode(text, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
