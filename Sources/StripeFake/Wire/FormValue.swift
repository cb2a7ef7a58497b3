/// A request's parameters as Stripe reads them from a query string or a form body with bracket
/// syntax: `metadata[app_user_id]=u1`, `line_items[0][price]=price_1`, `expand[]=customer`.
public enum FormValue: Sendable, Hashable {
    case string(String)
    /// From `name[]=…` or from `name[0]=…`, `name[1]=…`.
    case array([FormValue])
    case object([String: FormValue])

    /// No parameters at all.
    public static let empty = FormValue.object([:])

    public subscript(key: String) -> FormValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    public subscript(index: Int) -> FormValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    public var arrayValue: [FormValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var objectValue: [String: FormValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
}

/// Why a query string or form body could not be read; `parameter` names the offending key.
struct FormDecodingError: Error, Equatable {
    let parameter: String
    let reason: String
}

extension FormValue {
    /// Decodes `application/x-www-form-urlencoded` text (also a URL query): `+` is a space,
    /// `%XX` a byte; a repeated plain key keeps its last value, like Stripe.
    static func decode(_ text: String) throws(FormDecodingError) -> FormValue {
        var root = Node.object([:], order: [])
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let rawKey = try percentDecode(parts[0], parameter: String(parts[0]))
            let value = try percentDecode(parts.count > 1 ? parts[1] : "", parameter: rawKey)
            let path = try keyPath(rawKey)
            try root.insert(value, at: path[...], fullKey: rawKey)
        }
        return try root.finished(name: "")
    }

    /// `line_items[0][price]` → `["line_items", "0", "price"]`; `expand[]` → `["expand", ""]`.
    private static func keyPath(_ key: String) throws(FormDecodingError) -> [String] {
        guard let open = key.firstIndex(of: "[") else {
            guard !key.isEmpty, !key.contains("]") else {
                throw FormDecodingError(parameter: key, reason: "Invalid parameter name")
            }
            return [key]
        }
        let base = String(key[..<open])
        guard !base.isEmpty else { throw FormDecodingError(parameter: key, reason: "Invalid parameter name") }
        var path = [base]
        var rest = key[open...]
        while !rest.isEmpty {
            guard rest.first == "[", let close = rest.firstIndex(of: "]") else {
                throw FormDecodingError(parameter: key, reason: "Invalid parameter name")
            }
            let segment = rest[rest.index(after: rest.startIndex)..<close]
            guard !segment.contains("[") else {
                throw FormDecodingError(parameter: key, reason: "Invalid parameter name")
            }
            path.append(String(segment))
            rest = rest[rest.index(after: close)...]
        }
        return path
    }

    private static func percentDecode(_ text: Substring, parameter: String) throws(FormDecodingError) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else {
            return String(text)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    throw FormDecodingError(parameter: parameter, reason: "Invalid percent-encoding")
                }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw FormDecodingError(parameter: parameter, reason: "Invalid UTF-8")
        }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The tree while it is being built: `[]` appends to a list, any other segment names a member.
    private indirect enum Node {
        case leaf(String)
        case list([Node])
        case object([String: Node], order: [String])

        /// A node just created for a key, not yet given a value.
        var isNew: Bool {
            if case .object(_, let order) = self { return order.isEmpty }
            return false
        }

        var isLeafOrNew: Bool {
            if case .leaf = self { return true }
            return isNew
        }

        mutating func insert(_ value: String, at path: ArraySlice<String>, fullKey: String) throws(FormDecodingError) {
            guard let segment = path.first else {
                guard isLeafOrNew else { throw FormDecodingError(parameter: fullKey, reason: "Invalid hash") }
                self = .leaf(value)
                return
            }
            if segment.isEmpty {
                // `name[]=value`: only as the last segment, as Stripe's own libraries send it.
                guard path.count == 1 else { throw FormDecodingError(parameter: fullKey, reason: "Invalid array") }
                if case .list(var elements) = self {
                    elements.append(.leaf(value))
                    self = .list(elements)
                } else if isNew {
                    self = .list([.leaf(value)])
                } else {
                    throw FormDecodingError(parameter: fullKey, reason: "Invalid array")
                }
                return
            }
            guard case .object(var members, var order) = self else {
                throw FormDecodingError(parameter: fullKey, reason: "Invalid hash")
            }
            self = .leaf("")  // release the members so that they change in place
            var child =
                members.removeValue(forKey: segment)
                ?? {
                    order.append(segment)
                    return Node.object([:], order: [])
                }()
            try child.insert(value, at: path.dropFirst(), fullKey: fullKey)
            members[segment] = child
            self = .object(members, order: order)
        }

        /// Objects whose keys are all `0`…`n-1` become arrays, as Stripe reads `items[0][price]`.
        func finished(name: String) throws(FormDecodingError) -> FormValue {
            switch self {
            case .leaf(let value):
                return .string(value)
            case .list(let elements):
                var values: [FormValue] = []
                for element in elements { values.append(try element.finished(name: name + "[]")) }
                return .array(values)
            case .object(let members, let order):
                func childName(_ key: String) -> String { name.isEmpty ? key : "\(name)[\(key)]" }
                let indices = order.compactMap { key in Int(key).flatMap { String($0) == key ? $0 : nil } }
                if !name.isEmpty, !order.isEmpty, indices.count == order.count {
                    guard indices.sorted() == Array(0..<order.count) else {
                        throw FormDecodingError(parameter: name, reason: "Invalid array")
                    }
                    var values: [FormValue] = []
                    for index in 0..<order.count {
                        values.append(
                            try members[String(index)].unsafelyUnwrapped.finished(name: childName(String(index))))
                    }
                    return .array(values)
                }
                var result: [String: FormValue] = [:]
                for (key, node) in members { result[key] = try node.finished(name: childName(key)) }
                return .object(result)
            }
        }
    }
}

extension FormValue: CustomStringConvertible {
    /// The value as form text, for logs and test failures.
    public var description: String {
        func pairs(_ value: FormValue, _ name: String) -> [String] {
            switch value {
            case .string(let string): return ["\(name)=\(string)"]
            case .array(let elements): return elements.enumerated().flatMap { pairs($1, "\(name)[\($0)]") }
            case .object(let members):
                return members.keys.sorted().flatMap { pairs(members[$0]!, name.isEmpty ? $0 : "\(name)[\($0)]") }
            }
        }
        return pairs(self, "").joined(separator: "&")
    }
}
