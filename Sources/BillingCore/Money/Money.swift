/// An exact amount: Int64 minor units in a currency, never floating point.
public struct Money: Hashable, Sendable, CustomStringConvertible {
    /// The amount in the currency's minor unit (cents for `usd`, yen for `jpy`).
    public var minorUnits: Int64
    public var currency: Currency

    public init(minorUnits: Int64, currency: Currency) {
        self.minorUnits = minorUnits
        self.currency = currency
    }

    /// Parses an exact decimal string such as `12.34` or `-0.5` in the currency's exponent; nil
    /// when it is malformed, has more decimals than the currency or does not fit in Int64.
    public init?(decimal: some StringProtocol, currency: Currency) {
        guard let minorUnits = DecimalAmount.parse(decimal, exponent: currency.exponent) else { return nil }
        self.init(minorUnits: minorUnits, currency: currency)
    }

    /// The exact decimal string: `12.34` for 1234 `usd`, `1234` for 1234 `jpy`, `1.234` for 1234 `kwd`.
    public var decimalString: String {
        DecimalAmount.string(minorUnits, exponent: currency.exponent)
    }

    /// `12.34 usd`.
    public var description: String { "\(decimalString) \(currency.code)" }
}

/// Exact conversion between integer minor units and decimal strings, with no rounding, no
/// grouping separators and `.` as the decimal point, whatever the locale.
public enum DecimalAmount {
    /// The decimal string of `minorUnits` with `exponent` decimal places.
    public static func string<Amount: FixedWidthInteger>(_ minorUnits: Amount, exponent: Int) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        append(minorUnits, exponent: exponent, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the UTF-8 decimal string of `minorUnits` to `bytes`, for writers that build output
    /// without intermediate strings.
    @inlinable
    public static func append<Amount: FixedWidthInteger>(_ minorUnits: Amount, exponent: Int, to bytes: inout [UInt8]) {
        precondition(exponent >= 0 && exponent <= 18, "currency exponent out of range")
        precondition(Amount.bitWidth <= 128, "amounts wider than 128 bits are not supported")
        // Digits of the magnitude, least significant first; the magnitude of Int64.min and
        // Int128.min is representable, so no amount overflows here.
        var magnitude = minorUnits.magnitude
        // Filled from the end: 39 digits hold any 128-bit magnitude, padding adds at most 18
        // more, then the point and the sign; one append at the end.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer in
            var start = buffer.count
            var digits = 0
            func emit(_ byte: UInt8) {
                start -= 1
                buffer[start] = byte
            }
            repeat {
                let (quotient, remainder) = magnitude.quotientAndRemainder(dividingBy: 10)
                emit(UInt8(0x30) + UInt8(truncatingIfNeeded: remainder))
                digits += 1
                if digits == exponent { emit(0x2E) }
                magnitude = quotient
            } while magnitude != 0
            // At least one whole digit: 5 cents is 0.05.
            while digits <= exponent {
                emit(0x30)
                digits += 1
                if digits == exponent { emit(0x2E) }
            }
            if minorUnits < 0 { emit(0x2D) }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// Parses `-?digits(.digits)?` with at most `exponent` decimals into minor units; nil when
    /// malformed or out of Int64's range. Fewer decimals are allowed (`12.3` usd is 1230).
    public static func parse(_ text: some StringProtocol, exponent: Int) -> Int64? {
        var bytes = Substring(text).utf8[...]
        var negative = false
        if bytes.first == 0x2D {
            negative = true
            bytes = bytes.dropFirst()
        }
        let point = bytes.firstIndex(of: 0x2E)
        let whole = point.map { bytes[..<$0] } ?? bytes
        let fraction = point.map { bytes[bytes.index(after: $0)...] } ?? bytes[bytes.endIndex...]
        guard !whole.isEmpty, point == nil || !fraction.isEmpty, fraction.count <= exponent else { return nil }
        guard whole.allSatisfy({ (0x30...0x39).contains($0) }), fraction.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        // Accumulate negatively so that Int64.min parses too.
        var value: Int64 = 0
        let digits = Array(whole) + Array(fraction) + Array(repeating: 0x30, count: exponent - fraction.count)
        for digit in digits {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = shifted.subtractingReportingOverflow(Int64(digit - 0x30))
            guard !overflow1, !overflow2 else { return nil }
            value = next
        }
        if negative { return value }
        let (positive, overflow) = Int64(0).subtractingReportingOverflow(value)
        return overflow ? nil : positive
    }
}
