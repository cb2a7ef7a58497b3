import BillingCore
import BillingServer
import Foundation
import Testing

@Suite("Settings of the metrics API: console tokens, the reporting currency and its rates")
struct ConsoleSettingsTests {
    func ratesFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-rates-\(UUID()).csv").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func problem(_ environment: [String: String]) -> String? {
        do {
            _ = try Settings.load(environment: environment, configFile: nil)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("Unset: the metrics API is off and there is no reporting currency")
    func defaults() throws {
        let settings = try Settings.load(environment: [:], configFile: nil)
        #expect(settings.console.tokens.isEmpty)
        #expect(settings.console.exchangeRates == nil)
    }

    @Test("Console tokens: TOKEN or LABEL:TOKEN, comma-separated; each is a secret the logs mask")
    func tokens() throws {
        let settings = try Settings.load(
            environment: ["BILLINGD_CONSOLE_TOKENS": " finance:con_0123456789abcdef , con_fedcba9876543210,ops-1:a:b:cdefghijklmnopq"], configFile: nil)
        #expect(settings.console.tokens == [
            ConsoleToken(label: "finance", token: "con_0123456789abcdef"), ConsoleToken(token: "con_fedcba9876543210"),
            ConsoleToken(label: "ops-1", token: "a:b:cdefghijklmnopq"),
        ])
        #expect(settings.secretValues.contains("con_0123456789abcdef"))
        #expect(settings.secretValues.contains("a:b:cdefghijklmnopq"))
        #expect(!settings.secretValues.contains("finance"))
    }

    @Test("Bad console tokens name the variable and never echo a token", arguments: [
        ("short:tok_123", "tokens of at least 16 characters; one of them is 7 characters long"),
        ("tok_1234567", "tokens of at least 16 characters; one of them is 11 characters long"),
        ("two words:con_0123456789abcdef", "TOKEN or LABEL:TOKEN"),
        (":con_0123456789abcdef", "TOKEN or LABEL:TOKEN"),
        ("a:con_0123456789abcdef,a:con_fedcba9876543210", "a different label for each token; a is given twice"),
        ("con_REPLACE_ME_0123456789", "tokens of your own"),
    ])
    func badTokens(value: String, expected: String) throws {
        let message = try #require(problem(["BILLINGD_CONSOLE_TOKENS": value]))
        #expect(message.hasPrefix("BILLINGD_CONSOLE_TOKENS is not valid"), "\(message)")
        #expect(message.contains(expected), "\(message)")
        #expect(!message.contains("0123456789abcdef") && !message.contains("tok_123"), "\(message)")
    }

    @Test("A reporting currency with a rates file: the file is read and checked at start")
    func reportingCurrency() throws {
        let path = try ratesFile("date,currency,rate\n2026-01-01,EUR,1.08\n2026-02-01,eur,1.10\n")
        let settings = try Settings.load(environment: ["BILLINGD_REPORTING_CURRENCY": "USD", "BILLINGD_FX_RATES": path], configFile: nil)
        let rates = try #require(settings.console.exchangeRates)
        #expect(rates.reportingCurrency == "usd")
        #expect(rates.rate(of: "eur", at: 1_768_000_000) == ExactAmount(108, over: 100))
        #expect(rates.rate(of: "eur", at: 1_770_000_000) == ExactAmount(110, over: 100))
        #expect(rates.rate(of: "jpy", at: 1_770_000_000) == nil)
    }

    @Test("A reporting currency alone converts only itself; every other currency is named as missing")
    func reportingCurrencyWithoutRates() throws {
        let settings = try Settings.load(environment: ["BILLINGD_REPORTING_CURRENCY": "eur"], configFile: nil)
        let rates = try #require(settings.console.exchangeRates)
        let total = rates.total(of: ["eur": 1_000, "usd": 500], at: 0)
        #expect(total.amount == 1_000)
        #expect(total.missingRates == ["usd"])
    }

    @Test("Bad reporting settings say what to fix")
    func badReporting() throws {
        let badRow = try ratesFile("date,currency,rate\n2026-01-01,eur,1.08\n2026-13-01,gbp,1.2\n")
        let cases: [([String: String], [String])] = [
            (["BILLINGD_REPORTING_CURRENCY": "dollars"], ["BILLINGD_REPORTING_CURRENCY=dollars is not valid", "three-letter ISO currency code"]),
            (["BILLINGD_FX_RATES": badRow], ["BILLINGD_REPORTING_CURRENCY is not set", "BILLINGD_FX_RATES is set"]),
            (["BILLINGD_REPORTING_CURRENCY": "usd", "BILLINGD_FX_RATES": "/nonexistent/rates.csv"], ["BILLINGD_FX_RATES=/nonexistent/rates.csv cannot be read"]),
            (["BILLINGD_REPORTING_CURRENCY": "usd", "BILLINGD_FX_RATES": badRow],
             ["BILLINGD_FX_RATES=\(badRow), line 3: 2026-13-01 is not a date such as 2026-11-27", "each row is date,currency,rate"]),
        ]
        for (environment, expected) in cases {
            let message = try #require(problem(environment), "\(environment) should be refused")
            for part in expected { #expect(message.contains(part), "\(message)") }
        }
    }
}
