/// Typed reading of a request's parameters, answering each mistake with the error Stripe gives
/// and the full bracketed name of the parameter (`line_items[0][quantity]`).
struct FormParameters {
    let members: [String: FormValue]
    /// The bracketed name of this object within the request, empty at the top level.
    let prefix: String

    init(_ form: FormValue, prefix: String = "") throws(StripeAPIError) {
        guard case .object(let members) = form else { throw .invalidHash(prefix) }
        self.members = members
        self.prefix = prefix
    }

    /// The full name of member `key`, as Stripe writes it in `param`.
    func name(_ key: String) -> String { prefix.isEmpty ? key : "\(prefix)[\(key)]" }

    func has(_ key: String) -> Bool { members[key] != nil }

    /// Refuses any member not in `allowed` (plus `expand`), the first in name order.
    func allowOnly(_ allowed: Set<String>) throws(StripeAPIError) {
        if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) && $0 != "expand" }) {
            throw .unknownParameter(name(unknown))
        }
    }

    func string(_ key: String) throws(StripeAPIError) -> String? {
        guard let value = members[key] else { return nil }
        guard case .string(let string) = value else { throw .invalidString(name(key)) }
        return string
    }

    /// A string that an empty value clears: nil when absent, `.some(nil)` when sent empty.
    func clearableString(_ key: String) throws(StripeAPIError) -> String?? {
        guard let string = try string(key) else { return nil }
        return .some(string.isEmpty ? nil : string)
    }

    func requiredString(_ key: String) throws(StripeAPIError) -> String {
        guard let string = try string(key), !string.isEmpty else { throw .missingParameter(name(key)) }
        return string
    }

    func integer(_ key: String) throws(StripeAPIError) -> Int64? {
        guard let string = try string(key) else { return nil }
        guard let integer = Int64(string) else { throw .invalidInteger(name(key), string) }
        return integer
    }

    func boolean(_ key: String) throws(StripeAPIError) -> Bool? {
        guard let string = try string(key) else { return nil }
        switch string {
        case "true": return true
        case "false": return false
        default: throw .invalidBoolean(name(key), string)
        }
    }

    /// One of `allowed`, else Stripe's "Invalid mode: must be one of …".
    func oneOf(_ key: String, _ allowed: [String]) throws(StripeAPIError) -> String? {
        guard let string = try string(key) else { return nil }
        guard allowed.contains(string) else { throw .invalidEnum(name(key), string, allowed: allowed) }
        return string
    }

    /// An array of strings: `expand[]=a&expand[]=b` or `expand[0]=a`.
    func strings(_ key: String) throws(StripeAPIError) -> [String]? {
        guard let value = members[key] else { return nil }
        guard case .array(let elements) = value else { throw .invalidArray(name(key)) }
        var strings: [String] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let string) = element else { throw .invalidString("\(name(key))[\(index)]") }
            strings.append(string)
        }
        return strings
    }

    func object(_ key: String) throws(StripeAPIError) -> FormParameters? {
        guard let value = members[key] else { return nil }
        return try FormParameters(value, prefix: name(key))
    }

    /// An array of objects: `items[0][price]=…&items[1][price]=…`.
    func objects(_ key: String) throws(StripeAPIError) -> [FormParameters]? {
        guard let value = members[key] else { return nil }
        guard case .array(let elements) = value else { throw .invalidArray(name(key)) }
        var objects: [FormParameters] = []
        for (index, element) in elements.enumerated() {
            objects.append(try FormParameters(element, prefix: "\(name(key))[\(index)]"))
        }
        return objects
    }

    /// `metadata[key]=value`; an empty value (or `metadata=` alone) unsets, as on Stripe.
    func metadata(_ key: String = "metadata") throws(StripeAPIError) -> MetadataChange? {
        guard let value = members[key] else { return nil }
        switch value {
        case .string(""):
            return .clear
        case .object(let entries):
            var changes: [String: String?] = [:]
            for (entry, value) in entries {
                guard case .string(let string) = value else { throw .invalidString("\(name(key))[\(entry)]") }
                changes[entry] = string.isEmpty ? .some(nil) : .some(string)
            }
            return .set(changes)
        default:
            throw .invalidHash(name(key))
        }
    }

    /// A timestamp filter: `created=123` or `created[gte]=…&created[lt]=…`, as an inclusive range.
    func timeRange(_ key: String) throws(StripeAPIError) -> ClosedRange<Int64>? {
        guard let value = members[key] else { return nil }
        if case .string = value {
            guard let exact = try integer(key) else { return nil }
            return exact...exact
        }
        guard let bounds = try object(key) else { return nil }
        try bounds.allowOnly(["gt", "gte", "lt", "lte"])
        var lower = Int64.min
        var upper = Int64.max
        if let gt = try bounds.integer("gt") { lower = max(lower, gt + 1) }
        if let gte = try bounds.integer("gte") { lower = max(lower, gte) }
        if let lt = try bounds.integer("lt") { upper = min(upper, lt - 1) }
        if let lte = try bounds.integer("lte") { upper = min(upper, lte) }
        // Bounds that exclude each other match nothing; no object was created at Int64.min.
        return lower <= upper ? lower...upper : Int64.min...Int64.min
    }
}

/// What a request does to an object's metadata.
enum MetadataChange {
    /// Unset every key.
    case clear
    /// Set these keys; a nil value unsets that key.
    case set([String: String?])

    /// `metadata` after the change.
    func applied(to metadata: JSONValue?) -> JSONValue {
        switch self {
        case .clear:
            return .object([:])
        case .set(let changes):
            var members = metadata?.objectValue ?? [:]
            for (key, value) in changes { members[key] = value.map { .string($0) } }
            return .object(members)
        }
    }
}

/// The parameters every list endpoint takes.
struct ListParameters {
    var limit = 10
    var startingAfter: String?
    var endingBefore: String?
    var created: ClosedRange<Int64>?

    /// Reads `limit` (1…100), `starting_after` / `ending_before` (one of them) and `created`.
    init(_ parameters: FormParameters) throws(StripeAPIError) {
        if let limit = try parameters.integer("limit") {
            guard (1...100).contains(limit) else {
                throw .invalidRequest("Invalid limit: must be between 1 and 100", param: "limit")
            }
            self.limit = Int(limit)
        }
        startingAfter = try parameters.string("starting_after").flatMap { $0.isEmpty ? nil : $0 }
        endingBefore = try parameters.string("ending_before").flatMap { $0.isEmpty ? nil : $0 }
        if startingAfter != nil, endingBefore != nil { throw .exclusive(["ending_before", "starting_after"]) }
        if parameters.has("created") { created = try parameters.timeRange("created") }
    }
}
