/// Parses the HTTP `Date` header (RFC 9110 IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`) without
/// Foundation's locale-dependent formatters.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Unix seconds, nil for anything that is not an IMF-fixdate.
    public static func unixSeconds(_ text: String) -> Int64? {
        // "Sun, 06 Nov 1994 08:49:37 GMT": the weekday is ignored.
        guard let comma = text.firstIndex(of: ",") else { return nil }
        let fields = text[text.index(after: comma)...].split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count == 5, fields[4] == "GMT" || fields[4] == "UTC" else { return nil }
        guard let day = Int(fields[0]), (1...31).contains(day),
            let month = months.firstIndex(of: fields[1].lowercased()),
            let year = Int(fields[2]), fields[2].count == 4
        else { return nil }
        let time = fields[3].split(separator: ":")
        guard time.count == 3, time.allSatisfy({ $0.count == 2 }),
            let hour = Int(time[0]), let minute = Int(time[1]), let second = Int(time[2]),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: month + 1, day: day)
        return Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
