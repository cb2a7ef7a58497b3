import Foundation

/// The part of billingd a setting configures: the nesting of ``Settings`` and the order of the
/// settings table in `--help`, docs/configuration.md and `deploy/billingd.env.example`.
public enum SettingsArea: String, CaseIterable, Sendable {
    /// `serve`'s listener: address, timeouts, connection caps.
    case server
    /// The ledger: a SQLite file, or PostgreSQL and its pool.
    case database
    /// Stripe: the webhook secrets, the API key and how its calls are made, the missed-events sweep.
    case stripe
    /// The service API's bearer tokens.
    case serviceAPI
    /// `GET /metrics`.
    case metrics
    /// The plan catalog.
    case plans
    /// What every command logs.
    case logging
    /// The scheduled full reconcile (Stripe and the App Store).
    case reconcile
    /// The usage report to Stripe Billing Meters.
    case usage
    /// The App Store: Server Notifications, receipts and the App Store Server API.
    case appStore
    /// The outbox: webhooks to the app's backend.
    case outbox
    /// The revenue metrics API (and the console): its tokens, the reporting currency and its rates.
    case console
}

/// A setting as people see it: its variable, area, default and meaning (`--help`, the docs).
public struct SettingDescription: Sendable, Hashable {
    public let name: String
    public let area: SettingsArea
    /// The default as shown to people; for a setting with no value unset, what unset means.
    public let shownDefault: String
    public let meaning: String
}

/// One entry of the settings table: the variable as people see it, and how its text becomes a
/// value. ``SettingsReader`` reads a variable only through its entry.
struct Setting<Value: Sendable>: Sendable {
    let description: SettingDescription
    /// Turns the variable's trimmed text (nil: unset or blank) into the value; throws
    /// ``SettingsError`` naming the variable.
    let read: @Sendable (_ text: String?, _ name: String) throws(SettingsError) -> Value
    /// A comma-separated list: one of only commas and blanks is unset.
    let isList: Bool

    /// A setting whose default is text, parsed as a set value is: the default is written once.
    init(
        _ name: String, _ area: SettingsArea, default defaultText: String, meaning: String, isList: Bool = false,
        parse: SettingParser<Value>
    ) {
        description = SettingDescription(name: name, area: area, shownDefault: defaultText, meaning: meaning)
        read = { text, name throws(SettingsError) in try parse.parse(text ?? defaultText, name) }
        self.isList = isList
    }

    /// A setting with no value when unset (nil, or an empty list); `unset` says what that means.
    init(_ name: String, _ area: SettingsArea, unset: String, meaning: String, isList: Bool = false, whenUnset: Value, parse: SettingParser<Value>) {
        description = SettingDescription(name: name, area: area, shownDefault: unset, meaning: meaning)
        read = { text, name throws(SettingsError) in
            guard let text else { return whenUnset }
            return try parse.parse(text, name)
        }
        self.isList = isList
    }
}

extension Setting {
    /// An optional setting: nil when unset.
    init<Wrapped>(_ name: String, _ area: SettingsArea, unset: String, meaning: String, parse: SettingParser<Wrapped>)
    where Value == Wrapped? {
        self.init(name, area, unset: unset, meaning: meaning, whenUnset: nil, parse: SettingParser { text, name throws(SettingsError) in try parse.parse(text, name) })
    }

    /// A comma-separated list; empty when unset.
    init(_ name: String, _ area: SettingsArea, unset: String, meaning: String, list parse: SettingParser<[String]> = .list) where Value == [String] {
        self.init(name, area, unset: unset, meaning: meaning, isList: true, whenUnset: [], parse: parse)
    }
}

/// How a setting's text becomes a value, and the message when it cannot.
struct SettingParser<Value: Sendable>: Sendable {
    let parse: @Sendable (_ text: String, _ name: String) throws(SettingsError) -> Value

    init(_ parse: @escaping @Sendable (_ text: String, _ name: String) throws(SettingsError) -> Value) {
        self.parse = parse
    }
}

extension SettingParser where Value == String {
    /// The text as it is.
    static var text: Self { Self { text, _ in text } }
}

extension SettingParser where Value == [String] {
    /// Comma-separated items, trimmed, blanks dropped.
    static var list: Self { Self { text, _ in SettingParser.items(text) } }

    /// Comma-separated items, each checked by `check`.
    static func list(checking check: @escaping @Sendable (_ item: String, _ name: String) throws(SettingsError) -> Void) -> Self {
        Self { text, name throws(SettingsError) in
            let items = SettingParser.items(text)
            for item in items { try check(item, name) }
            return items
        }
    }
}

extension SettingParser {
    static func items(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

extension SettingParser where Value == Int {
    /// A whole number in `range`: "EXPECTED from LOW to HIGH" when it is not.
    static func count(_ range: ClosedRange<Int>, expected: String) -> Self {
        Self { text, name throws(SettingsError) in
            guard let number = Int(text), range.contains(number) else {
                throw SettingsError.invalid(name, text, "\(expected) from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
    }
}

extension SettingParser where Value == Double {
    /// Requests per second, from 0.1 to 10000.
    static var requestsPerSecond: Self {
        Self { text, name throws(SettingsError) in
            guard let number = Double(text), number >= 0.1, number <= 10_000 else {
                throw SettingsError.invalid(name, text, "requests per second, from 0.1 to 10000")
            }
            return number
        }
    }
}

extension SettingParser where Value == Duration {
    /// A duration (`90`, `90s`, `5m`, `24h`, `1d`) in `range` seconds.
    static func duration(_ range: ClosedRange<Int64>) -> Self {
        Self { text, name throws(SettingsError) in
            guard let seconds = Settings.parseSeconds(text), range.contains(seconds) else {
                throw SettingsError.invalid(
                    name, text, "a duration from \(range.lowerBound) to \(range.upperBound) seconds, such as 30s, 5m, 24h or 1d")
            }
            return .seconds(seconds)
        }
    }
}

extension SettingParser where Value == Duration? {
    /// A duration in `range` seconds, or `off` (also `0`, `none`, `never`): nil.
    static func durationOrOff(_ range: ClosedRange<Int64>) -> Self {
        Self { text, name throws(SettingsError) in
            if ["off", "0", "none", "never"].contains(text.lowercased()) { return nil }
            guard let seconds = Settings.parseSeconds(text), range.contains(seconds) else {
                throw SettingsError.invalid(
                    name, text, "a duration from \(range.lowerBound) to \(range.upperBound) seconds, such as 30s, 5m, 24h or 1d, or off")
            }
            return .seconds(seconds)
        }
    }
}

/// Reads the variables of one environment (and config file), each only through its table entry,
/// and notes every variable it was asked for: a test compares those with the table.
final class SettingsReader {
    private let values: [String: String]
    /// The variables read so far, in order.
    private(set) var namesRead: [String] = []

    init(values: [String: String]) {
        self.values = values
    }

    /// The setting's value: its text parsed, or its default.
    func callAsFunction<Value>(_ setting: Setting<Value>) throws(SettingsError) -> Value {
        try setting.read(text(setting), setting.description.name)
    }

    /// The setting's text, trimmed; nil when it is unset or blank (or a list of no items).
    func text<Value>(_ setting: Setting<Value>) -> String? {
        let name = setting.description.name
        namesRead.append(name)
        guard let raw = values[name]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
        if setting.isList, SettingParser<[String]>.items(raw).isEmpty { return nil }
        return raw
    }

    /// The setting's text exactly as set: a password may begin or end with a space.
    func verbatim<Value>(_ setting: Setting<Value>) -> String? {
        namesRead.append(setting.description.name)
        return values[setting.description.name]
    }
}
