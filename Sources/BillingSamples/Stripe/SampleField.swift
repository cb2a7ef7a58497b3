import BillingCore
import Foundation

/// One `--set path=value` of `billingd trigger`: a dotted path into the sample's `data.object`
/// (`metadata.app_user_id`, `items.data.0.quantity`) and the value to put there.
///
/// The value is JSON when it parses as JSON (`3`, `true`, `{"app_user_id": "user_9"}`,
/// `"quoted text"`), else the text itself as a string (`cus_123`). Every step of the path must
/// exist in the sample, so a misspelt field is refused rather than added beside the real one;
/// only a `metadata` map takes new keys.
public struct SampleField: Sendable, Equatable {
    public let path: [String]
    /// The value as JSON text.
    public let json: String

    /// Reads `path=value`.
    public init(parsing argument: String) throws(SampleFieldError) {
        guard let equals = argument.firstIndex(of: "=") else {
            throw SampleFieldError("--set takes path=value, e.g. --set customer=cus_123 or --set metadata.app_user_id=user_8 (got '\(argument)').")
        }
        let path = argument[..<equals].split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !path.isEmpty, !path.contains(where: \.isEmpty) else {
            throw SampleFieldError("'\(argument[..<equals])' is not a field path: names joined by dots, e.g. metadata.app_user_id.")
        }
        let text = String(argument[argument.index(after: equals)...])
        let value: Any = (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
        guard let data = try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys]) else {
            throw SampleFieldError("The value of \(path.joined(separator: ".")) cannot be used: \(text)")
        }
        self.path = path
        json = String(decoding: data, as: UTF8.self)
    }

    /// The value, decoded.
    var value: Any {
        ((try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed])) as? [Any])?.first ?? NSNull()
    }

    /// Puts the value at the path in `object`, or says which step of the path the object lacks.
    func apply(to object: inout [String: Any]) throws(SampleFieldError) {
        object = try Self.set(value, at: path[...], in: object, walked: []) as! [String: Any]
    }

    private static func set(_ value: Any, at path: ArraySlice<String>, in container: Any, walked: [String]) throws(SampleFieldError) -> Any {
        let step = path.first!
        let place = walked.isEmpty ? "data.object" : "data.object." + walked.joined(separator: ".")
        let rest = path.dropFirst()
        if var dictionary = container as? [String: Any] {
            let existing = dictionary[step]
            if existing == nil, !(rest.isEmpty && walked.last == "metadata") {
                let near = dictionary.keys.sorted { distance($0, step) < distance($1, step) }.prefix(3)
                throw SampleFieldError(
                    "\(place) has no field '\(step)'; it has \(dictionary.keys.sorted().joined(separator: ", "))\(near.isEmpty ? "" : ". Did you mean \(near.joined(separator: ", "))?")")
            }
            dictionary[step] = rest.isEmpty ? value : try set(value, at: rest, in: existing!, walked: walked + [step])
            return dictionary
        }
        if var array = container as? [Any] {
            guard let index = Int(step), array.indices.contains(index) else {
                throw SampleFieldError("\(place) is a list of \(array.count); '\(step)' is not an index of it (0 to \(array.count - 1)).")
            }
            array[index] = rest.isEmpty ? value : try set(value, at: rest, in: array[index], walked: walked + [step])
            return array
        }
        throw SampleFieldError("\(place) is \(container is NSNull ? "null" : "a value, not an object"), so it has no field '\(step)'.")
    }

    private static func distance(_ a: String, _ b: String) -> Int {
        StripeEventTypes.distance(a, b)
    }
}

/// Why a `--set` could not be used.
public struct SampleFieldError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
