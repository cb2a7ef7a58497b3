import BillingCore

/// Encodes export rows straight into UTF-8 bytes, as RFC 4180 CSV or as JSON Lines, without an
/// intermediate string per cell: the caller adds the fields of a row in the schema's order.
struct ExportRowEncoder {
    let format: InvoiceExportRequest.Format
    /// The bytes encoded so far; the exporter hands them on and empties this buffer.
    var bytes: [UInt8] = []
    private let columnCount: Int
    /// Per column, the bytes before its value in JSON: `{"name":` first, `,"name":` after.
    private let jsonKeys: [[UInt8]]
    private let columns: [String]
    private var field = 0

    init(format: InvoiceExportRequest.Format, columns: [String], capacity: Int) {
        self.format = format
        self.columns = columns
        columnCount = columns.count
        jsonKeys = columns.enumerated().map { index, name in
            var key: [UInt8] = index == 0 ? [UInt8(ascii: "{")] : [UInt8(ascii: ",")]
            ExportRowEncoder.appendJSONString(Array(name.utf8), to: &key)
            key.append(UInt8(ascii: ":"))
            return key
        }
        bytes.reserveCapacity(capacity)
    }

    /// The byte order mark Excel needs to read a CSV as UTF-8.
    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// The CSV header row (the column names); nothing for JSON Lines.
    mutating func header() {
        guard format == .csv else { return }
        for (index, name) in columns.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            appendCSVText(Array(name.utf8))
        }
        bytes.append(contentsOf: [0x0D, 0x0A])
    }

    mutating func beginRow() {
        field = 0
    }

    /// Appends the first `count` fields of an earlier row, as that row encoded them: the
    /// invoice's columns, which each of its lines repeats.
    mutating func appendEncodedFields(_ encoded: [UInt8], count: Int) {
        precondition(field == 0, "encoded fields start a row")
        bytes.append(contentsOf: encoded)
        field = count
    }

    mutating func endRow() {
        precondition(field == columnCount, "export row has \(field) fields, the schema \(columnCount)")
        switch format {
        case .csv: bytes.append(contentsOf: [0x0D, 0x0A])
        case .jsonl: bytes.append(contentsOf: [UInt8(ascii: "}"), 0x0A])
        }
    }

    private mutating func nextField() {
        switch format {
        case .csv: if field > 0 { bytes.append(UInt8(ascii: ",")) }
        case .jsonl: bytes.append(contentsOf: jsonKeys[field])
        }
        field += 1
    }

    /// An absent value: an empty CSV cell, a JSON `null`.
    mutating func null() {
        nextField()
        if format == .jsonl { bytes.append(contentsOf: Self.nullLiteral) }
    }

    /// Text, or null. In CSV it is quoted when needed and neutralised when it could be read as
    /// a formula; in JSON it is an escaped string.
    mutating func text(_ string: String?) {
        guard var string else { return null() }
        nextField()
        string.withUTF8 { utf8 in
            switch format {
            case .csv: appendCSVText(utf8)
            case .jsonl: Self.appendJSONString(utf8, to: &bytes)
            }
        }
    }

    mutating func integer(_ value: Int64?) {
        guard let value else { return null() }
        nextField()
        DecimalAmount.append(value, exponent: 0, to: &bytes)
    }

    /// An exact decimal amount: bare in CSV (a number to a spreadsheet), a string in JSON so that
    /// no reader turns it into a binary float.
    mutating func decimal(_ minorUnits: Int64, exponent: Int) {
        nextField()
        if format == .jsonl { bytes.append(UInt8(ascii: "\"")) }
        DecimalAmount.append(minorUnits, exponent: exponent, to: &bytes)
        if format == .jsonl { bytes.append(UInt8(ascii: "\"")) }
    }

    /// An amount as two columns: its exact decimal string, then its integer minor units.
    mutating func amount(_ minorUnits: Int64, exponent: Int) {
        decimal(minorUnits, exponent: exponent)
        integer(minorUnits)
    }

    /// An instant as ISO 8601 UTC, or null.
    mutating func time(_ seconds: Int64?) {
        guard let seconds else { return null() }
        nextField()
        if format == .jsonl { bytes.append(UInt8(ascii: "\"")) }
        UTCTimestamp.append(seconds, to: &bytes)
        if format == .jsonl { bytes.append(UInt8(ascii: "\"")) }
    }

    mutating func boolean(_ value: Bool?) {
        guard let value else { return null() }
        nextField()
        bytes.append(contentsOf: value ? Self.trueLiteral : Self.falseLiteral)
    }

    private static let nullLiteral = Array("null".utf8)
    private static let trueLiteral = Array("true".utf8)
    private static let falseLiteral = Array("false".utf8)

    // MARK: - CSV

    /// Whether a spreadsheet could take a cell starting like this for a formula (OWASP's list
    /// `=` `+` `-` `@` tab and carriage return, plus line feed, NUL and the full-width `＝` `＋`
    /// `－` `＠` some spreadsheets also accept).
    static func startsLikeFormula(_ utf8: some Collection<UInt8>) -> Bool {
        guard let first = utf8.first else { return false }
        switch first {
        case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "@"), 0x09, 0x0D, 0x0A, 0x00:
            return true
        case 0xEF:
            // U+FF1D ＝, U+FF0B ＋, U+FF0D －, U+FF20 ＠ are EF BC 9D / 8B / 8D / A0.
            let prefix = Array(utf8.prefix(3))
            return prefix.count == 3 && prefix[1] == 0xBC && [0x9D, 0x8B, 0x8D, 0xA0].contains(prefix[2])
        default:
            return false
        }
    }

    /// A CSV cell per RFC 4180: quoted when it holds a comma, a quote, CR or LF, with quotes
    /// doubled. A cell that could start a formula gets OWASP's treatment: a leading `'` inside
    /// quotes, which spreadsheets show as text and never evaluate.
    private mutating func appendCSVText(_ utf8: some Collection<UInt8>) {
        let formula = Self.startsLikeFormula(utf8)
        let quoted = formula || utf8.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 0x0D || $0 == 0x0A }
        guard quoted else {
            bytes.append(contentsOf: utf8)
            return
        }
        bytes.append(UInt8(ascii: "\""))
        if formula { bytes.append(UInt8(ascii: "'")) }
        for byte in utf8 {
            if byte == UInt8(ascii: "\"") { bytes.append(byte) }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
    }

    // MARK: - JSON

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// A JSON string literal of valid UTF-8: `"` and `\` escaped, control characters as `\n`,
    /// `\u001f` …, and U+0085, U+2028, U+2029 escaped so no line-splitting reader breaks a row.
    static func appendJSONString(_ utf8: some Collection<UInt8>, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        // Most text needs no escaping at all.
        if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 == 0xC2 || $0 == 0xE2 }) {
            bytes.append(contentsOf: utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        var iterator = utf8.makeIterator()
        var pending: [UInt8] = []
        while let byte = pending.isEmpty ? iterator.next() : pending.removeFirst() {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x00..<0x20: appendUnicodeEscape(UInt16(byte), to: &bytes)
            case 0xC2:
                // U+0085 (NEL) is C2 85.
                guard let next = iterator.next() else { bytes.append(byte); continue }
                if next == 0x85 { appendUnicodeEscape(0x85, to: &bytes) } else { bytes.append(byte); pending.append(next) }
            case 0xE2:
                // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
                guard let second = iterator.next() else { bytes.append(byte); continue }
                guard second == 0x80, let third = iterator.next() else { bytes.append(byte); pending.append(second); continue }
                if third == 0xA8 || third == 0xA9 {
                    appendUnicodeEscape(third == 0xA8 ? 0x2028 : 0x2029, to: &bytes)
                } else {
                    bytes.append(contentsOf: [byte, second, third])
                }
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func appendUnicodeEscape(_ value: UInt16, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u")])
        for shift in stride(from: 12, through: 0, by: -4) {
            bytes.append(hexDigits[Int((value >> UInt16(shift)) & 0xF)])
        }
    }
}
