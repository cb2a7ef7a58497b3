/// Writes JSON straight into bytes: keys in a fixed order, no intermediate dictionaries, so that
/// a status read or an outbox payload costs microseconds, not an encoder's setup. The service
/// API's answers and the outbox's payloads and kept states are written with it.
package struct JSONBytesWriter {
    package private(set) var bytes: [UInt8] = []
    /// A value was written at this level, so the next one needs a comma.
    private var needsComma = false

    package init(capacity: Int = 1024) {
        bytes.reserveCapacity(capacity)
    }

    package mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    package mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    package mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    package mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Writes `"name":`; the next call writes its value.
    package mutating func key(_ name: String) {
        separate()
        appendString(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    package mutating func string(_ value: String?) {
        separate()
        if let value { appendString(value) } else { appendNull() }
        needsComma = true
    }

    package mutating func integer(_ value: Int64?) {
        separate()
        if let value { bytes.append(contentsOf: String(value).utf8) } else { appendNull() }
        needsComma = true
    }

    package mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
        needsComma = true
    }

    package mutating func null() {
        separate()
        appendNull()
        needsComma = true
    }

    package mutating func field(_ name: String, _ value: String?) {
        key(name)
        string(value)
    }

    package mutating func field(_ name: String, _ value: Int64?) {
        key(name)
        integer(value)
    }

    package mutating func field(_ name: String, _ value: Bool) {
        key(name)
        bool(value)
    }

    /// An amount: `{"amount": 1944, "currency": "usd", "decimal": "19.44"}` (minor units, the
    /// currency, and the exact decimal in the currency's exponent); null without an amount.
    package mutating func money(_ name: String, _ minorUnits: Int64?, currency: String?) {
        key(name)
        guard let minorUnits, let currency else {
            null()
            return
        }
        let money = Money(minorUnits: minorUnits, currency: Currency(currency))
        beginObject()
        field("amount", minorUnits)
        field("currency", money.currency.code)
        field("decimal", money.decimalString)
        endObject()
    }

    package mutating func strings(_ name: String, _ values: [String]) {
        key(name)
        beginArray()
        for value in values { string(value) }
        endArray()
    }

    /// `{"key": "value", …}` in the keys' order, so that equal maps are equal text.
    package mutating func stringMap(_ name: String, _ values: [String: String]) {
        key(name)
        beginObject()
        for key in values.keys.sorted() { field(key, values[key]) }
        endObject()
    }

    /// A value already written as JSON (an object, an array, a literal); `null` when empty.
    package mutating func json(_ value: [UInt8]) {
        separate()
        if value.isEmpty { appendNull() } else { bytes.append(contentsOf: value) }
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func appendNull() {
        bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// A JSON string: quotes, backslashes and control characters escaped, everything else as UTF-8.
    private mutating func appendString(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20, 0x7F:
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, Self.hex[Int(byte >> 4)], Self.hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
