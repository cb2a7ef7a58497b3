import BillingCore
import BillingStore
import Foundation
import Logging

/// Every variable billingd reads, once: name, area, default, meaning and how it is parsed. The
/// parser (``Settings/init(reader:)``), `billingd --help` (``Settings/helpTable``), docs/configuration.md's
/// settings table and `deploy/billingd.env.example` follow it; SettingsTableTests fails when the
/// parser reads a variable that is not in ``all``, or docs/configuration.md or the example misses one.
enum SettingsTable {
    /// The table in `--help` order: by area, then as an operator meets them.
    static let all: [SettingDescription] = [
        database.description, postgresURL.description, postgresPassword.description, postgresPasswordFile.description,
        postgresConnections.description, postgresCommits.description, retentionBodies.description,
        host.description, port.description, idleTimeout.description, headerTimeout.description, bodyTimeout.description,
        minimumTransferRate.description, maximumConnections.description, maximumConnectionsPerClient.description,
        webhookSecrets.description, signatureTolerance.description, stripeAPIKey.description, stripeAPIBase.description,
        stripeAPIVersion.description, stripeConnectTimeout.description, stripeTimeout.description, stripeMaxRetries.description,
        stripeRateLimit.description, eventsSweepInterval.description,
        serviceAPITokens.description, metricsToken.description, plansPath.description, logLevel.description,
        reconcileInterval.description, usageReportInterval.description,
        appStoreBundleID.description, appStoreAppAppleID.description, appStoreEnvironments.description,
        appStoreRootCertificates.description, appStoreReceiptRootCertificates.description, appStoreOwnership.description,
        appStoreIssuerID.description, appStoreKeyID.description, appStorePrivateKey.description, appStoreAPIBase.description,
        appStoreRateLimit.description, appStoreOfferKeyID.description, appStoreOfferPrivateKey.description,
        appStoreRefundPreference.description,
        appWebhookURLs.description, appWebhookSecrets.description, appWebhookConnectTimeout.description, appWebhookTimeout.description,
        consoleTokens.description, consoleSecureCookie.description, reportingCurrency.description, exchangeRates.description,
    ]

    // MARK: database

    static let database = Setting<String>("BILLINGD_DATABASE", .database, default: "./billingd.sqlite3", meaning: "SQLite file of the ledger", parse: .text)
    /// Parsed with the password by ``Settings/Database``.
    static let postgresURL = Setting<String?>(
        "BILLINGD_DATABASE_URL", .database, unset: "none: SQLite",
        meaning: "postgres://USER@HOST:PORT/DB?sslmode=…: the ledger on PostgreSQL, for several replicas", parse: .text)
    static let postgresPassword = Setting<String?>(
        "BILLINGD_DATABASE_PASSWORD", .database, unset: "none", meaning: "the PostgreSQL password (or BILLINGD_DATABASE_PASSWORD_FILE)", parse: .text)
    static let postgresPasswordFile = Setting<String?>(
        "BILLINGD_DATABASE_PASSWORD_FILE", .database, unset: "none", meaning: "a file holding the PostgreSQL password", parse: .text)
    static let postgresConnections = Setting<Int>(
        "BILLINGD_DATABASE_CONNECTIONS", .database, default: "20", meaning: "PostgreSQL connections serve holds at most (per replica)",
        parse: .count(2...1000, expected: "a number of connections"))
    /// Group commits one replica runs at once (issue 34): what the database's cores serve, not
    /// what the pool could hold.
    static let postgresCommits = Setting<Int>(
        "BILLINGD_DATABASE_COMMITS", .database, default: "4",
        meaning: "PostgreSQL group commits serve runs at once (per replica; about twice the database's cores across all replicas)",
        parse: .count(1...64, expected: "a number of commits"))

    /// Days a superseded Stripe event body is kept (issue 38); nil keeps every body.
    static let retentionBodies = Setting<Int?>(
        "BILLINGD_RETENTION_BODIES", .database, unset: "keep forever",
        meaning: "prune stored bodies of superseded Stripe events older than this, daily in serve and by billingd compact (400d; 35d to 36500d)",
        parse: SettingParser { text, name throws(SettingsError) in
            guard let days = BodyRetentionWindow.parseDays(text) else {
                throw SettingsError.invalid(name, text, BodyRetentionWindow.accepted)
            }
            return days
        })

    // MARK: server

    static let host = Setting<String>("BILLINGD_HOST", .server, default: "127.0.0.1", meaning: "address serve listens on", parse: .text)
    static let port = Setting<Int>(
        "BILLINGD_PORT", .server, default: "8080", meaning: "port serve listens on (0: a free one)",
        parse: SettingParser { text, name throws(SettingsError) in
            guard let number = Int(text), (0...65535).contains(number) else {
                throw SettingsError.invalid(name, text, "a port number from 1 to 65535, or 0 for a free one")
            }
            return number
        })
    static let idleTimeout = Setting<Duration>(
        "BILLINGD_IDLE_TIMEOUT", .server, default: "60s", meaning: "close a connection idle this long", parse: .duration(1...3600))
    static let headerTimeout = Setting<Duration>(
        "BILLINGD_HEADER_TIMEOUT", .server, default: "10s", meaning: "time to send a request head", parse: .duration(1...600))
    static let bodyTimeout = Setting<Duration>(
        "BILLINGD_BODY_TIMEOUT", .server, default: "60s", meaning: "time to send a request body", parse: .duration(1...3600))
    static let minimumTransferRate = Setting<Int>(
        "BILLINGD_MIN_TRANSFER_RATE", .server, default: "1024", meaning: "bytes/s a request head or body must arrive at (0: off)",
        parse: .count(0...1_048_576, expected: "bytes per second"))
    static let maximumConnections = Setting<Int>(
        "BILLINGD_MAX_CONNECTIONS", .server, default: "512", meaning: "connections served at once",
        parse: .count(1...100_000, expected: "a number of connections"))
    /// Its range and default depend on BILLINGD_MAX_CONNECTIONS: ``Settings/Server`` parses it.
    static let maximumConnectionsPerClient = Setting<String?>(
        "BILLINGD_MAX_CONNECTIONS_PER_CLIENT", .server, unset: "\(maximumConnectionsPerClientDefault)", meaning: "connections served at once to one address (at most BILLINGD_MAX_CONNECTIONS)",
        parse: .text)
    /// The per-client cap when unset, and at most BILLINGD_MAX_CONNECTIONS.
    static let maximumConnectionsPerClientDefault = 128

    // MARK: stripe

    static let webhookSecrets = Setting<[String]>(
        "STRIPE_WEBHOOK_SECRET", .stripe, unset: "required", meaning: "whsec_… secrets, comma-separated, at least 8 characters each",
        list: .list { secret, name throws(SettingsError) in
            if secret.contains("REPLACE_ME") {
                throw SettingsError.invalid(name, nil, "your endpoint's signing secret; it still holds the example's placeholder")
            }
            if secret.utf8.count < 8 {
                // Never echo a secret, not even a bad one.
                throw SettingsError.invalid(
                    name, nil, "endpoint secrets (whsec_…) of at least 8 characters; one of them is \(secret.utf8.count) characters long")
            }
        })
    static let signatureTolerance = Setting<Int64>(
        "BILLINGD_SIGNATURE_TOLERANCE", .stripe, default: "300", meaning: "seconds of clock skew allowed",
        parse: SettingParser { text, name throws(SettingsError) in
            guard let seconds = Int64(text), seconds > 0, seconds <= 86_400 else {
                throw SettingsError.invalid(name, text, "seconds, from 1 to 86400")
            }
            return seconds
        })
    static let stripeAPIKey = Setting<String?>(
        "STRIPE_API_KEY", .stripe, unset: "none", meaning: "sk_/rk_ key for API calls",
        parse: SettingParser { key, name throws(SettingsError) in
            guard ["sk_test_", "sk_live_", "rk_test_", "rk_live_"].contains(where: key.hasPrefix) else {
                throw SettingsError.invalid(name, nil, "a secret (sk_test_…, sk_live_…) or restricted (rk_…) key; the value set has another prefix")
            }
            return key
        })
    static let stripeAPIBase = Setting<String>(
        "STRIPE_API_BASE", .stripe, default: "https://api.stripe.com", meaning: "Stripe API base URL",
        parse: .httpURL(example: "https://api.stripe.com"))
    static let stripeAPIVersion = Setting<String>(
        "STRIPE_API_VERSION", .stripe, default: StripeAPIVersion.pinned, meaning: "pinned Stripe-Version", parse: .text)
    static let stripeConnectTimeout = Setting<Duration>(
        "STRIPE_CONNECT_TIMEOUT", .stripe, default: "10s", meaning: "connect timeout of a Stripe API call", parse: .duration(1...300))
    static let stripeTimeout = Setting<Duration>(
        "STRIPE_TIMEOUT", .stripe, default: "80s", meaning: "total timeout of one Stripe API attempt", parse: .duration(1...600))
    static let stripeMaxRetries = Setting<Int>(
        "STRIPE_MAX_RETRIES", .stripe, default: "4", meaning: "retries on network errors, 429 and 5xx",
        parse: .count(0...10, expected: "a number of retries"))
    static let stripeRateLimit = Setting<Double?>(
        "STRIPE_RATE_LIMIT", .stripe, unset: "25 test / 100 live", meaning: "Stripe requests per second", parse: .requestsPerSecond)
    static let eventsSweepInterval = Setting<Duration?>(
        "BILLINGD_EVENTS_SWEEP_INTERVAL", .stripe, default: "5m", meaning: "serve's missed-events sweep (off)",
        parse: .durationOrOff(30...86_400))

    // MARK: service API, metrics, plans, logging

    static let serviceAPITokens = Setting<[ConsoleToken]>(
        "BILLINGD_API_TOKENS", .serviceAPI, unset: "API off",
        meaning: "service API bearer tokens, comma-separated, each TOKEN or LABEL:TOKEN (the label names the app in grants and the log), at least 16 characters each",
        isList: true, whenUnset: [],
        parse: SettingParser { text, name throws(SettingsError) in try labeledTokens(text, name: name) })
    static let metricsToken = Setting<String?>(
        "BILLINGD_METRICS_TOKEN", .metrics, unset: "open", meaning: "bearer token /metrics requires, at least 16 characters",
        parse: SettingParser { token, name throws(SettingsError) in
            guard token.utf8.count >= 16 else {
                throw SettingsError.invalid(name, nil, "a token of at least 16 characters; the one set is \(token.utf8.count) characters long")
            }
            return token
        })
    static let plansPath = Setting<String?>("BILLINGD_PLANS", .plans, unset: "none", meaning: "plan catalog file", parse: .text)
    static let logLevel = Setting<Logger.Level>(
        "BILLINGD_LOG_LEVEL", .logging, default: "info", meaning: "trace … critical",
        parse: SettingParser { level, name throws(SettingsError) in
            guard let parsed = Logger.Level(rawValue: level.lowercased()) else {
                throw SettingsError.invalid(name, level, "one of trace, debug, info, notice, warning, error, critical")
            }
            return parsed
        })

    // MARK: reconcile, usage

    static let reconcileInterval = Setting<Duration?>(
        "BILLINGD_RECONCILE_INTERVAL", .reconcile, default: "24h", meaning: "serve's full reconcile (off)",
        parse: .durationOrOff(300...(30 * 86_400)))
    static let usageReportInterval = Setting<Duration?>(
        "BILLINGD_USAGE_REPORT_INTERVAL", .usage, default: "1m", meaning: "serve's usage report to Stripe meters (off)",
        parse: .durationOrOff(5...86_400))
}

extension SettingsTable {
    // MARK: App Store

    static let appStoreBundleID = Setting<String?>(
        "APPSTORE_BUNDLE_ID", .appStore, unset: "App Store off", meaning: "the app's bundle id; turns App Store on",
        parse: SettingParser { bundle, name throws(SettingsError) in
            let allowed = bundle.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") }
            guard (1...255).contains(bundle.utf8.count), allowed else {
                throw SettingsError.invalid(name, bundle, "the app's bundle id from App Store Connect, such as com.example.app")
            }
            return bundle
        })
    static let appStoreAppAppleID = Setting<Int64?>(
        "APPSTORE_APP_APPLE_ID", .appStore, unset: "none", meaning: "the app's Apple id; needed for Production",
        parse: SettingParser { id, name throws(SettingsError) in
            guard let number = Int64(id), number > 0 else {
                throw SettingsError.invalid(name, id, "the app's Apple ID, a number (App Store Connect → App Information → Apple ID)")
            }
            return number
        })
    static let appStoreEnvironments = Setting<Set<AppStoreEnvironment>>(
        "APPSTORE_ENVIRONMENTS", .appStore, default: "Production,Sandbox", meaning: "accepted App Store environments", isList: true,
        parse: SettingParser { text, name throws(SettingsError) in
            let known = [AppStoreEnvironment.production, .sandbox, .xcode, .localTesting]
            var environments = Set<AppStoreEnvironment>()
            for item in SettingParser<[String]>.items(text) {
                guard let environment = known.first(where: { $0.rawValue.lowercased() == item.lowercased() }) else {
                    throw SettingsError.invalid(name, item, "a comma-separated list of Production, Sandbox, Xcode, LocalTesting")
                }
                environments.insert(environment)
            }
            return environments
        })
    static let appStoreRootCertificates = Setting<[String]>(
        "APPSTORE_ROOT_CERTIFICATES", .appStore, unset: "Apple Root CA - G3", meaning: "trust anchors, DER/PEM paths")
    static let appStoreReceiptRootCertificates = Setting<[String]>(
        "APPSTORE_RECEIPT_ROOT_CERTIFICATES", .appStore, unset: "Apple Inc. Root", meaning: "StoreKit 1 receipt roots, DER/PEM paths")
    static let appStoreOwnership = Setting<AppStoreOwnershipRule>(
        "APPSTORE_OWNERSHIP", .appStore, default: "keep", meaning: "keep or transfer restored purchases",
        parse: SettingParser { rule, name throws(SettingsError) in
            guard let parsed = AppStoreOwnershipRule(rawValue: rule.lowercased()) else {
                throw SettingsError.invalid(name, rule, "keep (the first user keeps a purchase) or transfer (a restore moves it)")
            }
            return parsed
        })
    /// The issuer id, key id and key are set together; ``Settings/AppStore`` checks them.
    static let appStoreIssuerID = Setting<String?>(
        "APPSTORE_ISSUER_ID", .appStore, unset: "API off", meaning: "In-App Purchase key's issuer id", parse: .text)
    static let appStoreKeyID = Setting<String?>("APPSTORE_KEY_ID", .appStore, unset: "API off", meaning: "In-App Purchase key id", parse: .text)
    static let appStorePrivateKey = Setting<String?>(
        "APPSTORE_PRIVATE_KEY", .appStore, unset: "API off", meaning: "path of the .p8 key (chmod 600)", parse: .text)
    static let appStoreAPIBase = Setting<String?>(
        "APPSTORE_API_BASE", .appStore, unset: "Apple's", meaning: "App Store Server API base URL",
        parse: .httpURL(example: "https://api.storekit.apple.com"))
    static let appStoreRateLimit = Setting<Double>(
        "APPSTORE_RATE_LIMIT", .appStore, default: "20", meaning: "App Store Server API requests/s", parse: .requestsPerSecond)
    /// The key that signs offers; set together, else the API key's settings sign them.
    static let appStoreOfferKeyID = Setting<String?>(
        "APPSTORE_OFFER_KEY_ID", .appStore, unset: "APPSTORE_KEY_ID", meaning: "key id of the offer-signing key", parse: .text)
    static let appStoreOfferPrivateKey = Setting<String?>(
        "APPSTORE_OFFER_PRIVATE_KEY", .appStore, unset: "APPSTORE_PRIVATE_KEY", meaning: "offer-signing .p8 key: PEM text or path", parse: .text)
    static let appStoreRefundPreference = Setting<AppStoreRefundPolicy>(
        "APPSTORE_REFUND_PREFERENCE", .appStore, default: "none", meaning: "refund preference told Apple in refund requests",
        parse: SettingParser { text, name throws(SettingsError) in
            guard let policy = AppStoreRefundPolicy(setting: text) else {
                throw SettingsError.invalid(
                    name, text,
                    "none (state no preference), decline, grant_full, grant_prorated, or by_usage:FULL,PRORATED (a full refund below FULL % of the purchase used, prorated below PRORATED %, declined from it; by_usage alone is by_usage:10,50): what billingd tells Apple it would like done with a refund request")
            }
            return policy
        })

    // MARK: outbox

    static let appWebhookURLs = Setting<[String]>(
        "BILLINGD_APP_WEBHOOK_URL", .outbox, unset: "off", meaning: "the app's webhook URLs, comma-separated",
        list: .list { url, name throws(SettingsError) in
            guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw SettingsError.invalid(name, url, "http:// or https:// URLs of the app's webhook endpoints, comma-separated")
            }
        })
    /// Required with a URL, and each a valid key: ``Settings/Outbox`` checks them.
    static let appWebhookSecrets = Setting<[String]>(
        "BILLINGD_APP_WEBHOOK_SECRET", .outbox, unset: "required with URL",
        meaning: "whsec_ signing secrets, comma-separated, each whsec_ and base64 of at least 16 bytes")
    static let appWebhookConnectTimeout = Setting<Duration>(
        "BILLINGD_APP_WEBHOOK_CONNECT_TIMEOUT", .outbox, default: "5s", meaning: "connect timeout of one app webhook", parse: .duration(1...300))
    static let appWebhookTimeout = Setting<Duration>(
        "BILLINGD_APP_WEBHOOK_TIMEOUT", .outbox, default: "15s", meaning: "total timeout of one app webhook", parse: .duration(1...600))
}

extension SettingsTable {
    // MARK: console, revenue metrics

    static let consoleTokens = Setting<[ConsoleToken]>(
        "BILLINGD_CONSOLE_TOKENS", .console, unset: "metrics API, console and grants by operators off",
        meaning: "operator tokens of the console (/console) and bearer tokens of the metrics API and grants (operators, finance), comma-separated, each TOKEN or LABEL:TOKEN, at least 16 characters each",
        isList: true, whenUnset: [],
        parse: SettingParser { text, name throws(SettingsError) in
            try labeledTokens(text, name: name)
        })
    /// A list of `TOKEN` or `LABEL:TOKEN` items, each label given once.
    static func labeledTokens(_ text: String, name: String) throws(SettingsError) -> [ConsoleToken] {
        var tokens: [ConsoleToken] = []
        for item in SettingParser<[String]>.items(text) {
            let token = try ConsoleToken(parsing: item, name: name)
            if tokens.contains(where: { $0.label != nil && $0.label == token.label }) {
                throw SettingsError.invalid(name, nil, "a different label for each token; \(token.label ?? "") is given twice")
            }
            tokens.append(token)
        }
        return tokens
    }

    static let consoleSecureCookie = Setting<Bool>(
        "BILLINGD_CONSOLE_SECURE_COOKIE", .console, default: "off",
        meaning: "on: the console's session cookie is Secure even on plain HTTP (behind a TLS proxy); off: Secure only over TLS (X-Forwarded-Proto: https)",
        parse: SettingParser { text, name throws(SettingsError) in
            switch text.lowercased() {
            case "on": return true
            case "off": return false
            default: throw SettingsError.invalid(name, text, "on or off")
            }
        })
    static let reportingCurrency = Setting<String?>(
        "BILLINGD_REPORTING_CURRENCY", .console, unset: "none: per currency only",
        meaning: "currency (usd, eur …) the metrics add a reporting total in, with BILLINGD_FX_RATES",
        parse: SettingParser { text, name throws(SettingsError) in
            guard text.count == 3, text.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                throw SettingsError.invalid(name, text, "a three-letter ISO currency code such as usd")
            }
            return text.lowercased()
        })
    /// Read and checked with the reporting currency by ``Settings/Console``.
    static let exchangeRates = Setting<String?>(
        "BILLINGD_FX_RATES", .console, unset: "none",
        meaning: "CSV file of date,currency,rate rows: units of the reporting currency per unit of currency", parse: .text)
}

extension SettingParser where Value == String {
    /// An http(s) URL with a host, such as `example`.
    static func httpURL(example: String) -> Self {
        Self { text, name throws(SettingsError) in
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw SettingsError.invalid(name, text, "an http(s) URL such as \(example)")
            }
            return text
        }
    }
}
