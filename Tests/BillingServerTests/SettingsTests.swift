import BillingCore
import BillingServer
import Foundation
import Testing

@Suite("Settings from the environment and --config")
struct SettingsTests {
    func configFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-config-\(UUID()).env").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("Defaults match the documented contract")
    func defaults() throws {
        let settings = try Settings.load(environment: [:], configFile: nil)
        #expect(settings.database.sqlitePath == "./billingd.sqlite3")
        #expect(settings.server.host == "127.0.0.1")
        #expect(settings.server.port == 8080)
        #expect(settings.stripe.webhookSecrets.isEmpty)
        #expect(settings.stripe.signatureTolerance == 300)
        #expect(settings.stripe.apiBase == "https://api.stripe.com")
        #expect(settings.serviceAPI.tokens.isEmpty)
        #expect(settings.server.idleTimeout == .seconds(60))
        #expect(settings.server.headerTimeout == .seconds(10))
        #expect(settings.server.bodyTimeout == .seconds(60))
        #expect(settings.server.minimumTransferRate == 1024)
        #expect(settings.server.maximumConnections == 512)
        #expect(settings.server.maximumConnectionsPerClient == 128)
    }

    @Test("Credentials in an app webhook URL are secrets the logs mask; short query values are not")
    func webhookURLCredentials() throws {
        let settings = try Settings.load(
            environment: [
                "BILLINGD_APP_WEBHOOK_URL": "https://hooks:s3cret-passw0rd@app.example.com/billing?token=tok_0123456789&v=1",
                "BILLINGD_APP_WEBHOOK_SECRET": "whsec_" + Data(repeating: 7, count: 24).base64EncodedString(),
            ], configFile: nil)
        #expect(settings.secretValues.contains("s3cret-passw0rd"))
        #expect(settings.secretValues.contains("tok_0123456789"))
        #expect(!settings.secretValues.contains("1"), "a short value would mask every occurrence of it")
    }

    @Test("Connection timeouts and the connection cap are read as durations and a count (issue 18 item 2)")
    func connectionLimits() throws {
        let settings = try Settings.load(
            environment: [
                "BILLINGD_IDLE_TIMEOUT": "2m", "BILLINGD_HEADER_TIMEOUT": "5s", "BILLINGD_BODY_TIMEOUT": "90",
                "BILLINGD_MAX_CONNECTIONS": "64", "BILLINGD_MAX_CONNECTIONS_PER_CLIENT": "16", "BILLINGD_MIN_TRANSFER_RATE": "0",
            ], configFile: nil)
        #expect(settings.server.idleTimeout == .seconds(120))
        #expect(settings.server.headerTimeout == .seconds(5))
        #expect(settings.server.bodyTimeout == .seconds(90))
        #expect(settings.server.maximumConnections == 64)
        #expect(settings.server.maximumConnectionsPerClient == 16)
        #expect(settings.server.minimumTransferRate == 0)
        #expect(Settings.helpTable.contains("BILLINGD_HEADER_TIMEOUT"))
        #expect(Settings.helpTable.contains("BILLINGD_MAX_CONNECTIONS_PER_CLIENT"))
        // A total cap below 128 is every client's cap too, unless one is set.
        #expect(try Settings.load(environment: ["BILLINGD_MAX_CONNECTIONS": "8"], configFile: nil).server.maximumConnectionsPerClient == 8)
    }

    @Test("A config file in environment-file syntax is read, and the environment wins over it")
    func configFileAndPrecedence() throws {
        let path = try configFile("""
            # billingd settings
            export BILLINGD_PORT=9090
            BILLINGD_HOST = "0.0.0.0"
            STRIPE_WEBHOOK_SECRET='whsec_new_secret_1,whsec_old_secret_2'

            BILLINGD_DATABASE=/var/lib/billingd/ledger.sqlite3
            """)
        let fromFile = try Settings.load(environment: [:], configFile: path)
        #expect(fromFile.server.port == 9090)
        #expect(fromFile.server.host == "0.0.0.0")
        #expect(fromFile.stripe.webhookSecrets == ["whsec_new_secret_1", "whsec_old_secret_2"])
        let overridden = try Settings.load(environment: ["BILLINGD_PORT": "7000"], configFile: path)
        #expect(overridden.server.port == 7000)
        #expect(overridden.database.sqlitePath == "/var/lib/billingd/ledger.sqlite3")
    }

    @Test("Malformed settings name the variable, and never echo a secret", arguments: [
        ["BILLINGD_PORT": "eighty"], ["BILLINGD_PORT": "70000"], ["BILLINGD_SIGNATURE_TOLERANCE": "-1"],
        ["STRIPE_API_KEY": "pk_live_publishable_key_oops"], ["STRIPE_API_BASE": "ftp://example.com"],
        ["STRIPE_WEBHOOK_SECRET": "abc1234"], ["STRIPE_WEBHOOK_SECRET": "whsec_REPLACE_ME"], ["BILLINGD_API_TOKENS": "short"], ["BILLINGD_LOG_LEVEL": "loud"],
        ["BILLINGD_IDLE_TIMEOUT": "off"], ["BILLINGD_HEADER_TIMEOUT": "0"], ["BILLINGD_BODY_TIMEOUT": "2h"], ["BILLINGD_MAX_CONNECTIONS": "0"],
        ["BILLINGD_MAX_CONNECTIONS_PER_CLIENT": "600"], ["BILLINGD_MIN_TRANSFER_RATE": "-1"],
    ])
    func malformed(environment: [String: String]) throws {
        do {
            _ = try Settings.load(environment: environment, configFile: nil)
            Issue.record("accepted \(environment)")
        } catch let error as SettingsError {
            let (name, value) = try #require(environment.first)
            #expect(error.description.contains(name))
            if name.contains("KEY") || name.contains("SECRET") || name.contains("TOKENS") {
                #expect(!error.description.contains(value), "the message echoes the secret")
            }
        }
    }

    @Test("A config file that cannot be read or parsed is a clear error")
    func badConfigFile() throws {
        #expect(throws: SettingsError.self) { try Settings.load(environment: [:], configFile: "/nonexistent/billingd.env") }
        let path = try configFile("BILLINGD_PORT 8080\n")
        #expect(throws: SettingsError.self) { try Settings.load(environment: [:], configFile: path) }
    }

    @Test("BILLINGD_USAGE_REPORT_INTERVAL: 1m by default, a duration, or off; nonsense names the variable")
    func usageReportInterval() throws {
        #expect(try Settings.load(environment: [:], configFile: nil).usage.reportInterval == .seconds(60))
        #expect(try Settings.load(environment: ["BILLINGD_USAGE_REPORT_INTERVAL": "30s"], configFile: nil).usage.reportInterval == .seconds(30))
        #expect(try Settings.load(environment: ["BILLINGD_USAGE_REPORT_INTERVAL": "off"], configFile: nil).usage.reportInterval == nil)
        for bad in ["soon", "2s", "2d"] {
            #expect(throws: SettingsError.self) { try Settings.load(environment: ["BILLINGD_USAGE_REPORT_INTERVAL": bad], configFile: nil) }
        }
        #expect(Settings.helpTable.contains("BILLINGD_USAGE_REPORT_INTERVAL"))
    }

    @Test("APPSTORE_REFUND_PREFERENCE: none by default, each of Apple's preferences, by_usage with its thresholds, and anything else refused naming the allowed values")
    func refundPreference() throws {
        #expect(try Settings.load(environment: [:], configFile: nil).appStore.refundPreference == .none)
        for policy in AppStoreRefundPolicy.fixed + [.byUsage(.standard)] {
            let settings = try Settings.load(environment: ["APPSTORE_REFUND_PREFERENCE": policy.description], configFile: nil)
            #expect(settings.appStore.refundPreference == policy)
        }
        #expect(try Settings.load(environment: ["APPSTORE_REFUND_PREFERENCE": "GRANT_FULL"], configFile: nil).appStore.refundPreference == .grantFull)
        #expect(try Settings.load(environment: ["APPSTORE_REFUND_PREFERENCE": "by_usage"], configFile: nil).appStore.refundPreference == .byUsage(.standard))
        let thresholds = try #require(RefundUsageThresholds(grantFullBelow: 5_000, declineFrom: 80_000))
        #expect(try Settings.load(environment: ["APPSTORE_REFUND_PREFERENCE": "by_usage:5,80"], configFile: nil).appStore.refundPreference == .byUsage(thresholds))
        for bad in ["prorated", "by_usage:80,5", "by_usage:5", "yes"] {
            let error = #expect(throws: SettingsError.self) { try Settings.load(environment: ["APPSTORE_REFUND_PREFERENCE": bad], configFile: nil) }
            let message = error?.description ?? ""
            #expect(message.contains("APPSTORE_REFUND_PREFERENCE"), "\(message)")
            for allowed in ["none", "decline", "grant_full", "grant_prorated", "by_usage:FULL,PRORATED"] { #expect(message.contains(allowed), "\(message)") }
        }
        #expect(Settings.helpTable.contains("APPSTORE_REFUND_PREFERENCE"))
    }

    @Test("The key prefix says test or live mode")
    func keyMode() throws {
        #expect(try Settings.load(environment: ["STRIPE_API_KEY": "sk_test_123"], configFile: nil).stripe.apiKeyIsLive == false)
        #expect(try Settings.load(environment: ["STRIPE_API_KEY": "rk_live_123"], configFile: nil).stripe.apiKeyIsLive == true)
    }
}

@Suite("deploy/billingd.env.example")
struct EnvironmentExampleTests {
    static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy/billingd.env.example").path

    /// `KEY=value` lines, commented out (`#KEY=value`, `# KEY=value`) or not.
    static func assignments() throws -> [(key: String, value: String)] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap { line in
            let text = line.hasPrefix("#") ? line.dropFirst().drop { $0 == " " } : line[...]
            guard let equals = text.firstIndex(of: "="), text[..<equals].allSatisfy({ $0.isUppercase || $0 == "_" || $0.isNumber }),
                !text[..<equals].isEmpty
            else { return nil }
            return (String(text[..<equals]), String(text[text.index(after: equals)...]))
        }
    }

    @Test("Names only settings billingd reads, and suggests a YAML plan catalog as the README documents")
    func knownSettings() throws {
        let known = Set(Settings.table.map(\.name))
        let assignments = try Self.assignments()
        #expect(assignments.count > 10)
        for (key, _) in assignments { #expect(known.contains(key), "\(key) is not a setting billingd reads") }
        let plans = try #require(assignments.first { $0.key == "BILLINGD_PLANS" })
        #expect(plans.value.hasSuffix(".yaml"), "BILLINGD_PLANS=\(plans.value)")
        #expect(try !String(contentsOfFile: Self.path, encoding: .utf8).contains("plans.json"))
    }
}
