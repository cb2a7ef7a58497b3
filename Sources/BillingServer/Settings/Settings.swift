import BillingCore
import BillingStore
import Foundation
import Logging

/// billingd's settings: environment variables, optionally from a `KEY=VALUE` config file
/// named by `--config`. A variable set in the environment wins over the file.
public struct Settings: Sendable {
    public var databasePath: String
    /// The PostgreSQL ledger named by `BILLINGD_DATABASE_URL` (its password from the URL,
    /// `BILLINGD_DATABASE_PASSWORD` or `BILLINGD_DATABASE_PASSWORD_FILE`); nil for SQLite.
    public var databaseURL: PostgresConfiguration?
    /// The PostgreSQL pool's size in `serve`: connections each replica holds at most.
    public var databaseConnections: Int
    public var host: String
    public var port: Int
    /// How long `serve` keeps an idle keep-alive connection open.
    public var idleTimeout: Duration
    /// How long a request's head may take from its first byte.
    public var headerTimeout: Duration
    /// How long a request's body may take from the end of its head.
    public var bodyTimeout: Duration
    /// Bytes a second a request head or body must arrive at; 0: no minimum.
    public var minimumTransferRate: Int
    /// Connections `serve` serves at once.
    public var maximumConnections: Int
    /// Connections `serve` serves at once to one client address.
    public var maximumConnectionsPerClient: Int
    /// Webhook endpoint secrets, several during rotation; empty when not configured.
    public var webhookSecrets: [String]
    /// Largest accepted distance between a signature's timestamp and now, in seconds.
    public var signatureTolerance: Int64
    public var apiKey: String?
    public var apiBase: String
    /// The Stripe API version billingd pins on its calls and expects events in.
    public var stripeAPIVersion: String
    public var apiTokens: [String]
    public var plansPath: String?
    /// Bearer token that `GET /metrics` requires; open when nil.
    public var metricsToken: String?
    public var logLevel: Logger.Level
    /// Connect timeout and total timeout of one Stripe API attempt.
    public var stripeConnectTimeout: Duration
    public var stripeTimeout: Duration
    /// Retries of one Stripe API call after the first attempt.
    public var stripeMaxRetries: Int
    /// Stripe API requests per second for this process; nil = by key mode (25 test, 100 live).
    public var stripeRateLimit: Double?
    /// How often `serve` walks `/v1/events` for missed events; nil = off.
    public var eventsSweepInterval: Duration?
    /// How often `serve` runs a full reconcile; nil = off.
    public var reconcileInterval: Duration?
    /// How often `serve` reports usage to Stripe Billing Meters; nil = off.
    public var usageReportInterval: Duration?
    /// The app's bundle id; App Store support is on when it is set.
    public var appStoreBundleID: String?
    /// The app's Apple id, required to accept Production data.
    public var appStoreAppAppleID: Int64?
    /// Accepted App Store environments.
    public var appStoreEnvironments: Set<AppStoreEnvironment>
    /// Paths of trust anchors (DER or PEM); empty = the bundled Apple Root CA - G3.
    public var appStoreRootCertificates: [String]
    /// Paths of the roots StoreKit 1 receipts are verified to (DER or PEM); empty = the bundled
    /// Apple Inc. Root.
    public var appStoreReceiptRootCertificates: [String]
    /// Who keeps a purchase that a second app user restores.
    public var appStoreOwnership: AppStoreOwnershipRule
    /// The In-App Purchase key's issuer id; with the key id and key, turns the App Store Server API on.
    public var appStoreIssuerID: String?
    public var appStoreKeyID: String?
    /// Path of the `.p8` key file (must not be readable by others).
    public var appStorePrivateKeyPath: String?
    /// Replaces Apple's base URLs of both environments (for a fake).
    public var appStoreAPIBase: String?
    /// App Store Server API requests per second.
    public var appStoreRateLimit: Double
    /// Where the outbox sends events for the app's backend; empty: outbound webhooks off.
    public var appWebhookURLs: [String]
    /// `whsec_` secrets that sign them; several during a rotation, each signs every message.
    public var appWebhookSecrets: [String]
    /// Connect timeout of one outbound webhook attempt.
    public var appWebhookConnectTimeout: Duration
    /// Total timeout of one outbound webhook attempt.
    public var appWebhookTimeout: Duration

    /// Every variable billingd reads, with its default and meaning, for `--help` and errors.
    public static let documented: [(name: String, defaultValue: String, meaning: String)] = [
        ("BILLINGD_DATABASE", "./billingd.sqlite3", "SQLite file of the ledger"),
        ("BILLINGD_DATABASE_URL", "none: SQLite", "postgres://USER@HOST:PORT/DB?sslmode=…: the ledger on PostgreSQL, for several replicas"),
        ("BILLINGD_DATABASE_PASSWORD", "none", "the PostgreSQL password (or BILLINGD_DATABASE_PASSWORD_FILE: a file holding it)"),
        ("BILLINGD_DATABASE_CONNECTIONS", "20", "PostgreSQL connections serve holds at most (per replica)"),
        ("BILLINGD_HOST", "127.0.0.1", "address serve listens on"),
        ("BILLINGD_PORT", "8080", "port serve listens on (0: a free one)"),
        ("BILLINGD_IDLE_TIMEOUT", "60s", "close a connection idle this long"),
        ("BILLINGD_HEADER_TIMEOUT", "10s", "time to send a request head"),
        ("BILLINGD_BODY_TIMEOUT", "60s", "time to send a request body"),
        ("BILLINGD_MIN_TRANSFER_RATE", "1024", "bytes/s a request head or body must arrive at (0: off)"),
        ("BILLINGD_MAX_CONNECTIONS", "512", "connections served at once"),
        ("BILLINGD_MAX_CONNECTIONS_PER_CLIENT", "128", "connections served at once to one address"),
        ("STRIPE_WEBHOOK_SECRET", "required", "whsec_… secrets, comma-separated"),
        ("BILLINGD_SIGNATURE_TOLERANCE", "300", "seconds of clock skew allowed"),
        ("STRIPE_API_KEY", "none", "sk_/rk_ key for API calls"),
        ("STRIPE_API_BASE", "https://api.stripe.com", "Stripe API base URL"),
        ("STRIPE_API_VERSION", StripeAPIVersion.pinned, "pinned Stripe-Version"),
        ("BILLINGD_API_TOKENS", "API off", "service API bearer tokens"),
        ("BILLINGD_PLANS", "none", "plan catalog file"),
        ("BILLINGD_METRICS_TOKEN", "open", "bearer token /metrics requires"),
        ("BILLINGD_LOG_LEVEL", "info", "trace … critical"),
        ("STRIPE_CONNECT_TIMEOUT", "10s", "connect timeout of a Stripe API call"),
        ("STRIPE_TIMEOUT", "80s", "total timeout of one Stripe API attempt"),
        ("STRIPE_MAX_RETRIES", "4", "retries on network errors, 429 and 5xx"),
        ("STRIPE_RATE_LIMIT", "25 test / 100 live", "Stripe requests per second"),
        ("BILLINGD_EVENTS_SWEEP_INTERVAL", "5m", "serve's missed-events sweep (off)"),
        ("BILLINGD_RECONCILE_INTERVAL", "24h", "serve's full reconcile (off)"),
        ("BILLINGD_USAGE_REPORT_INTERVAL", "1m", "serve's usage report to Stripe meters (off)"),
        ("APPSTORE_BUNDLE_ID", "App Store off", "the app's bundle id; turns App Store on"),
        ("APPSTORE_APP_APPLE_ID", "none", "the app's Apple id; needed for Production"),
        ("APPSTORE_ENVIRONMENTS", "Production,Sandbox", "accepted App Store environments"),
        ("APPSTORE_ROOT_CERTIFICATES", "Apple Root CA - G3", "trust anchors, DER/PEM paths"),
        ("APPSTORE_RECEIPT_ROOT_CERTIFICATES", "Apple Inc. Root", "StoreKit 1 receipt roots, DER/PEM paths"),
        ("APPSTORE_OWNERSHIP", "keep", "keep or transfer restored purchases"),
        ("APPSTORE_ISSUER_ID", "API off", "In-App Purchase key's issuer id"),
        ("APPSTORE_KEY_ID", "API off", "In-App Purchase key id"),
        ("APPSTORE_PRIVATE_KEY", "API off", "path of the .p8 key (chmod 600)"),
        ("APPSTORE_API_BASE", "Apple's", "App Store Server API base URL"),
        ("APPSTORE_RATE_LIMIT", "20", "App Store Server API requests/s"),
        ("BILLINGD_APP_WEBHOOK_URL", "off", "the app's webhook URLs, comma-separated"),
        ("BILLINGD_APP_WEBHOOK_SECRET", "required with URL", "whsec_ signing secrets, comma-separated"),
        ("BILLINGD_APP_WEBHOOK_CONNECT_TIMEOUT", "5s", "connect timeout of one app webhook"),
        ("BILLINGD_APP_WEBHOOK_TIMEOUT", "15s", "total timeout of one app webhook"),
    ]

    /// The settings as an aligned table for `--help`.
    public static var helpTable: String {
        let width = (documented.map(\.name.count).max() ?? 0) + 2
        return documented.map { setting in
            "  " + setting.name.padding(toLength: width, withPad: " ", startingAt: 0)
                + "\(setting.meaning) [\(setting.defaultValue)]"
        }.joined(separator: "\n")
    }

    /// Loads settings from an environment, overlaying it on the config file if one is named.
    public static func load(environment: [String: String], configFile: String?) throws -> Settings {
        var values: [String: String] = [:]
        if let configFile {
            values = try ConfigFile.parse(path: configFile)
        }
        for (key, value) in environment { values[key] = value }
        return try Settings(values: values)
    }

    init(values: [String: String]) throws {
        func value(_ key: String) -> String? {
            guard let raw = values[key]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
            return raw
        }
        func list(_ key: String) -> [String] {
            (value(key) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        databasePath = value("BILLINGD_DATABASE") ?? "./billingd.sqlite3"
        if let url = value("BILLINGD_DATABASE_URL") {
            do {
                databaseURL = try PostgresConfiguration(
                    url: url, password: values["BILLINGD_DATABASE_PASSWORD"], passwordFile: value("BILLINGD_DATABASE_PASSWORD_FILE"))
            } catch {
                throw SettingsError.unusable(error.description)
            }
        } else if value("BILLINGD_DATABASE_PASSWORD") != nil || value("BILLINGD_DATABASE_PASSWORD_FILE") != nil {
            throw SettingsError.missing(
                "BILLINGD_DATABASE_URL", "A PostgreSQL password is set (BILLINGD_DATABASE_PASSWORD or _FILE) but no URL to use it with.")
        }
        if let connections = value("BILLINGD_DATABASE_CONNECTIONS") {
            guard let number = Int(connections), (2...1000).contains(number) else {
                throw SettingsError.invalid("BILLINGD_DATABASE_CONNECTIONS", connections, "a number of connections from 2 to 1000")
            }
            databaseConnections = number
        } else {
            databaseConnections = 20
        }
        host = value("BILLINGD_HOST") ?? "127.0.0.1"
        if let port = value("BILLINGD_PORT") {
            guard let number = Int(port), (0...65535).contains(number) else {
                throw SettingsError.invalid("BILLINGD_PORT", port, "a port number from 1 to 65535, or 0 for a free one")
            }
            self.port = number
        } else {
            port = 8080
        }
        webhookSecrets = list("STRIPE_WEBHOOK_SECRET")
        for secret in webhookSecrets where secret.contains("REPLACE_ME") {
            throw SettingsError.invalid("STRIPE_WEBHOOK_SECRET", nil, "your endpoint's signing secret; it still holds the example's placeholder")
        }
        for secret in webhookSecrets where secret.utf8.count < 8 {
            // Never echo a secret, not even a bad one.
            throw SettingsError.invalid("STRIPE_WEBHOOK_SECRET", nil, "endpoint secrets (whsec_…) of at least 8 characters; one of them is \(secret.utf8.count) characters long")
        }
        if let tolerance = value("BILLINGD_SIGNATURE_TOLERANCE") {
            guard let seconds = Int64(tolerance), seconds > 0, seconds <= 86_400 else {
                throw SettingsError.invalid("BILLINGD_SIGNATURE_TOLERANCE", tolerance, "seconds, from 1 to 86400")
            }
            signatureTolerance = seconds
        } else {
            signatureTolerance = 300
        }
        apiKey = value("STRIPE_API_KEY")
        if let key = apiKey, !["sk_test_", "sk_live_", "rk_test_", "rk_live_"].contains(where: key.hasPrefix) {
            throw SettingsError.invalid("STRIPE_API_KEY", nil, "a secret (sk_test_…, sk_live_…) or restricted (rk_…) key; the value set has another prefix")
        }
        apiBase = value("STRIPE_API_BASE") ?? "https://api.stripe.com"
        guard let base = URL(string: apiBase), ["http", "https"].contains(base.scheme ?? ""), base.host != nil else {
            throw SettingsError.invalid("STRIPE_API_BASE", apiBase, "an http(s) URL such as https://api.stripe.com")
        }
        stripeAPIVersion = value("STRIPE_API_VERSION") ?? StripeAPIVersion.pinned
        apiTokens = list("BILLINGD_API_TOKENS")
        for token in apiTokens where token.contains("REPLACE_ME") {
            throw SettingsError.invalid("BILLINGD_API_TOKENS", nil, "tokens of your own; one is still the example's placeholder")
        }
        for token in apiTokens where token.utf8.count < 16 {
            throw SettingsError.invalid("BILLINGD_API_TOKENS", nil, "tokens of at least 16 characters; one of them is \(token.utf8.count) characters long")
        }
        plansPath = value("BILLINGD_PLANS")
        metricsToken = value("BILLINGD_METRICS_TOKEN")
        if let token = metricsToken, token.utf8.count < 16 {
            throw SettingsError.invalid("BILLINGD_METRICS_TOKEN", nil, "a token of at least 16 characters; the one set is \(token.utf8.count) characters long")
        }
        if let level = value("BILLINGD_LOG_LEVEL") {
            guard let parsed = Logger.Level(rawValue: level.lowercased()) else {
                throw SettingsError.invalid("BILLINGD_LOG_LEVEL", level, "one of trace, debug, info, notice, warning, error, critical")
            }
            logLevel = parsed
        } else {
            logLevel = .info
        }
        func duration(_ key: String, default fallback: Duration?, range: ClosedRange<Int64>, allowOff: Bool) throws -> Duration? {
            guard let text = value(key) else { return fallback }
            if allowOff, ["off", "0", "none", "never"].contains(text.lowercased()) { return nil }
            guard let seconds = Self.parseSeconds(text), range.contains(seconds) else {
                throw SettingsError.invalid(
                    key, text,
                    "a duration from \(range.lowerBound) to \(range.upperBound) seconds, such as 30s, 5m, 24h or 1d\(allowOff ? ", or off" : "")")
            }
            return .seconds(seconds)
        }
        idleTimeout = try duration("BILLINGD_IDLE_TIMEOUT", default: .seconds(60), range: 1...3600, allowOff: false)!
        headerTimeout = try duration("BILLINGD_HEADER_TIMEOUT", default: .seconds(10), range: 1...600, allowOff: false)!
        bodyTimeout = try duration("BILLINGD_BODY_TIMEOUT", default: .seconds(60), range: 1...3600, allowOff: false)!
        func count(_ key: String, default fallback: Int, range: ClosedRange<Int>, expected: String) throws -> Int {
            guard let text = value(key) else { return fallback }
            guard let number = Int(text), range.contains(number) else {
                throw SettingsError.invalid(key, text, "\(expected) from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        minimumTransferRate = try count("BILLINGD_MIN_TRANSFER_RATE", default: 1024, range: 0...1_048_576, expected: "bytes per second")
        maximumConnections = try count("BILLINGD_MAX_CONNECTIONS", default: 512, range: 1...100_000, expected: "a number of connections")
        maximumConnectionsPerClient = try count(
            "BILLINGD_MAX_CONNECTIONS_PER_CLIENT", default: min(128, maximumConnections), range: 1...maximumConnections,
            expected: "a number of connections, at most BILLINGD_MAX_CONNECTIONS,")
        stripeConnectTimeout = try duration("STRIPE_CONNECT_TIMEOUT", default: .seconds(10), range: 1...300, allowOff: false)!
        stripeTimeout = try duration("STRIPE_TIMEOUT", default: .seconds(80), range: 1...600, allowOff: false)!
        if let retries = value("STRIPE_MAX_RETRIES") {
            guard let number = Int(retries), (0...10).contains(number) else {
                throw SettingsError.invalid("STRIPE_MAX_RETRIES", retries, "a number of retries from 0 to 10")
            }
            stripeMaxRetries = number
        } else {
            stripeMaxRetries = 4
        }
        if let rate = value("STRIPE_RATE_LIMIT") {
            guard let number = Double(rate), number >= 0.1, number <= 10_000 else {
                throw SettingsError.invalid("STRIPE_RATE_LIMIT", rate, "requests per second, from 0.1 to 10000")
            }
            stripeRateLimit = number
        } else {
            stripeRateLimit = nil
        }
        eventsSweepInterval = try duration("BILLINGD_EVENTS_SWEEP_INTERVAL", default: .seconds(300), range: 30...86_400, allowOff: true)
        reconcileInterval = try duration("BILLINGD_RECONCILE_INTERVAL", default: .seconds(86_400), range: 300...(30 * 86_400), allowOff: true)
        usageReportInterval = try duration("BILLINGD_USAGE_REPORT_INTERVAL", default: .seconds(60), range: 5...86_400, allowOff: true)
        appWebhookURLs = list("BILLINGD_APP_WEBHOOK_URL")
        for url in appWebhookURLs where !(url.hasPrefix("https://") || url.hasPrefix("http://")) {
            throw SettingsError.invalid("BILLINGD_APP_WEBHOOK_URL", url, "http:// or https:// URLs of the app's webhook endpoints, comma-separated")
        }
        appWebhookSecrets = list("BILLINGD_APP_WEBHOOK_SECRET")
        if !appWebhookURLs.isEmpty {
            guard !appWebhookSecrets.isEmpty else {
                throw SettingsError.missing(
                    "BILLINGD_APP_WEBHOOK_SECRET",
                    "BILLINGD_APP_WEBHOOK_URL is set: set the secret that signs its webhooks (whsec_ and base64; `billingd outbox send-test --new-secret` prints one).")
            }
            do { _ = try StandardWebhookSigner(secrets: appWebhookSecrets) } catch {
                throw SettingsError.invalid("BILLINGD_APP_WEBHOOK_SECRET", nil, error.description)
            }
        }
        appWebhookConnectTimeout = try duration("BILLINGD_APP_WEBHOOK_CONNECT_TIMEOUT", default: .seconds(5), range: 1...300, allowOff: false)!
        appWebhookTimeout = try duration("BILLINGD_APP_WEBHOOK_TIMEOUT", default: .seconds(15), range: 1...600, allowOff: false)!

        appStoreBundleID = value("APPSTORE_BUNDLE_ID")
        if let bundle = appStoreBundleID,
            !(1...255).contains(bundle.utf8.count) || !bundle.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") })
        {
            throw SettingsError.invalid("APPSTORE_BUNDLE_ID", bundle, "the app's bundle id from App Store Connect, such as com.example.app")
        }
        if let id = value("APPSTORE_APP_APPLE_ID") {
            guard let number = Int64(id), number > 0 else {
                throw SettingsError.invalid("APPSTORE_APP_APPLE_ID", id, "the app's Apple ID, a number (App Store Connect → App Information → Apple ID)")
            }
            appStoreAppAppleID = number
        } else {
            appStoreAppAppleID = nil
        }
        let known = [AppStoreEnvironment.production, .sandbox, .xcode, .localTesting]
        var environments = Set<AppStoreEnvironment>()
        for name in list("APPSTORE_ENVIRONMENTS") {
            guard let environment = known.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else {
                throw SettingsError.invalid("APPSTORE_ENVIRONMENTS", name, "a comma-separated list of Production, Sandbox, Xcode, LocalTesting")
            }
            environments.insert(environment)
        }
        appStoreEnvironments = environments.isEmpty ? [.production, .sandbox] : environments
        appStoreRootCertificates = list("APPSTORE_ROOT_CERTIFICATES")
        appStoreReceiptRootCertificates = list("APPSTORE_RECEIPT_ROOT_CERTIFICATES")
        if let rule = value("APPSTORE_OWNERSHIP") {
            guard let parsed = AppStoreOwnershipRule(rawValue: rule.lowercased()) else {
                throw SettingsError.invalid("APPSTORE_OWNERSHIP", rule, "keep (the first user keeps a purchase) or transfer (a restore moves it)")
            }
            appStoreOwnership = parsed
        } else {
            appStoreOwnership = .keep
        }
        appStoreIssuerID = value("APPSTORE_ISSUER_ID")
        appStoreKeyID = value("APPSTORE_KEY_ID")
        appStorePrivateKeyPath = value("APPSTORE_PRIVATE_KEY")
        let apiSettings = [("APPSTORE_ISSUER_ID", appStoreIssuerID), ("APPSTORE_KEY_ID", appStoreKeyID), ("APPSTORE_PRIVATE_KEY", appStorePrivateKeyPath)]
        let missing = apiSettings.filter { $0.1 == nil }.map(\.0)
        if !missing.isEmpty, missing.count < apiSettings.count {
            throw SettingsError.invalid(
                missing[0], nil,
                "set together with \(apiSettings.filter { $0.1 != nil }.map(\.0).joined(separator: " and ")): the App Store Server API needs the issuer id, the key id and the .p8 key (App Store Connect → Users and Access → Integrations → In-App Purchase)")
        }
        if appStoreIssuerID != nil, appStoreBundleID == nil {
            throw SettingsError.invalid("APPSTORE_BUNDLE_ID", nil, "the app's bundle id; the App Store Server API key is set, and its tokens name the app")
        }
        if let keyID = appStoreKeyID, !(keyID.count == 10 && keyID.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) })) {
            throw SettingsError.invalid("APPSTORE_KEY_ID", keyID, "the 10-character key id App Store Connect shows beside the key, such as 2X9R4HXF34")
        }
        appStoreAPIBase = value("APPSTORE_API_BASE")
        if let base = appStoreAPIBase {
            guard let url = URL(string: base), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw SettingsError.invalid("APPSTORE_API_BASE", base, "an http(s) URL such as https://api.storekit.apple.com")
            }
        }
        if let rate = value("APPSTORE_RATE_LIMIT") {
            guard let number = Double(rate), number >= 0.1, number <= 10_000 else {
                throw SettingsError.invalid("APPSTORE_RATE_LIMIT", rate, "requests per second, from 0.1 to 10000")
            }
            appStoreRateLimit = number
        } else {
            appStoreRateLimit = 20
        }
    }

    /// Seconds in `90`, `90s`, `5m`, `24h` or `1d`.
    static func parseSeconds(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Int64)] = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            return Int64(trimmed.dropLast()).map { $0 * factor }
        }
        return Int64(trimmed)
    }

    /// Every configured secret value (webhook secrets, service API and metrics tokens, the Stripe
    /// key, the database password), for the log handler to mask wherever one appears. The app's
    /// webhook URLs are logged with each failed delivery: credentials in one (`user:password@`,
    /// a `?token=` value) are masked too.
    public var secretValues: [String] {
        webhookSecrets + apiTokens + appWebhookSecrets + appWebhookURLs.flatMap(Self.credentials(in:))
            + [metricsToken, apiKey, databaseURL?.password?.value].compactMap { $0 }
    }

    /// The password and query values of a URL: what an endpoint's address may carry as a secret.
    public static func credentials(in url: String) -> [String] {
        guard let components = URLComponents(string: url) else { return [] }
        let values = [components.password] + (components.queryItems ?? []).map(\.value)
        return values.compactMap { $0 }.filter { $0.utf8.count >= 8 }
    }

    /// Whether the API key is for live mode (nil without a key).
    public var apiKeyIsLive: Bool? {
        apiKey.map { $0.hasPrefix("sk_live_") || $0.hasPrefix("rk_live_") }
    }
}

/// A setting that is missing or malformed; the message names the variable and what it takes.
public enum SettingsError: Error, CustomStringConvertible {
    case invalid(_ name: String, _ value: String?, _ expected: String)
    case missing(_ name: String, _ hint: String)
    case configFile(_ path: String, _ problem: String)
    /// A setting that parses but names something unusable; the message says which and why.
    case unusable(_ message: String)

    public var description: String {
        switch self {
        case .invalid(let name, let value, let expected):
            if let value { "\(name)=\(value) is not valid: expected \(expected)." } else { "\(name) is not valid: expected \(expected)." }
        case .missing(let name, let hint):
            "\(name) is not set. \(hint)"
        case .configFile(let path, let problem):
            "Config file \(path): \(problem)"
        case .unusable(let message):
            message
        }
    }
}

/// The `--config` file: `KEY=VALUE` lines as in a systemd environment file; `#` comments,
/// blank lines, an optional `export ` and optional single or double quotes around the value.
enum ConfigFile {
    static func parse(path: String) throws -> [String: String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SettingsError.configFile(path, "cannot be read (does it exist, and may billingd read it?)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw SettingsError.configFile(path, "is not UTF-8 text")
        }
        return try parse(text: text, path: path)
    }

    static func parse(text: String, path: String) throws -> [String: String] {
        var values: [String: String] = [:]
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line = String(line.dropFirst(7)).trimmingCharacters(in: .whitespaces) }
            guard let equals = line.firstIndex(of: "=") else {
                throw SettingsError.configFile(path, "line \(number + 1) is not KEY=VALUE")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw SettingsError.configFile(path, "line \(number + 1) has an invalid name")
            }
            var value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            values[key] = value
        }
        return values
    }
}
