import BillingCore

/// Unix seconds to and from ISO 8601 in UTC, exactly and without Foundation's calendars, so
/// that exports are byte-identical whatever the machine's time zone or locale.
public enum UTCTimestamp {
    /// `2026-01-31T23:59:59Z`.
    public static func string(_ seconds: Int64) -> String {
        var bytes: [UInt8] = []
        append(seconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `YYYY-MM-DDTHH:MM:SSZ` of the instant to `bytes` (years outside 0…9999 get a
    /// sign and as many digits as they need).
    static func append(_ seconds: Int64, to bytes: inout [UInt8]) {
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civil(fromDays: days)
        if !(0...9999).contains(year) {
            bytes.append(UInt8(ascii: year < 0 ? "-" : "+"))
            DecimalAmount.append(year.magnitude, exponent: 0, to: &bytes)
        }
        // One append of a fixed-size buffer: this runs for every time cell of an export.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            func put(_ value: Int64, at index: Int) {
                buffer[index] = UInt8(truncatingIfNeeded: 0x30 + value / 10)
                buffer[index + 1] = UInt8(truncatingIfNeeded: 0x30 + value % 10)
            }
            put(year / 100, at: 0)
            put(year % 100, at: 2)
            buffer[4] = UInt8(ascii: "-")
            put(month, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(day, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(secondOfDay / 3600, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(secondOfDay % 3600 / 60, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(secondOfDay % 60, at: 17)
            buffer[19] = UInt8(ascii: "Z")
            let start = (0...9999).contains(year) ? 0 : 4
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<20]))
        }
    }

    /// Parses an instant given on the command line or in a query string, in UTC: a year
    /// (`2026`, its first second), a month (`2026-01`), a day (`2026-01-31`, its midnight), a time
    /// `2026-01-31T12:00[:00]` with `Z`, a `±HH:MM` offset or none (meaning UTC; a space may
    /// replace the `T`), or Unix seconds (`1767225600`, five digits or more so that no year is
    /// taken for seconds). Nil when it is none of these or not a real date.
    public static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 40 else { return nil }
        if bytes.count > 4, bytes.allSatisfy(isDigit) {
            return Int64(text)
        }
        var scanner = Scanner(bytes: bytes)
        guard let year = scanner.number(digits: 4) else { return nil }
        var month: Int64 = 1
        if !scanner.isAtEnd {
            guard scanner.take("-"), let parsedMonth = scanner.number(digits: 2), (1...12).contains(parsedMonth) else { return nil }
            month = parsedMonth
        }
        var day: Int64 = 1
        var secondOfDay: Int64 = 0
        var offset: Int64 = 0
        if !scanner.isAtEnd {
            guard scanner.take("-"), let parsedDay = scanner.number(digits: 2), parsedDay >= 1,
                parsedDay <= daysInMonth(year: year, month: month)
            else { return nil }
            day = parsedDay
            if !scanner.isAtEnd {
                guard scanner.take("T") || scanner.take("t") || scanner.take(" "), let hour = scanner.number(digits: 2),
                    hour < 24, scanner.take(":"), let minute = scanner.number(digits: 2), minute < 60
                else { return nil }
                var second: Int64 = 0
                if scanner.take(":") {
                    guard let parsedSecond = scanner.number(digits: 2), parsedSecond < 60 else { return nil }
                    second = parsedSecond
                }
                secondOfDay = hour * 3600 + minute * 60 + second
                if scanner.take("Z") || scanner.take("z") {
                    // UTC.
                } else if let sign = scanner.takeSign() {
                    guard let hours = scanner.number(digits: 2), hours < 24, scanner.take(":"),
                        let minutes = scanner.number(digits: 2), minutes < 60
                    else { return nil }
                    offset = sign * (hours * 3600 + minutes * 60)
                }
            }
        }
        guard scanner.isAtEnd else { return nil }
        return days(year: year, month: month, day: day) * 86_400 + secondOfDay - offset
    }

    // MARK: - Calendar arithmetic (proleptic Gregorian; Howard Hinnant's algorithms)

    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        var isAtEnd: Bool { position == bytes.count }

        mutating func take(_ character: Unicode.Scalar) -> Bool {
            guard position < bytes.count, bytes[position] == UInt8(ascii: character) else { return false }
            position += 1
            return true
        }

        mutating func takeSign() -> Int64? {
            if take("+") { return 1 }
            if take("-") { return -1 }
            return nil
        }

        mutating func number(digits: Int) -> Int64? {
            guard position + digits <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[position..<position + digits] {
                guard UTCTimestamp.isDigit(byte) else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            position += digits
            return value
        }
    }
}
