import Foundation
import StripeAPI
import Testing

@Suite("Form encoding")
struct FormEncodingTests {
    @Test("Nested values encode with brackets, arrays with indexes, in the order given")
    func nested() {
        let parameters: StripeParameters = [
            "line_items": .array([.dictionary(["price": "price_1", "quantity": 2]), ["price": "price_2", "quantity": 1]]),
            "metadata": ["app_user_id": "u1"],
            "expand": .array(["data.items"]),
        ]
        #expect(parameters.flattened().map { "\($0.name)=\($0.value)" } == [
            "line_items[0][price]=price_1", "line_items[0][quantity]=2", "line_items[1][price]=price_2",
            "line_items[1][quantity]=1", "metadata[app_user_id]=u1", "expand[0]=data.items",
        ])
        #expect(parameters.encoded() == "line_items%5B0%5D%5Bprice%5D=price_1&line_items%5B0%5D%5Bquantity%5D=2"
            + "&line_items%5B1%5D%5Bprice%5D=price_2&line_items%5B1%5D%5Bquantity%5D=1"
            + "&metadata%5Bapp_user_id%5D=u1&expand%5B0%5D=data.items")
    }

    @Test("Deeper nesting: dictionaries in arrays in dictionaries")
    func deep() {
        let parameters: StripeParameters = [
            "subscription_data": ["items": [["plan": "p1", "tax_rates": ["txr_1", "txr_2"]]], "trial_period_days": 14],
        ]
        #expect(parameters.flattened().map(\.name) == [
            "subscription_data[items][0][plan]", "subscription_data[items][0][tax_rates][0]",
            "subscription_data[items][0][tax_rates][1]", "subscription_data[trial_period_days]",
        ])
    }

    @Test("Scalars: booleans as true/false, integers in decimal, empty strings kept")
    func scalars() {
        let parameters: StripeParameters = ["cancel_at_period_end": true, "off": false, "amount": -1250, "big": .integer(Int64.max), "description": ""]
        #expect(parameters.encoded() == "cancel_at_period_end=true&off=false&amount=-1250&big=9223372036854775807&description=")
    }

    @Test("Unicode is UTF-8 percent-encoded, a space is %20, only unreserved characters are left as they are")
    func unicodeAndReserved() {
        let parameters: StripeParameters = [
            "name": "Zoë 😀",
            "q": "a&b=c+d/e?f#g%h;i,j:k@l!m$n'o(p)q*r[s]t",
            "safe": "AZaz09-._~",
            "k e&y": "v",
        ]
        #expect(parameters.encoded() == "name=Zo%C3%AB%20%F0%9F%98%80"
            + "&q=a%26b%3Dc%2Bd%2Fe%3Ff%23g%25h%3Bi%2Cj%3Ak%40l%21m%24n%27o%28p%29q%2Ar%5Bs%5Dt"
            + "&safe=AZaz09-._~&k%20e%26y=v")
    }

    @Test("Decoding the encoded form gives back the flattened pairs exactly", arguments: [
        ["metadata": ["note": "100% \"real\" & true\n"], "email": "ünïcödé+tag@example.com"] as StripeParameters,
        ["items": [["price": "p"], ["price": "q", "quantity": 3]], "expand": ["a", "b.c"]],
        ["a": "=&=&", "b": "[]", "c[d]": "literal brackets in a key"],
    ])
    func roundTrip(parameters: StripeParameters) throws {
        let pairs = parameters.encoded().split(separator: "&").map { pair -> (String, String) in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]).removingPercentEncoding ?? "?", String(parts[1]).removingPercentEncoding ?? "?")
        }
        #expect(pairs.map(\.0) == parameters.flattened().map(\.name))
        #expect(pairs.map(\.1) == parameters.flattened().map(\.value))
    }

    @Test("Empty arrays and dictionaries encode nothing; no parameters encode the empty string")
    func empties() {
        #expect(StripeParameters().encoded() == "")
        #expect(([:] as StripeParameters).isEmpty)
        let parameters: StripeParameters = ["expand": .array([]), "metadata": .dictionary([:]), "a": 1]
        #expect(parameters.encoded() == "a=1")
    }

    @Test("The subscript replaces in place, appends new keys, and removes on nil; equality is ordered")
    func editing() {
        var parameters: StripeParameters = ["a": 1, "b": 2]
        parameters["a"] = "one"
        parameters["c"] = true
        #expect(parameters.encoded() == "a=one&b=2&c=true")
        parameters["b"] = nil
        #expect(parameters.keys == ["a", "c"])
        #expect(parameters["a"] == .string("one"))
        #expect(parameters["missing"] == nil)
        #expect(parameters == ["a": "one", "c": true])
        #expect(parameters != ["c": true, "a": "one"])
        #expect(parameters.merging(["a": 5, "d": "x"]).encoded() == "a=5&c=true&d=x")
    }

    @Test("A string map (metadata) encodes sorted by key, so the same map always gives the same body")
    func stringMap() {
        let parameters: StripeParameters = ["metadata": .strings(["z": "1", "a": "2", "m": "3"])]
        #expect(parameters.encoded() == "metadata%5Ba%5D=2&metadata%5Bm%5D=3&metadata%5Bz%5D=1")
    }
}
