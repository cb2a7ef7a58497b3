@testable import BillingCore
import Testing

@Suite("JWS header bounds checked before decoding (issue 39)")
struct JWSHeaderShapeTests {
    @Test("Members and x5c entries are counted on the bytes, strings and nesting respected", arguments: [
        (#"{"alg":"ES256","x5c":["a","b","c"]}"#, 2, 3 as Int?),
        (#"{}"#, 0, nil),
        (#"{"alg":"ES256"}"#, 1, nil),
        (#"{"x5c":[]}"#, 1, 0),
        (#"{ "x5c" : [ "a" , "b,c" , "d\"],[" , {"e":[1,2]} ] }"#, 1, 4),
        (#"{"a":"x5c","b":["1","2","3","4"]}"#, 2, nil),
        (#"{"x5c":["a"],"x5c":["a","b","c","d","e"]}"#, 2, 5),
        (#"{"x5c":["a","b","c","d""#, 1, 4),
        (#"{"nested":{"x5c":["a","b","c","d"]}}"#, 1, nil),
    ])
    func counts(_ header: String, members: Int, x5c: Int?) {
        let shape = JWSHeaderShape(Array(header.utf8))
        #expect(shape.members == members)
        #expect(shape.x5cEntries == x5c)
    }

    @Test("A long x5c is invalid_chain_length and a header of many members invalid_jws, whatever follows")
    func refusals() {
        let long = #"{"x5c":["a","b","c","d"], this is not JSON"#
        #expect(throws: AppStoreVerificationError(.invalidChainLength, "")) { try Self.check(long) }
        let many = "{" + (0..<17).map { #""k\#($0)":0"# }.joined(separator: ",") + "}"
        #expect((try? Self.check(many)) == nil)
        #expect((try? Self.check(#"{"alg":"ES256","x5c":["a","b","c"]}"#)) != nil)
    }

    static func check(_ header: String) throws(AppStoreVerificationError) {
        do {
            try JWSHeaderShape.check(Array(header.utf8))
        } catch {
            throw AppStoreVerificationError(error.code, "")  // compared by code
        }
    }
}
