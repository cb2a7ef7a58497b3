import BillingStore
import Foundation
import Testing

/// Whether this build's SQLite ledger keeps the revenue metrics' facts: the store side of
/// issue 32. The test over real events runs once it does.
@Suite("billingd metrics: the built binary", .needsBillingdBinary)
struct MetricsCommandTests {
    func settings(_ ledger: TemporaryLedger) -> [String: String] {
        ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path]
    }

    @Test("--help names every figure and says what each means")
    func help() async throws {
        let result = try await billingd(["metrics", "--help"], environment: [:])
        #expect(result.status == 0)
        for command in ["overview", "movement", "churn", "trials", "revenue", "series"] {
            #expect(result.stdout.contains(command), "\(command) missing from \(result.stdout)")
        }
        let movement = try await billingd(["metrics", "movement", "--help"], environment: [:])
        #expect(movement.stdout.contains("reactivation"))
        #expect(movement.stdout.contains("--from"))
    }

    @Test("Bad options exit 64 and name the option", arguments: [
        (["metrics", "churn", "--from", "2026-02-01", "--to", "2026-01-01"], "--from"),
        (["metrics", "revenue", "--interval", "year"], "--interval"),
        (["metrics", "overview", "--at", "soon"], "--at"),
        // Past year 9999 (it overflowed in milliseconds and trapped).
        (["metrics", "revenue", "--from", "0", "--to", "9223372036854775807"], "--to"),
        (["metrics", "overview", "--json", "--csv"], "--json"),
        (["metrics", "series", "--metric", "arr"], "--metric"),
    ])
    func badOptions(arguments: [String], option: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let result = try await billingd(arguments, environment: settings(ledger))
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(option), "\(result.stderr)")
    }

    @Test("A ledger that does not exist, or a bad rates file, exits 78 and names the setting")
    func configuration() async throws {
        let missing = try await billingd(["metrics", "overview"], environment: ["BILLINGD_DATABASE": "/nonexistent/ledger.sqlite3"])
        #expect(missing.status == 78)
        #expect(missing.stderr.contains("BILLINGD_DATABASE"))
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let rates = ledger.directory.appendingPathComponent("rates.csv")
        try "date,currency,rate\n2026-01-01,eur,one\n".write(to: rates, atomically: true, encoding: .utf8)
        var environment = settings(ledger)
        environment["BILLINGD_REPORTING_CURRENCY"] = "usd"
        environment["BILLINGD_FX_RATES"] = rates.path
        let badRates = try await billingd(["metrics", "overview"], environment: environment)
        #expect(badRates.status == 78)
        #expect(badRates.stderr.contains("BILLINGD_FX_RATES"))
        #expect(badRates.stderr.contains("line 2"))
    }

    @Test("Over a ledger of real events: the overview in JSON, as the HTTP API answers it, and as CSV")
    func overviewOfRealEvents() async throws {
        var builder = UserLedgerBuilder(eventPrefix: "evt_metrics_")
        builder.add("customer.created", UserFixtures.customer("cus_metrics", user: "user_metrics"))
        // 9.99 USD a month, 2 seats: 1998 a month.
        builder.add("customer.subscription.created", UserFixtures.subscription("sub_metrics", customer: "cus_metrics", status: "active", quantity: 2))
        let ledger = try await builder.ledger()
        defer { ledger.remove() }
        let at = "1770000000"
        let json = try await billingd(["metrics", "overview", "--at", at, "--json"], environment: settings(ledger))
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["at"] as? Int == 1_770_000_000)
        let usd = (object["mrr"] as? [String: Any])?["usd"] as? [String: Int]
        #expect(usd == ["total": 1_998, "stripe": 1_998, "app_store": 0])
        #expect(object["active_subscriptions"] as? [String: Int] == ["total": 1, "stripe": 1, "app_store": 0])
        let csv = try await billingd(["metrics", "overview", "--at", at, "--csv"], environment: settings(ledger))
        #expect(csv.status == 0)
        #expect(csv.stdout.contains("metric,currency,plan,total,stripe,app_store\nmrr,usd,,1998,1998,0\n"), "\(csv.stdout)")
    }
}
