import BillingCore
import BillingStore
import Foundation

// The areas whose settings are checked together: each reads its variables through the table and
// then what one variable means for another.

extension Settings.Database {
    init(_ read: SettingsReader) throws(SettingsError) {
        sqlitePath = try read(SettingsTable.database)
        if let url = try read(SettingsTable.postgresURL) {
            do {
                postgres = try PostgresConfiguration(
                    url: url, password: read.verbatim(SettingsTable.postgresPassword),
                    passwordFile: read.text(SettingsTable.postgresPasswordFile))
            } catch {
                throw SettingsError.unusable(error.description)
            }
        } else if read.text(SettingsTable.postgresPassword) != nil || read.text(SettingsTable.postgresPasswordFile) != nil {
            throw SettingsError.missing(
                "BILLINGD_DATABASE_URL", "A PostgreSQL password is set (BILLINGD_DATABASE_PASSWORD or _FILE) but no URL to use it with.")
        } else {
            postgres = nil
        }
        connections = try read(SettingsTable.postgresConnections)
        commits = try read(SettingsTable.postgresCommits)
        retentionBodiesDays = try read(SettingsTable.retentionBodies)
    }
}

extension Settings.Server {
    init(_ read: SettingsReader) throws(SettingsError) {
        host = try read(SettingsTable.host)
        port = try read(SettingsTable.port)
        idleTimeout = try read(SettingsTable.idleTimeout)
        headerTimeout = try read(SettingsTable.headerTimeout)
        bodyTimeout = try read(SettingsTable.bodyTimeout)
        minimumTransferRate = try read(SettingsTable.minimumTransferRate)
        maximumConnections = try read(SettingsTable.maximumConnections)
        // At most the total cap, which is also its default when the total is below 128.
        let perClient = SettingParser<Int>.count(
            1...maximumConnections, expected: "a number of connections, at most BILLINGD_MAX_CONNECTIONS,")
        let setting = SettingsTable.maximumConnectionsPerClient
        if let text = try read(setting) {
            maximumConnectionsPerClient = try perClient.parse(text, setting.description.name)
        } else {
            maximumConnectionsPerClient = min(SettingsTable.maximumConnectionsPerClientDefault, maximumConnections)
        }
    }

    /// The connection timeouts and caps, as the HTTP server takes them.
    var connectionLimits: ConnectionLimits {
        ConnectionLimits(
            idleTimeout: idleTimeout, headerTimeout: headerTimeout, bodyTimeout: bodyTimeout, minimumTransferRate: minimumTransferRate,
            maximumConnections: maximumConnections, maximumConnectionsPerClient: maximumConnectionsPerClient)
    }
}

extension Settings.Stripe {
    init(_ read: SettingsReader) throws(SettingsError) {
        webhookSecrets = try read(SettingsTable.webhookSecrets)
        signatureTolerance = try read(SettingsTable.signatureTolerance)
        apiKey = try read(SettingsTable.stripeAPIKey)
        apiBase = try read(SettingsTable.stripeAPIBase)
        apiVersion = try read(SettingsTable.stripeAPIVersion)
        connectTimeout = try read(SettingsTable.stripeConnectTimeout)
        timeout = try read(SettingsTable.stripeTimeout)
        maxRetries = try read(SettingsTable.stripeMaxRetries)
        rateLimit = try read(SettingsTable.stripeRateLimit)
        eventsSweepInterval = try read(SettingsTable.eventsSweepInterval)
    }
}

extension Settings.Outbox {
    init(_ read: SettingsReader) throws(SettingsError) {
        webhookURLs = try read(SettingsTable.appWebhookURLs)
        webhookSecrets = try read(SettingsTable.appWebhookSecrets)
        if !webhookURLs.isEmpty {
            guard !webhookSecrets.isEmpty else {
                throw SettingsError.missing(
                    "BILLINGD_APP_WEBHOOK_SECRET",
                    "BILLINGD_APP_WEBHOOK_URL is set: set the secret that signs its webhooks (whsec_ and base64; `billingd outbox send-test --new-secret` prints one).")
            }
            _ = try Self.signer(secrets: webhookSecrets)
        }
        connectTimeout = try read(SettingsTable.appWebhookConnectTimeout)
        timeout = try read(SettingsTable.appWebhookTimeout)
    }

    /// The signer of the app's webhooks, from ``webhookSecrets``.
    public func signer() throws(SettingsError) -> StandardWebhookSigner {
        try Self.signer(secrets: webhookSecrets)
    }

    static func signer(secrets: [String]) throws(SettingsError) -> StandardWebhookSigner {
        do { return try StandardWebhookSigner(secrets: secrets) } catch {
            throw SettingsError.invalid("BILLINGD_APP_WEBHOOK_SECRET", nil, error.description)
        }
    }
}

extension Settings.AppStore {
    init(_ read: SettingsReader) throws(SettingsError) {
        bundleID = try read(SettingsTable.appStoreBundleID)
        appAppleID = try read(SettingsTable.appStoreAppAppleID)
        environments = try read(SettingsTable.appStoreEnvironments)
        rootCertificates = try read(SettingsTable.appStoreRootCertificates)
        receiptRootCertificates = try read(SettingsTable.appStoreReceiptRootCertificates)
        ownership = try read(SettingsTable.appStoreOwnership)
        issuerID = try read(SettingsTable.appStoreIssuerID)
        keyID = try read(SettingsTable.appStoreKeyID)
        privateKeyPath = try read(SettingsTable.appStorePrivateKey)
        let apiSettings = [("APPSTORE_ISSUER_ID", issuerID), ("APPSTORE_KEY_ID", keyID), ("APPSTORE_PRIVATE_KEY", privateKeyPath)]
        let missing = apiSettings.filter { $0.1 == nil }.map(\.0)
        if !missing.isEmpty, missing.count < apiSettings.count {
            throw SettingsError.invalid(
                missing[0], nil,
                "set together with \(apiSettings.filter { $0.1 != nil }.map(\.0).joined(separator: " and ")): the App Store Server API needs the issuer id, the key id and the .p8 key (App Store Connect → Users and Access → Integrations → In-App Purchase)")
        }
        if issuerID != nil, bundleID == nil {
            throw SettingsError.invalid("APPSTORE_BUNDLE_ID", nil, "the app's bundle id; the App Store Server API key is set, and its tokens name the app")
        }
        if let keyID, !(keyID.count == 10 && keyID.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) })) {
            throw SettingsError.invalid("APPSTORE_KEY_ID", keyID, "the 10-character key id App Store Connect shows beside the key, such as 2X9R4HXF34")
        }
        apiBase = try read(SettingsTable.appStoreAPIBase)
        rateLimit = try read(SettingsTable.appStoreRateLimit)
        offerKeyID = try read(SettingsTable.appStoreOfferKeyID)
        offerPrivateKey = try read(SettingsTable.appStoreOfferPrivateKey)
        switch (offerKeyID, offerPrivateKey) {
        case (nil, .some):
            throw SettingsError.invalid("APPSTORE_OFFER_KEY_ID", nil, "set together with APPSTORE_OFFER_PRIVATE_KEY: the id App Store Connect shows beside the In-App Purchase key")
        case (.some, nil):
            throw SettingsError.invalid("APPSTORE_OFFER_PRIVATE_KEY", nil, "set together with APPSTORE_OFFER_KEY_ID: the key's PEM text or the path of its .p8 file")
        default: break
        }
        if let offerKeyID, !(offerKeyID.count == 10 && offerKeyID.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) })) {
            throw SettingsError.invalid("APPSTORE_OFFER_KEY_ID", offerKeyID, "the 10-character key id App Store Connect shows beside the key, such as 2X9R4HXF34")
        }
        refundPreference = try read(SettingsTable.appStoreRefundPreference)
    }
}

extension Settings.Console {
    init(_ read: SettingsReader) throws(SettingsError) {
        tokens = try read(SettingsTable.consoleTokens)
        secureCookie = try read(SettingsTable.consoleSecureCookie)
        let currency = try read(SettingsTable.reportingCurrency)
        let ratesPath = try read(SettingsTable.exchangeRates)
        switch (currency, ratesPath) {
        case (nil, nil):
            exchangeRates = nil
        case (nil, .some):
            throw SettingsError.missing(
                "BILLINGD_REPORTING_CURRENCY", "BILLINGD_FX_RATES is set: set the currency its rates convert into (such as usd).")
        case (let currency?, nil):
            // Only the reporting currency itself converts; every other one is named as missing.
            exchangeRates = try? ExchangeRates(reportingCurrency: currency, csv: "")
        case (let currency?, let path?):
            exchangeRates = try Self.exchangeRates(currency: currency, path: path)
        }
    }

    /// The rates file at `path`, read and checked now so that a bad row stops start-up.
    static func exchangeRates(currency: String, path: String) throws(SettingsError) -> ExchangeRates {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SettingsError.unusable("BILLINGD_FX_RATES=\(path) cannot be read: does the file exist, and may billingd read it?")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw SettingsError.unusable("BILLINGD_FX_RATES=\(path) is not UTF-8 text: save it as a CSV file of date,currency,rate rows.")
        }
        do {
            return try ExchangeRates(reportingCurrency: currency, csv: text)
        } catch {
            throw SettingsError.unusable(
                "BILLINGD_FX_RATES=\(path), \(error): each row is date,currency,rate, such as 2026-11-01,eur,1.08 (units of \(currency) per unit of the currency).")
        }
    }
}
