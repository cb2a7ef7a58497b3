import BillingCore
import Foundation

/// How the console writes amounts, dates and charts.
enum ConsoleFormat {
    /// Minor units as money in the currency's own exponent: `$12.34`, `¥1200`, `12.345 KWD`.
    static func money(_ minorUnits: Int64, _ code: String) -> String {
        let currency = Currency(code)
        let decimal = DecimalAmount.string(minorUnits.magnitude, exponent: currency.exponent)
        let (whole, fraction) = decimal.firstIndex(of: ".").map { (decimal[..<$0], decimal[$0...]) } ?? (decimal[...], ""[...])
        var grouped = ""
        for (index, digit) in whole.reversed().enumerated() {
            if index > 0, index % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        let amount = String(grouped.reversed()) + fraction
        let sign = minorUnits < 0 ? "−" : ""
        let symbols = ["usd": "$", "eur": "€", "gbp": "£", "jpy": "¥", "inr": "₹", "krw": "₩"]
        if let symbol = symbols[currency.code] { return sign + symbol + amount }
        return sign + amount + " " + currency.code.uppercased()
    }

    /// An App Store price (thousandths of the currency's unit) as money, cut to its minor units.
    static func money(milliunits: Int64, _ code: String) -> String {
        var divisor: Int64 = 1
        for _ in 0..<max(0, 3 - Currency.exponent(of: code.lowercased())) { divisor *= 10 }
        return money(milliunits / divisor, code)
    }

    /// `2026-11-27 13:40 UTC`.
    static func time(_ seconds: Int64?) -> String {
        guard let seconds else { return "—" }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))) + " UTC"
    }

    /// `13:40:05` (UTC), with the date before it when not the day of `today`: when figures were computed.
    static func clock(_ seconds: Int64, today: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = seconds / 86_400 == today / 86_400 ? "HH:mm:ss" : "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    /// `2026-11`.
    static func month(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    static func percent(_ rate: Double?) -> String {
        guard let rate else { return "—" }
        return String(format: "%.1f %%", rate * 100)
    }
}

/// Charts drawn by the server as SVG, styled by the console's CSS (no inline style).
enum ConsoleChart {
    /// A line through `points` (label, value), with its extremes on the axis.
    static func line(_ points: [(label: String, value: Int64)], title: String, format: (Int64) -> String) -> HTML {
        let width = 640.0, height = 220.0, left = 70.0, right = 10.0, top = 12.0, bottom = 28.0
        guard !points.isEmpty else { return "<p class=\"muted\">No data.</p>" }
        let values = points.map(\.value)
        let high = max(values.max() ?? 0, 0), low = min(values.min() ?? 0, 0)
        let span = Double(max(high - low, 1))
        let step = points.count > 1 ? (width - left - right) / Double(points.count - 1) : 0
        func x(_ index: Int) -> Double { left + Double(index) * step }
        func y(_ value: Int64) -> Double { top + (height - top - bottom) * (1 - Double(value - low) / span) }
        let coordinates = points.enumerated().map { index, point in String(format: "%.1f,%.1f", x(index), y(point.value)) }.joined(separator: " ")
        var parts: [HTML] = [
            "<svg class=\"chart\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"\(title)\">",
            "<line class=\"axis\" x1=\"\(Int(left))\" y1=\"\(Int(y(low)))\" x2=\"\(Int(width - right))\" y2=\"\(Int(y(low)))\"/>",
            "<text class=\"label\" x=\"4\" y=\"\(Int(y(high)) + 4)\">\(format(high))</text>",
            "<text class=\"label\" x=\"4\" y=\"\(Int(y(low)))\">\(format(low))</text>",
            "<polyline class=\"line\" points=\"\(coordinates)\"/>",
        ]
        for (index, point) in points.enumerated() {
            parts.append("<circle class=\"dot\" cx=\"\(String(format: "%.1f", x(index)))\" cy=\"\(String(format: "%.1f", y(point.value)))\" r=\"3\"><title>\(point.label): \(format(point.value))</title></circle>")
            if index == 0 || index == points.count - 1 || points.count <= 7 || index % 3 == 0 {
                parts.append("<text class=\"label\" x=\"\(Int(x(index)) - 18)\" y=\"\(Int(height) - 8)\">\(point.label)</text>")
            }
        }
        parts.append("</svg>")
        return HTML(parts)
    }

    /// Bars up (positive) and down (negative) from a zero line.
    static func bars(_ bars: [(label: String, value: Int64)], title: String, format: (Int64) -> String) -> HTML {
        let width = 640.0, height = 220.0, top = 14.0, bottom = 28.0
        let high = max(bars.map(\.value).max() ?? 0, 1), low = min(bars.map(\.value).min() ?? 0, 0)
        let span = Double(high - low)
        func y(_ value: Int64) -> Double { top + (height - top - bottom) * (1 - Double(value - low) / span) }
        let slot = width / Double(max(bars.count, 1))
        var parts: [HTML] = [
            "<svg class=\"chart\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"\(title)\">",
            "<line class=\"axis\" x1=\"0\" y1=\"\(Int(y(0)))\" x2=\"\(Int(width))\" y2=\"\(Int(y(0)))\"/>",
        ]
        for (index, bar) in bars.enumerated() {
            let x = Double(index) * slot + slot * 0.2
            let top = min(y(bar.value), y(0)), size = abs(y(bar.value) - y(0))
            let kind = bar.value < 0 ? "down" : "up"
            parts.append(
                "<rect class=\"\(kind)\" x=\"\(Int(x))\" y=\"\(Int(top))\" width=\"\(Int(slot * 0.6))\" height=\"\(Int(max(size, 1)))\"><title>\(bar.label): \(format(bar.value))</title></rect>")
            parts.append("<text class=\"label\" x=\"\(Int(x))\" y=\"\(Int(height) - 8)\">\(bar.label)</text>")
        }
        parts.append("</svg>")
        return HTML(parts)
    }
}
