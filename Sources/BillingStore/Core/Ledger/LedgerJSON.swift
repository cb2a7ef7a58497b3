import Foundation

/// A JSON value from JSONSerialization, carried across concurrency domains for rendering.
public struct LedgerJSON: @unchecked Sendable {
    // Safe: built once from freshly parsed JSON (NSNull, NSNumber, String, arrays and
    // dictionaries of them), never mutated, only read when rendering.
    public let value: Any
    init(_ value: Any) { self.value = value }
}

extension LedgerJSON {
    /// Named values as the service API writes JSON, on either backend: snake_case keys, booleans
    /// as true/false, blobs in base64.
    static func dictionary(_ columns: [(name: String, value: LedgerValue)], skipping: Set<String>) -> [String: any Sendable] {
        var result: [String: any Sendable] = [:]
        for (column, value) in columns where !skipping.contains(column) {
            let key = snakeCase(column)
            switch value {
            case .null: result[key] = LedgerJSON(NSNull())
            case .integer(let number): result[key] = number
            case .boolean(let flag): result[key] = flag
            case .text(let text): result[key] = text
            case .blob(let bytes): result[key] = Data(bytes).base64EncodedString()
            }
        }
        return result
    }

    /// `currentPeriodStart` → `current_period_start`, `appUserID` → `app_user_id`.
    static func snakeCase(_ name: String) -> String {
        let characters = Array(name)
        var result = ""
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0 {
                let previous = characters[index - 1]
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && nextIsLower) { result.append("_") }
            }
            result.append(contentsOf: character.lowercased())
        }
        return result
    }
}
