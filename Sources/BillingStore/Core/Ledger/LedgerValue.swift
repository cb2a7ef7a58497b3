import BillingCore

/// A ledger column's value as both backends bind and read it, so that the decisions about what a
/// row holds (typed fields, versions, child rows, dump lines) are made once, not per backend.
/// SQLite stores a boolean as 0 or 1; PostgreSQL binds it as a real boolean.
package enum LedgerValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case boolean(Bool)
    case text(String)
    case blob(ArraySlice<UInt8>)
}

extension LedgerValue: CustomStringConvertible {
    /// As GRDB prints SQLite's storage (`NULL`, `42`, `"text"`, `Data(12 bytes)`; booleans as 0
    /// and 1, which is what SQLite stores), so that the dumps of both backends compare equal.
    package var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let number): String(number)
        case .boolean(let flag): flag ? "1" : "0"
        case .text(let text): String(reflecting: text)
        case .blob(let bytes): "Data(\(bytes.count) bytes)"
        }
    }
}

/// A Swift value a ledger column holds.
protocol LedgerValueConvertible {
    var ledgerValue: LedgerValue { get }
}

extension String: LedgerValueConvertible { var ledgerValue: LedgerValue { .text(self) } }
extension Int64: LedgerValueConvertible { var ledgerValue: LedgerValue { .integer(self) } }
extension Int: LedgerValueConvertible { var ledgerValue: LedgerValue { .integer(Int64(self)) } }
extension Bool: LedgerValueConvertible { var ledgerValue: LedgerValue { .boolean(self) } }

extension Optional where Wrapped: LedgerValueConvertible {
    var ledgerValue: LedgerValue { self?.ledgerValue ?? .null }
}

/// Turns `?` placeholders into PostgreSQL's `$1`, `$2` … (and `?N` into `$N`), so that a
/// statement both dialects read alike is spelled once. Quoted literals are left alone. `spell`
/// gives what stands for the n-th placeholder, when it is not `$n`.
func numberedPlaceholders(_ sql: String, spell: (Int) -> String = { "$\($0)" }) -> String {
    var result = ""
    result.reserveCapacity(sql.utf8.count + 16)
    var count = 0
    var inLiteral = false
    var characters = sql.makeIterator()
    var pending = characters.next()
    while let character = pending {
        pending = characters.next()
        if character == "'" { inLiteral.toggle() }
        guard character == "?", !inLiteral else {
            result.append(character)
            continue
        }
        var digits = ""
        while let next = pending, next.isASCII, next.isNumber {
            digits.append(next)
            pending = characters.next()
        }
        if digits.isEmpty {
            count += 1
            digits = String(count)
        }
        result += spell(Int(digits) ?? 0)
    }
    return result
}
