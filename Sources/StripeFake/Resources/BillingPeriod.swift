import Foundation

/// Billing arithmetic the fake needs: period ends by calendar (a month from Jan 31 is Feb 28, as on
/// Stripe) and amounts as Stripe writes them in line descriptions.
enum BillingPeriod {
    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// `start` plus `count` intervals (`day`, `week`, `month`, `year`).
    static func advance(_ start: Int64, interval: String, count: Int64) -> Int64 {
        let component: Calendar.Component
        var amount = Int(count)
        switch interval {
        case "day": component = .day
        case "week":
            component = .day
            amount *= 7
        case "year": component = .year
        default: component = .month
        }
        let date = Date(timeIntervalSince1970: TimeInterval(start))
        guard let end = calendar.date(byAdding: component, value: amount, to: date) else { return start + 2_592_000 }
        return Int64(end.timeIntervalSince1970)
    }

    /// The recurring interval of a price: `(interval, interval_count)`, monthly when absent.
    static func recurrence(of price: JSONValue) -> (interval: String, count: Int64) {
        let recurring = price["recurring"]
        return (recurring?["interval"]?.stringValue ?? "month", recurring?["interval_count"]?.intValue ?? 1)
    }

    /// `$20.00`, `€9.50`, `¥1200`, `12.00 CHF`.
    static func formatted(_ amount: Int64, currency: String) -> String {
        let zeroDecimal: Set<String> = [
            "jpy", "krw", "vnd", "clp", "pyg", "ugx", "xaf", "xof", "bif", "djf", "gnf", "kmf", "mga", "rwf", "vuv",
            "xpf",
        ]
        let symbols = ["usd": "$", "eur": "€", "gbp": "£", "jpy": "¥", "cad": "CA$", "aud": "A$"]
        let number: String
        if zeroDecimal.contains(currency) {
            number = String(amount)
        } else {
            let cents = abs(amount) % 100
            number = "\(amount < 0 ? "-" : "")\(abs(amount) / 100).\(cents < 10 ? "0" : "")\(cents)"
        }
        if let symbol = symbols[currency] { return symbol + number }
        return "\(number) \(currency.uppercased())"
    }
}
