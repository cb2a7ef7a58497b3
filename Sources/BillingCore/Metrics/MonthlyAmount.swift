/// A subscription's monthly amount, kept exact (a fraction of minor units) until it is rounded
/// once, half-even, per subscription: a yearly 99.99 USD price is 9999/12 cents a month, 833.25,
/// which rounds to 833, and ten such subscriptions are 8330, never 8332.5 rounded at the end.
public struct ExactAmount: Sendable, Equatable, CustomStringConvertible {
    /// Minor units × `denominator`.
    public private(set) var numerator: Int128
    public private(set) var denominator: Int128

    public init(minorUnits: Int64) {
        numerator = Int128(minorUnits)
        denominator = 1
    }

    public init(_ numerator: Int128, over denominator: Int128) {
        precondition(denominator > 0, "a fraction of minor units needs a positive denominator")
        self.numerator = numerator
        self.denominator = denominator
        reduce()
    }

    public static let zero = ExactAmount(minorUnits: 0)

    public static func + (lhs: ExactAmount, rhs: ExactAmount) -> ExactAmount {
        ExactAmount(lhs.numerator * rhs.denominator + rhs.numerator * lhs.denominator, over: lhs.denominator * rhs.denominator)
    }

    public static func - (lhs: ExactAmount, rhs: ExactAmount) -> ExactAmount {
        ExactAmount(lhs.numerator * rhs.denominator - rhs.numerator * lhs.denominator, over: lhs.denominator * rhs.denominator)
    }

    /// The amount times `factor`.
    public func scaled(by factor: MonthlyFactor) -> ExactAmount {
        ExactAmount(numerator * factor.multiplier, over: denominator * factor.divisor)
    }

    /// The amount times `numerator / denominator`.
    public func scaled(_ numerator: Int128, over denominator: Int128) -> ExactAmount {
        ExactAmount(self.numerator * numerator, over: self.denominator * denominator)
    }

    /// Minor units, rounded half to even (banker's rounding): 833.5 → 834, 832.5 → 832.
    public var roundedHalfEven: Int64 {
        let negative = numerator < 0
        let magnitude = negative ? -numerator : numerator
        var quotient = magnitude / denominator
        let twice = (magnitude % denominator) * 2
        if twice > denominator || (twice == denominator && quotient % 2 == 1) { quotient += 1 }
        return Int64(negative ? -quotient : quotient)
    }

    public var description: String { denominator == 1 ? "\(numerator)" : "\(numerator)/\(denominator)" }

    private mutating func reduce() {
        var a = numerator < 0 ? -numerator : numerator
        var b = denominator
        while b != 0 { (a, b) = (b, a % b) }
        if a > 1 {
            numerator /= a
            denominator /= a
        }
    }
}

/// What one billing period is worth in months, as RevenueCat counts it: a day × 30, a week × 4,
/// a month × 1, a year × 1/12; an interval count divides (every 3 months: × 1/3).
public struct MonthlyFactor: Sendable, Equatable {
    public let multiplier: Int128
    public let divisor: Int128

    /// The factor of a Stripe interval and count; nil for an interval Stripe may add later.
    public init?(interval: RecurringInterval, count: Int64?) {
        let count = Int128(max(count ?? 1, 1))
        switch interval {
        case .day: (multiplier, divisor) = (30, count)
        case .week: (multiplier, divisor) = (4, count)
        case .month: (multiplier, divisor) = (1, count)
        case .year: (multiplier, divisor) = (1, 12 * count)
        default: return nil
        }
    }

    /// The factor of an App Store subscription period.
    public init(_ period: AppStorePeriod) {
        switch period {
        case .oneWeek: (multiplier, divisor) = (4, 1)
        case .oneMonth: (multiplier, divisor) = (1, 1)
        case .twoMonths: (multiplier, divisor) = (1, 2)
        case .threeMonths: (multiplier, divisor) = (1, 3)
        case .sixMonths: (multiplier, divisor) = (1, 6)
        case .oneYear: (multiplier, divisor) = (1, 12)
        }
    }
}

/// The renewal periods App Store subscriptions come in, by their ISO 8601 names.
public enum AppStorePeriod: String, Sendable, CaseIterable, Codable {
    case oneWeek = "P1W"
    case oneMonth = "P1M"
    case twoMonths = "P2M"
    case threeMonths = "P3M"
    case sixMonths = "P6M"
    case oneYear = "P1Y"

    /// The period's length in Production, in seconds (a month as 30.44 days, a year as 365.25).
    var productionSeconds: Int64 {
        switch self {
        case .oneWeek: 7 * 86_400
        case .oneMonth: 2_629_800
        case .twoMonths: 2 * 2_629_800
        case .threeMonths: 3 * 2_629_800
        case .sixMonths: 6 * 2_629_800
        case .oneYear: 31_557_600
        }
    }

    /// The period's accelerated length in the Sandbox, in seconds.
    var sandboxSeconds: Int64 {
        switch self {
        case .oneWeek: 180
        case .oneMonth: 300
        case .twoMonths: 600
        case .threeMonths: 900
        case .sixMonths: 1800
        case .oneYear: 3600
        }
    }

    /// The period a transaction of `seconds` (expiresDate − purchaseDate) renews for: the nearest
    /// Production length, or, under two hours, the nearest Sandbox length (3 minutes is a week,
    /// an hour a year). Nil for a length that is not positive.
    public static func nearest(toSeconds seconds: Int64) -> AppStorePeriod? {
        guard seconds > 0 else { return nil }
        let sandbox = seconds < 7200
        return allCases.min { lhs, rhs in
            let left = abs((sandbox ? lhs.sandboxSeconds : lhs.productionSeconds) - seconds)
            let right = abs((sandbox ? rhs.sandboxSeconds : rhs.productionSeconds) - seconds)
            return left < right
        }
    }
}
