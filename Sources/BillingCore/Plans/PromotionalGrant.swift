/// Access to a tier given by an operator or the app (a support gesture, a referral), not bought:
/// it entitles like a subscription of its tier from ``startsAt`` until ``expiresAt`` unless
/// revoked, and never counts as revenue.
public struct PromotionalGrant: Sendable, Equatable {
    /// `grant_` and 24 random base-32 characters.
    public var id: String
    /// The tier's id in the plan catalog.
    public var tier: String
    /// Unix seconds.
    public var startsAt: Int64
    /// Unix seconds; access ends at this instant, by date, with no job.
    public var expiresAt: Int64
    /// Why it was given, as its giver wrote it.
    public var reason: String
    /// Who gave it: `api:LABEL` or `console:LABEL`.
    public var createdBy: String
    /// Unix seconds; nil while not revoked.
    public var revokedAt: Int64?
    public var revokedBy: String?

    public init(
        id: String, tier: String, startsAt: Int64, expiresAt: Int64, reason: String, createdBy: String, revokedAt: Int64? = nil,
        revokedBy: String? = nil
    ) {
        self.id = id
        self.tier = tier
        self.startsAt = startsAt
        self.expiresAt = expiresAt
        self.reason = reason
        self.createdBy = createdBy
        self.revokedAt = revokedAt
        self.revokedBy = revokedBy
    }

    /// Whether it grants its tier at `now` (Unix seconds): started, not expired, not revoked.
    public func isActive(now: Int64) -> Bool {
        revokedAt == nil && startsAt <= now && now < expiresAt
    }

    /// How long a grant may last at most: ten years of 366 days.
    public static let longestDuration: Int64 = 10 * 366 * 86_400
    /// The longest reason kept, in characters.
    public static let longestReason = 500
}

/// An ISO-8601 duration as a grant's length: `PnY`, `PnM`, `PnW`, `PnD` and `PTnH`, `PTnM`,
/// `PTnS`, combined (`P1M15D`, `P1DT12H`). Months and years are calendar months and years of the
/// UTC calendar counted from the start, as a subscription's period is (`P1M` from 31 January ends
/// on the last day of February); weeks and days are 7 × 86,400 and 86,400 seconds.
public struct GrantDuration: Sendable, Equatable {
    public var years: Int64 = 0
    public var months: Int64 = 0
    public var days: Int64 = 0
    public var seconds: Int64 = 0

    public init(years: Int64 = 0, months: Int64 = 0, days: Int64 = 0, seconds: Int64 = 0) {
        (self.years, self.months, self.days, self.seconds) = (years, months, days, seconds)
    }

    /// Parses `text`; nil when it is not a positive duration of that shape (each number at most
    /// six digits, no fractions, no sign).
    public init?(iso8601 text: String) {
        var bytes = Array(text.utf8)[...]
        guard bytes.first == UInt8(ascii: "P"), bytes.count <= 40 else { return nil }
        bytes = bytes.dropFirst()
        var inTime = false
        var seen = Set<UInt8>()
        var any = false
        while let byte = bytes.first {
            if byte == UInt8(ascii: "T") {
                guard !inTime, bytes.count > 1 else { return nil }
                inTime = true
                bytes = bytes.dropFirst()
                continue
            }
            let digits = bytes.prefix { (0x30...0x39).contains($0) }
            guard !digits.isEmpty, digits.count <= 6 else { return nil }
            bytes = bytes.dropFirst(digits.count)
            guard let unit = bytes.first else { return nil }
            bytes = bytes.dropFirst()
            let number = Int64(String(decoding: digits, as: UTF8.self)) ?? 0
            let key = inTime ? unit | 0x80 : unit
            guard seen.insert(key).inserted else { return nil }
            switch (inTime, unit) {
            case (false, UInt8(ascii: "Y")): years = number
            case (false, UInt8(ascii: "M")): months = number
            case (false, UInt8(ascii: "W")): days += number * 7
            case (false, UInt8(ascii: "D")): days += number
            case (true, UInt8(ascii: "H")): seconds += number * 3600
            case (true, UInt8(ascii: "M")): seconds += number * 60
            case (true, UInt8(ascii: "S")): seconds += number
            default: return nil
            }
            any = true
        }
        guard any, years + months + days + seconds > 0 else { return nil }
    }

    /// The instant this long after `start` (Unix seconds).
    public func end(from start: Int64) -> Int64 {
        var end = start
        if years > 0 || months > 0 {
            end = CalendarMonths.adding(years * 12 + months, to: start)
        }
        return end + days * 86_400 + seconds
    }
}

/// Whole calendar months added to an instant in UTC, clamped to the target month's last day
/// (the date arithmetic is ``ReceiptDate``'s).
enum CalendarMonths {
    static func adding(_ months: Int64, to instant: Int64) -> Int64 {
        let days = instant >= 0 ? instant / 86_400 : (instant - 86_399) / 86_400
        let timeOfDay = instant - days * 86_400
        let (year, month, day) = ReceiptDate.civilFromDays(days)
        let total = year * 12 + (month - 1) + months
        let newYear = total >= 0 ? total / 12 : (total - 11) / 12
        let newMonth = total - newYear * 12 + 1
        let newDay = min(day, ReceiptDate.daysIn(month: newMonth, year: newYear))
        return ReceiptDate.daysFromCivil(year: newYear, month: newMonth, day: newDay) * 86_400 + timeOfDay
    }
}
