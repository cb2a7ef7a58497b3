import BillingCore
import BillingStore
import Foundation
import Logging

/// billingd's settings: environment variables, optionally from a `KEY=VALUE` config file
/// named by `--config`; a variable set in the environment wins over the file. Nested by area,
/// each variable read through its entry in ``SettingsTable``, the one list of name, default,
/// parse and meaning that `--help`, docs/configuration.md and the env example follow.
public struct Settings: Sendable {
    public var server: Server
    public var database: Database
    public var stripe: Stripe
    public var serviceAPI: ServiceAPI
    public var metrics: Metrics
    public var plans: Plans
    public var logging: Logging
    public var reconcile: Reconcile
    public var usage: Usage
    public var appStore: AppStore
    public var outbox: Outbox
    public var console: Console

    /// Where and how `serve` listens.
    public struct Server: Sendable {
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
    }

    /// The ledger: a SQLite file, or PostgreSQL when ``postgres`` is set.
    public struct Database: Sendable {
        /// The SQLite file (`BILLINGD_DATABASE`).
        public var sqlitePath: String
        /// The PostgreSQL ledger named by `BILLINGD_DATABASE_URL` (its password from the URL,
        /// `BILLINGD_DATABASE_PASSWORD` or `BILLINGD_DATABASE_PASSWORD_FILE`); nil for SQLite.
        public var postgres: PostgresConfiguration?
        /// The PostgreSQL pool's size in `serve`: connections each replica holds at most.
        public var connections: Int
        /// Group commits each replica runs at once on PostgreSQL (`BILLINGD_DATABASE_COMMITS`),
        /// at most half of ``connections``.
        public var commits: Int
        /// Days a superseded Stripe event body is kept (`BILLINGD_RETENTION_BODIES`); nil: forever.
        public var retentionBodiesDays: Int?
    }

    /// Stripe: the webhook endpoint's secrets, the API key and how its calls are made.
    public struct Stripe: Sendable {
        /// Webhook endpoint secrets, several during rotation; empty when not configured.
        public var webhookSecrets: [String]
        /// Largest accepted distance between a signature's timestamp and now, in seconds.
        public var signatureTolerance: Int64
        /// The secret or restricted key; nil: no Stripe API calls.
        public var apiKey: String?
        public var apiBase: String
        /// The Stripe API version billingd pins on its calls and expects events in.
        public var apiVersion: String
        /// Connect timeout and total timeout of one Stripe API attempt.
        public var connectTimeout: Duration
        public var timeout: Duration
        /// Retries of one Stripe API call after the first attempt.
        public var maxRetries: Int
        /// Stripe API requests per second for this process; nil = by key mode (25 test, 100 live).
        public var rateLimit: Double?
        /// How often `serve` walks `/v1/events` for missed events; nil = off.
        public var eventsSweepInterval: Duration?

        /// Whether the API key is for live mode (nil without a key).
        public var apiKeyIsLive: Bool? {
            apiKey.map { $0.hasPrefix("sk_live_") || $0.hasPrefix("rk_live_") }
        }
    }

    /// The service API for the app's backend.
    public struct ServiceAPI: Sendable {
        /// Bearer tokens it accepts, with their labels; empty: the service API is off.
        public var labeledTokens: [ConsoleToken]
        /// The tokens alone.
        public var tokens: [String] { labeledTokens.map(\.token) }
    }

    /// `GET /metrics`.
    public struct Metrics: Sendable {
        /// Bearer token that `GET /metrics` requires; open when nil.
        public var token: String?
    }

    /// The plan catalog.
    public struct Plans: Sendable {
        /// The catalog file; nil: one free tier.
        public var catalogPath: String?
    }

    /// What every command logs.
    public struct Logging: Sendable {
        public var level: Logger.Level
    }

    /// The scheduled full reconcile, of Stripe and of the App Store.
    public struct Reconcile: Sendable {
        /// How often `serve` runs a full reconcile; nil = off.
        public var interval: Duration?
    }

    /// The usage report to Stripe Billing Meters.
    public struct Usage: Sendable {
        /// How often `serve` reports usage to Stripe Billing Meters; nil = off.
        public var reportInterval: Duration?
    }

    /// The App Store: Server Notifications, StoreKit receipts, the App Store Server API.
    public struct AppStore: Sendable {
        /// The app's bundle id; App Store support is on when it is set.
        public var bundleID: String?
        /// The app's Apple id, required to accept Production data.
        public var appAppleID: Int64?
        /// Accepted App Store environments.
        public var environments: Set<AppStoreEnvironment>
        /// Paths of trust anchors (DER or PEM); empty = the bundled Apple Root CA - G3.
        public var rootCertificates: [String]
        /// Paths of the roots StoreKit 1 receipts are verified to (DER or PEM); empty = the
        /// bundled Apple Inc. Root.
        public var receiptRootCertificates: [String]
        /// Who keeps a purchase that a second app user restores.
        public var ownership: AppStoreOwnershipRule
        /// The In-App Purchase key's issuer id; with the key id and key, turns the App Store Server API on.
        public var issuerID: String?
        public var keyID: String?
        /// Path of the `.p8` key file (must not be readable by others).
        public var privateKeyPath: String?
        /// Replaces Apple's base URLs of both environments (for a fake).
        public var apiBase: String?
        /// App Store Server API requests per second.
        public var rateLimit: Double
        /// The key id that signs promotional offers and introductory-offer eligibility;
        /// `APPSTORE_KEY_ID` when not set.
        public var offerKeyID: String?
        /// That key: PEM text, or the path of a `.p8` file (never logged); `APPSTORE_PRIVATE_KEY`
        /// when not set.
        public var offerPrivateKey: String?
        /// The refund preference stated in answers to Apple's refund requests (`CONSUMPTION_REQUEST`).
        public var refundPreference: AppStoreRefundPolicy
    }

    /// The outbox: signed webhooks to the app's backend.
    public struct Outbox: Sendable {
        /// Where the outbox sends events for the app's backend; empty: outbound webhooks off.
        public var webhookURLs: [String]
        /// `whsec_` secrets that sign them; several during a rotation, each signs every message.
        public var webhookSecrets: [String]
        /// Connect timeout of one outbound webhook attempt.
        public var connectTimeout: Duration
        /// Total timeout of one outbound webhook attempt.
        public var timeout: Duration
    }

    /// The revenue metrics API under `/v1/metrics/` (and the console): who may read it, and the
    /// optional reporting currency its figures add a total in.
    public struct Console: Sendable {
        /// Bearer tokens it accepts; empty: the metrics API is off.
        public var tokens: [ConsoleToken]
        /// `BILLINGD_CONSOLE_SECURE_COOKIE=on`: the console's cookie is `Secure` on plain HTTP too.
        public var secureCookie: Bool
        /// The reporting currency and its rates (`BILLINGD_REPORTING_CURRENCY`, `BILLINGD_FX_RATES`);
        /// nil: figures per currency only.
        public var exchangeRates: ExchangeRates?
    }

    /// Every variable billingd reads, with its area, default and meaning.
    public static var table: [SettingDescription] { SettingsTable.all }

    /// The settings as an aligned table for `--help`.
    public static var helpTable: String {
        let width = (table.map(\.name.count).max() ?? 0) + 2
        return table.map { setting in
            "  " + setting.name.padding(toLength: width, withPad: " ", startingAt: 0)
                + "\(setting.meaning) [\(setting.shownDefault)]"
        }.joined(separator: "\n")
    }

    /// Loads settings from an environment, overlaying it on the config file if one is named.
    public static func load(environment: [String: String], configFile: String?) throws -> Settings {
        var values: [String: String] = [:]
        if let configFile {
            values = try ConfigFile.parse(path: configFile)
        }
        for (key, value) in environment { values[key] = value }
        return try Settings(reader: SettingsReader(values: values))
    }

    /// Reads every area, each variable through its table entry.
    init(reader read: SettingsReader) throws(SettingsError) {
        database = try Database(read)
        server = try Server(read)
        stripe = try Stripe(read)
        serviceAPI = ServiceAPI(labeledTokens: try read(SettingsTable.serviceAPITokens))
        plans = Plans(catalogPath: try read(SettingsTable.plansPath))
        metrics = Metrics(token: try read(SettingsTable.metricsToken))
        logging = Logging(level: try read(SettingsTable.logLevel))
        reconcile = Reconcile(interval: try read(SettingsTable.reconcileInterval))
        usage = Usage(reportInterval: try read(SettingsTable.usageReportInterval))
        outbox = try Outbox(read)
        appStore = try AppStore(read)
        console = try Console(read)
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

    /// Every configured secret value (webhook secrets, service API, console and metrics tokens, the Stripe
    /// key, the database password, an offer key given as PEM text and each of its lines), for the
    /// log handler to mask wherever one appears. The app's
    /// webhook URLs are logged with each failed delivery: credentials in one (`user:password@`,
    /// a `?token=` value) are masked too.
    public var secretValues: [String] {
        stripe.webhookSecrets + serviceAPI.tokens + console.tokens.map(\.token) + outbox.webhookSecrets + outbox.webhookURLs.flatMap(Self.credentials(in:))
            + [metrics.token, stripe.apiKey, database.postgres?.password?.value].compactMap { $0 } + Self.pemSecrets(appStore.offerPrivateKey)
    }

    /// A key given as PEM text, whole and line by line (a log line could carry one); nothing for a path.
    static func pemSecrets(_ value: String?) -> [String] {
        guard let value, value.contains("-----BEGIN") else { return [] }
        return [value] + value.split(whereSeparator: \.isNewline).map(String.init).filter { !$0.hasPrefix("-----") && $0.utf8.count >= 8 }
    }

    /// The password and query values of a URL: what an endpoint's address may carry as a secret.
    public static func credentials(in url: String) -> [String] {
        guard let components = URLComponents(string: url) else { return [] }
        let values = [components.password] + (components.queryItems ?? []).map(\.value)
        return values.compactMap { $0 }.filter { $0.utf8.count >= 8 }
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
