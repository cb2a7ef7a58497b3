import BillingCore
import Foundation
import Testing

@Suite("JSON from outside: nesting past Foundation's limit is refused, not trapped on")
struct UntrustedJSONTests {
    /// A value of any shape, to decode nested arrays.
    indirect enum Nested: Decodable, Equatable {
        case array([Nested])
        case other

        init(from decoder: any Decoder) throws {
            if let array = try? decoder.singleValueContainer().decode([Nested].self) {
                self = .array(array)
            } else {
                self = .other
            }
        }
    }

    @Test("513 nested arrays, which make JSONDecoder trap, throw a decoding error", arguments: ["", "{\"a\":"])
    func tooDeep(prefix: String) {
        let bytes = Array(prefix.utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 513)
        #expect(UntrustedJSON.nestsTooDeeply(bytes))
        #expect(UntrustedJSON.nestsTooDeeply(bytes[...]), "a slice, scanned in place")
        #expect(UntrustedJSON.nestsTooDeeply(AnyCollection(bytes)), "bytes that are not contiguous, copied first")
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Nested.self, fromUntrusted: bytes) }
    }

    @Test("Nesting at the limit decodes as JSONDecoder decodes it")
    func atTheLimit() throws {
        let depth = UntrustedJSON.maximumDepth - 1
        let bytes = Array(String(repeating: "[", count: depth).utf8) + Array(String(repeating: "]", count: depth).utf8)
        #expect(!UntrustedJSON.nestsTooDeeply(bytes))
        let plain = try JSONDecoder().decode(Nested.self, from: Data(bytes))
        #expect(try JSONDecoder().decode(Nested.self, fromUntrusted: bytes) == plain)
    }

    @Test("Brackets inside strings, escaped quotes included, do not count as nesting")
    func strings() throws {
        let text = "{\"a\":\"\\\"" + String(repeating: "[", count: 600) + "\"}"
        #expect(!UntrustedJSON.nestsTooDeeply(Array(text.utf8)))
        #expect(!UntrustedJSON.nestsTooDeeply(AnyCollection(Array(text.utf8))))
        let decoded = try JSONDecoder().decode([String: String].self, fromUntrusted: Array(text.utf8))
        #expect(decoded["a"]?.count == 601)
    }

    @Test("A member named twice in any object is found, after unescaping; strings, arrays and other objects do not confuse it", arguments: [
        (#"{"a": 1, "a": 2}"#, "a"),
        (#"{"a": 1, "\u0061": 2}"#, "a"),
        (#"{"events": [{"user": "u", "q": 1}, {"user": "v", "q": 2, "user": "w"}]}"#, "user"),
        (#"{"x": {"a": 1}, "y": {"a": 1}, "x": 0}"#, "x"),
        (#"{"\ud83d\ude00": 1, "😀": 2}"#, "😀"),
        (#"{"a\"b": 1, "a\"b": 2}"#, "a\"b"),
    ])
    func duplicates(json: String, name: String) {
        #expect(UntrustedJSON.duplicateKey(in: Array(json.utf8)) == name)
    }

    @Test("Bodies without a repeated member pass", arguments: [
        #"{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}"#,
        #"{"a": "a", "b": ["a", "a"], "s": "{\"a\": 1, \"a\": 2}"}"#,
        #"["a", "a", {"a": 1}]"#,
        #"{"a": 1, "b": "\\", "c": 3}"#,
        #"{"unterminated": "#,
        "",
    ])
    func noDuplicates(json: String) {
        #expect(UntrustedJSON.duplicateKey(in: Array(json.utf8)) == nil)
    }
}
