/// A currency as Stripe's API counts it: the lowercase ISO 4217 code and the exponent of the
/// minor unit its amounts are given in (2 for `usd`: 1000 means 10.00 USD).
///
/// The exponent is Stripe's, not always ISO 4217's: Stripe's zero-decimal currencies take amounts
/// in whole units, its three-decimal currencies in thousandths, and every other currency in
/// hundredths — including ISK, HUF and TWD, which Stripe keeps two-decimal in its API even
/// though only whole units can be charged (https://docs.stripe.com/currencies#special-cases).
public struct Currency: Hashable, Sendable, CustomStringConvertible {
    /// Lowercase ISO 4217 code, as Stripe writes it (`usd`, `jpy`).
    public let code: String
    /// Decimal places between a minor unit and a whole unit: 0, 2 or 3.
    public let exponent: Int

    /// The currency with this code, in any case; unknown codes get Stripe's default of 2.
    public init(_ code: String) {
        let lowercased = code.lowercased()
        self.code = lowercased
        self.exponent = Self.exponent(ofLowercased: lowercased)
    }

    public var description: String { code }

    /// Stripe's zero-decimal currencies: an amount of 500 `jpy` is ¥500.
    public static let zeroDecimalCodes: Set<String> = [
        "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf",
    ]

    /// Stripe's three-decimal currencies: an amount of 5120 `kwd` is 5.120 KWD.
    public static let threeDecimalCodes: Set<String> = ["bhd", "jod", "kwd", "omr", "tnd"]

    /// The exponent of a currency code, in any case.
    public static func exponent(of code: String) -> Int {
        exponent(ofLowercased: code.lowercased())
    }

    private static func exponent(ofLowercased code: String) -> Int {
        if zeroDecimalCodes.contains(code) { return 0 }
        if threeDecimalCodes.contains(code) { return 3 }
        return 2
    }
}
