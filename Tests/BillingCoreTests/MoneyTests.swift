import BillingCore
import Testing

@Suite("Money: currency exponents and exact decimal strings")
struct MoneyTests {
    @Test("Stripe's zero-decimal currencies have exponent 0", arguments: [
        "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf",
    ])
    func zeroDecimal(code: String) {
        #expect(Currency(code).exponent == 0)
        #expect(Currency(code.uppercased()).exponent == 0)
        #expect(Currency(code.uppercased()).code == code)
    }

    @Test("Three-decimal currencies have exponent 3", arguments: ["bhd", "jod", "kwd", "omr", "tnd"])
    func threeDecimal(code: String) {
        #expect(Currency(code).exponent == 3)
    }

    @Test("Every other currency, including Stripe's special cases ISK, HUF and TWD, has exponent 2", arguments: [
        "usd", "eur", "gbp", "chf", "isk", "huf", "twd", "inr", "brl", "xyz", "",
    ])
    func twoDecimal(code: String) {
        #expect(Currency(code).exponent == 2)
    }

    @Test("Decimal strings are exact in each exponent", arguments: [
        (Int64(1234), "usd", "12.34"), (5, "usd", "0.05"), (-5, "usd", "-0.05"), (0, "usd", "0.00"), (100, "usd", "1.00"),
        (-123_456, "eur", "-1234.56"), (1234, "jpy", "1234"), (0, "jpy", "0"), (-7, "krw", "-7"), (1234, "kwd", "1.234"),
        (5, "bhd", "0.005"), (-1000, "jod", "-1.000"), (Int64.max, "usd", "92233720368547758.07"),
        (Int64.min, "usd", "-92233720368547758.08"), (Int64.min, "jpy", "-9223372036854775808"),
        (Int64.max, "kwd", "9223372036854775.807"),
    ])
    func decimalString(minorUnits: Int64, code: String, expected: String) {
        let money = Money(minorUnits: minorUnits, currency: Currency(code))
        #expect(money.decimalString == expected)
        #expect(money.description == "\(expected) \(code)")
        #expect(Money(decimal: expected, currency: Currency(code)) == money)
    }

    @Test("128-bit sums format exactly beyond Int64")
    func wideSums() {
        let sum = Int128(Int64.max) * 1000 + 7
        #expect(DecimalAmount.string(sum, exponent: 2) == "92233720368547758070.07")
        #expect(DecimalAmount.string(-sum, exponent: 3) == "-9223372036854775807.007")
        #expect(DecimalAmount.string(Int128.min, exponent: 0) == "-170141183460469231731687303715884105728")
    }

    @Test("Parsing accepts fewer decimals and rejects anything inexact or malformed")
    func parsing() {
        #expect(DecimalAmount.parse("12.3", exponent: 2) == 1230)
        #expect(DecimalAmount.parse("12", exponent: 2) == 1200)
        #expect(DecimalAmount.parse("-0.00", exponent: 2) == 0)
        #expect(DecimalAmount.parse("007", exponent: 0) == 7)
        for bad in ["", "-", ".5", "5.", "1.234", "1,00", "+1", " 1", "1 ", "1e3", "--1", "1.2.3", "0x10", "١٢"] {
            #expect(DecimalAmount.parse(bad, exponent: 2) == nil, "\(bad) should not parse")
        }
        #expect(DecimalAmount.parse("1.5", exponent: 0) == nil)
        #expect(DecimalAmount.parse("92233720368547758.08", exponent: 2) == nil)
        #expect(DecimalAmount.parse("-92233720368547758.09", exponent: 2) == nil)
        #expect(DecimalAmount.parse("-92233720368547758.08", exponent: 2) == Int64.min)
    }

    @Test("Any amount survives a round trip through its decimal string")
    func roundTrip() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let amount = Int64.random(in: Int64.min...Int64.max, using: &generator) >> Int64.random(in: 0...62, using: &generator)
            for exponent in [0, 2, 3] {
                let text = DecimalAmount.string(amount, exponent: exponent)
                #expect(DecimalAmount.parse(text, exponent: exponent) == amount, "\(amount) exponent \(exponent): \(text)")
                #expect(!text.contains("e") && !text.contains(","))
            }
        }
    }

    @Test("Appending writes the same bytes as the string")
    func appendMatchesString() {
        var bytes: [UInt8] = Array("x=".utf8)
        DecimalAmount.append(Int64(-4321), exponent: 3, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "x=-4.321")
    }
}
