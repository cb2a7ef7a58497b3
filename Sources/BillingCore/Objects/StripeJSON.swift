/// Small shapes shared by the object models' decoders: lenient metadata, lists, amount entries.
///
/// The models decode Stripe's JSON with the default key strategy (Stripe's snake_case names are
/// spelled out), so decode them with a plain `JSONDecoder()`, not `.convertFromSnakeCase`.
enum StripeJSON {
    /// Any member name, for containers whose keys are data (metadata).
    struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }

        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// `metadata`: string values only; null, a non-object, or non-string values are skipped, never fatal.
    struct Metadata: Decodable {
        let values: [String: String]

        init(from decoder: any Decoder) throws {
            guard let container = try? decoder.container(keyedBy: Key.self) else {
                values = [:]
                return
            }
            var values: [String: String] = [:]
            for key in container.allKeys {
                if let value = try? container.decode(String.self, forKey: key) {
                    values[key.stringValue] = value
                }
            }
            self.values = values
        }
    }

    /// A Stripe list object (`{"object":"list","data":[…],"has_more":…}`) embedded in another object.
    struct List<Element: Decodable>: Decodable {
        let data: [Element]?
        let has_more: Bool?
    }

    /// An entry of `total_discount_amounts`, `total_taxes` or `total_tax_amounts`.
    struct AmountEntry: Decodable {
        let amount: Int64
    }

    /// An error for a member that a live (not deleted) object must have.
    static func missing(_ name: String, in decoder: any Decoder) -> DecodingError {
        .keyNotFound(Key(name), .init(codingPath: decoder.codingPath, debugDescription: "\(name) is required"))
    }
}

extension Optional where Wrapped == StripeJSON.Metadata {
    /// The metadata values, empty when the member was absent or null.
    var values: [String: String] { self?.values ?? [:] }
}

extension Optional where Wrapped == [StripeJSON.AmountEntry] {
    /// The sum of the entries' amounts, nil when the list itself was absent or null.
    var sum: Int64? { self.map { $0.reduce(0) { $0 + $1.amount } } }
}
