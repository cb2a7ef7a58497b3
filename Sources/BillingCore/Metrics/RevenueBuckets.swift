import Foundation

/// Money in or out at an instant: a payment (Stripe: an invoice's `amount_paid` at its
/// `status_transitions.paid_at`; App Store: a paid transaction at its purchase) or a refund
/// (Stripe: an amount refunded on a charge, at the refund; App Store: a refunded transaction's
/// price, at its revocation).
public struct RevenueEntry: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case payment, refund }

    public var store: MetricsStore
    public var kind: Kind
    /// Unix seconds.
    public var at: Int64
    public var currency: String
    /// Minor units, positive.
    public var amount: Int64

    public init(store: MetricsStore, kind: Kind, at: Int64, currency: String, amount: Int64) {
        self.store = store
        self.kind = kind
        self.at = at
        self.currency = currency.lowercased()
        self.amount = amount
    }
}

/// The length of a bucket or the step of a series, in UTC: days from midnight, ISO weeks from
/// Monday midnight, months from the first.
public enum MetricsInterval: String, Sendable, CaseIterable {
    case day, week, month

    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// The start of the bucket holding `instant`.
    public func bucketStart(containing instant: Int64) -> Int64 {
        let date = Date(timeIntervalSince1970: TimeInterval(instant))
        let component: Calendar.Component = switch self {
        case .day: .day
        case .week: .weekOfYear
        case .month: .month
        }
        let start = Self.calendar.dateInterval(of: component, for: date)!.start
        return Int64(start.timeIntervalSince1970)
    }

    /// The start of the bucket after the one starting at `start`.
    public func next(after start: Int64) -> Int64 {
        let date = Date(timeIntervalSince1970: TimeInterval(start))
        let next: Date = switch self {
        case .day: Self.calendar.date(byAdding: .day, value: 1, to: date)!
        case .week: Self.calendar.date(byAdding: .day, value: 7, to: date)!
        case .month: Self.calendar.date(byAdding: .month, value: 1, to: date)!
        }
        return Int64(next.timeIntervalSince1970)
    }

    /// The boundaries `b` of this interval with `from ≤ b ≤ to`, in order.
    public func boundaries(from: Int64, to: Int64) -> [Int64] {
        var boundary = bucketStart(containing: from)
        if boundary < from { boundary = next(after: boundary) }
        var boundaries: [Int64] = []
        while boundary <= to {
            boundaries.append(boundary)
            boundary = next(after: boundary)
        }
        return boundaries
    }
}

/// Revenue of one currency in one bucket, in minor units.
public struct RevenueFigures: Sendable, Equatable, AdditiveArithmetic {
    public var gross: Int64 = 0
    public var refunds: Int64 = 0
    public var transactions: Int64 = 0
    public var refundedTransactions: Int64 = 0

    public init(gross: Int64 = 0, refunds: Int64 = 0, transactions: Int64 = 0, refundedTransactions: Int64 = 0) {
        self.gross = gross
        self.refunds = refunds
        self.transactions = transactions
        self.refundedTransactions = refundedTransactions
    }

    public var net: Int64 { gross - refunds }
    /// refunded_transactions ÷ transactions; nil without transactions.
    public var refundRate: Double? { transactions == 0 ? nil : Double(refundedTransactions) / Double(transactions) }

    public static var zero: RevenueFigures { RevenueFigures() }
    public static func + (lhs: Self, rhs: Self) -> Self {
        Self(gross: lhs.gross + rhs.gross, refunds: lhs.refunds + rhs.refunds, transactions: lhs.transactions + rhs.transactions,
             refundedTransactions: lhs.refundedTransactions + rhs.refundedTransactions)
    }
    public static func - (lhs: Self, rhs: Self) -> Self {
        Self(gross: lhs.gross - rhs.gross, refunds: lhs.refunds - rhs.refunds, transactions: lhs.transactions - rhs.transactions,
             refundedTransactions: lhs.refundedTransactions - rhs.refundedTransactions)
    }
}

/// One bucket `[start, end)` of revenue, per currency and store.
public struct RevenueBucket: Sendable, Equatable {
    public var start: Int64
    public var end: Int64
    public var byCurrency: [String: StoreSplit<RevenueFigures>] = [:]
}

extension RevenueMetrics {
    /// Revenue in UTC buckets of `interval` covering `[from, to)` (the first and last buckets
    /// clipped to the range), each entry in the bucket of its instant.
    public static func revenue(_ entries: some Sequence<RevenueEntry>, from: Int64, to: Int64, interval: MetricsInterval) -> [RevenueBucket] {
        var tally = RevenueTally(from: from, to: to, interval: interval)
        for entry in entries { tally.add(entry) }
        return tally.buckets
    }
}

/// Revenue added up entry by entry into the buckets of a range, so that a store can stream its
/// payments and refunds through it: memory holds the buckets, never the entries.
public struct RevenueTally: Sendable {
    public private(set) var buckets: [RevenueBucket] = []
    private let from: Int64
    private let to: Int64

    /// The buckets of `interval` covering `[from, to)`, the first and last clipped to the range.
    public init(from: Int64, to: Int64, interval: MetricsInterval) {
        self.from = from
        self.to = to
        var start = from
        while start < to {
            let end = min(interval.next(after: interval.bucketStart(containing: start)), to)
            buckets.append(RevenueBucket(start: start, end: end))
            start = end
        }
    }

    /// Adds an entry to the bucket of its instant; one outside the range is ignored.
    public mutating func add(_ entry: RevenueEntry) {
        guard from <= entry.at, entry.at < to, !buckets.isEmpty else { return }
        // Buckets are few (a range's days at most); binary search keeps a long range cheap.
        var low = 0
        var high = buckets.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if buckets[middle].start <= entry.at { low = middle } else { high = middle - 1 }
        }
        var figures = buckets[low].byCurrency[entry.currency, default: StoreSplit()]
        switch entry.kind {
        case .payment:
            figures[entry.store].gross += entry.amount
            figures[entry.store].transactions += 1
        case .refund:
            figures[entry.store].refunds += entry.amount
            figures[entry.store].refundedTransactions += 1
        }
        buckets[low].byCurrency[entry.currency] = figures
    }
}

/// Rates into a reporting currency: `date,currency,rate` rows, the units of the reporting
/// currency one unit of `currency` buys; the latest row on or before an instant applies.
public struct ExchangeRates: Sendable, Equatable {
    public var reportingCurrency: String
    /// Per currency, (day start in Unix seconds, rate as an exact decimal) in date order.
    private var rates: [String: [(day: Int64, rate: ExactAmount)]]

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.reportingCurrency == rhs.reportingCurrency && lhs.rates.keys == rhs.rates.keys
            && lhs.rates.allSatisfy { key, value in
                let other = rhs.rates[key] ?? []
                return value.count == other.count && zip(value, other).allSatisfy { $0.day == $1.day && $0.rate == $1.rate }
            }
    }

    /// A rates file that cannot be read: the line and what is wrong with it.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var problem: String
        public var description: String { "line \(line): \(problem)" }
    }

    /// Parses CSV text (a `date,currency,rate` header line is optional; `date` is YYYY-MM-DD).
    public init(reportingCurrency: String, csv: String) throws {
        self.reportingCurrency = reportingCurrency.lowercased()
        var rates: [String: [(day: Int64, rate: ExactAmount)]] = [:]
        for (number, rawLine) in csv.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") || (number == 0 && line.lowercased().hasPrefix("date")) { continue }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count == 3 else { throw ParseError(line: number + 1, problem: "expected date,currency,rate") }
            guard let day = Self.day(fields[0]) else { throw ParseError(line: number + 1, problem: "\(fields[0]) is not a date such as 2026-11-27") }
            let currency = fields[1].lowercased()
            guard currency.count == 3, currency.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                throw ParseError(line: number + 1, problem: "\(fields[1]) is not a three-letter currency code")
            }
            guard let rate = Self.decimal(fields[2]), rate.numerator > 0 else {
                throw ParseError(line: number + 1, problem: "\(fields[2]) is not a positive decimal rate such as 0.0091")
            }
            rates[currency, default: []].append((day, rate))
        }
        self.rates = rates.mapValues { $0.sorted { $0.day < $1.day } }
    }

    /// The rate of `currency` at `instant`; 1 for the reporting currency itself.
    public func rate(of currency: String, at instant: Int64) -> ExactAmount? {
        let currency = currency.lowercased()
        if currency == reportingCurrency { return ExactAmount(minorUnits: 1) }
        return rates[currency]?.last { $0.day <= instant }?.rate
    }

    /// `amounts` (minor units per currency) in minor units of the reporting currency, each
    /// currency converted exactly and the sum rounded once, half-even; the currencies without a
    /// rate at `instant` are left out and named.
    public func total(of amounts: [String: Int64], at instant: Int64) -> (amount: Int64, missingRates: [String]) {
        var total = ExactAmount.zero
        var missing: [String] = []
        let reportingScale = Self.power(Currency.exponent(of: reportingCurrency))
        for (currency, amount) in amounts.sorted(by: { $0.key < $1.key }) {
            guard let rate = rate(of: currency, at: instant) else {
                missing.append(currency)
                continue
            }
            let units = ExactAmount(Int128(amount), over: Self.power(Currency.exponent(of: currency)))
            total = total + ExactAmount(units.numerator * rate.numerator * reportingScale, over: units.denominator * rate.denominator)
        }
        return (total.roundedHalfEven, missing)
    }

    private static func power(_ exponent: Int) -> Int128 {
        var value: Int128 = 1
        for _ in 0..<exponent { value *= 10 }
        return value
    }

    private static func day(_ text: String) -> Int64? {
        let parts = text.split(separator: "-")
        guard parts.count == 3, let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
            (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: DateComponents(year: year, month: month, day: day)),
            calendar.component(.day, from: date) == day
        else { return nil }
        return Int64(date.timeIntervalSince1970)
    }

    /// An exact decimal: "0.0091" is 91/10000.
    static func decimal(_ text: String) -> ExactAmount? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !text.isEmpty, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            parts.count == 1 || !parts[1].isEmpty, parts[0].count + (parts.count == 2 ? parts[1].count : 0) <= 30
        else { return nil }
        let digits = parts.joined()
        guard !digits.isEmpty, let value = Int128(digits) else { return nil }
        return ExactAmount(value, over: power(parts.count == 2 ? parts[1].count : 0))
    }
}
