import BillingCore
import BillingTestSupport
import BillingServer
import BillingStore
import Foundation
import GRDB
import StripeFake
import Testing

@Suite(
    "billingd usage report and billingd usage show: the built binary against StripeFake",
    .needsBillingdBinary
)
struct UsageCommandTests {
    private func environment(_ bed: UsageReportBed) -> [String: String] {
        [
            "STRIPE_API_KEY": BillingHarness.apiKey, "STRIPE_API_BASE": bed.fake.baseURL,
            "BILLINGD_DATABASE": bed.ledger.directory.appendingPathComponent("ledger.sqlite3").path,
            "BILLINGD_PLANS": UserFixtures.url("plans/usage.yaml").path, "BILLINGD_LOG_LEVEL": "error", "STRIPE_MAX_RETRIES": "0",
        ]
    }

    private func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test("usage report sends what is pending and exits 0; --dry-run sends nothing; a failure exits 1 and says why")
    func report() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let environment = environment(bed)
        let customer = try await bed.customer(for: "user_a")
        try await bed.record("user_a", quantity: 4)
        try await bed.record("user_a", quantity: 6)

        let dry = try await billingd(["usage", "report", "--dry-run"], environment: environment)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("would send 2"), "\(dry.stdout)")
        #expect(await bed.fake.requestCount(matching: .path("/v1/billing/meter_events")) == 0)

        let run = try await billingd(["usage", "report", "--json"], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        let report = try json(run.stdout)
        #expect(report["reported"] as? Int == 2)
        #expect(report["failed"] as? Int == 0)
        #expect((report["quantities"] as? [String: Int])?["radars_created"] == 10)
        #expect(try await bed.stripeTotal(customer) == 10)

        try await bed.record("user_a", quantity: 1)
        await bed.fake.inject(.status(400), times: 1, matching: .method("POST", path: "/v1/billing/meter_events"))
        let failed = try await billingd(["usage", "report"], environment: environment)
        #expect(failed.status == 1)
        #expect(failed.stdout.contains("1 failed"), "\(failed.stdout)")
        #expect(failed.stdout.contains("Injected fault"), "the report names Stripe's error")

        var keyless = environment
        keyless.removeValue(forKey: "STRIPE_API_KEY")
        let noKey = try await billingd(["usage", "report"], environment: keyless)
        #expect(noKey.status == 78)
        #expect(noKey.stderr.contains("STRIPE_API_KEY"))
    }

    @Test("Exactly once across a crash between the call and recording its result: killed after Stripe counted the event, the next run resends it and Stripe's duplicate refusal settles it")
    func crash() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let environment = environment(bed)
        let customer = try await bed.customer(for: "user_a")
        let seq = try await bed.record("user_a", quantity: 8)
        await bed.fake.inject(.delayAnswer(.seconds(10)), times: 1, matching: .method("POST", path: "/v1/billing/meter_events"))

        let process = try startBillingd(["usage", "report"], environment: environment)
        let deadline = ContinuousClock.now + .seconds(20)
        while await bed.fake.meterEvents().isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await bed.fake.meterEvents().count == 1, "Stripe counted the event")
        process.signal(SIGKILL)
        #expect(await process.wait() == .signal(SIGKILL))

        let orphan = try await bed.row(seq)
        #expect(orphan.state == "pending", "the answer was never recorded")
        #expect(orphan.inFlightSince != nil, "but the record was marked in flight before the call")
        #expect(orphan.customer == customer)

        // The dead run's lease blocks others until it expires (two minutes).
        let blocked = try await billingd(["usage", "report"], environment: environment)
        #expect(blocked.status == 75)
        #expect(blocked.stderr.contains("holds the lease"))
        try await bed.database.writer.write { db in try db.execute(sql: "DELETE FROM lease WHERE name = ?", arguments: [UsageReporter.leaseName]) }

        let rerun = try await billingd(["usage", "report", "--json"], environment: environment)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let report = try json(rerun.stdout)
        #expect(report["reported"] as? Int == 1)
        #expect(report["duplicates"] as? Int == 1)
        let requests = await bed.fake.requests(matching: .method("POST", path: "/v1/billing/meter_events"))
        #expect(requests.count == 2)
        #expect(Set(requests.map { FlatForm.pairs(String(decoding: $0.body, as: UTF8.self)).first { $0.name == "identifier" }?.value }).count == 1)
        #expect(await bed.fake.meterEvents().count == 1)
        #expect(try await bed.stripeTotal(customer) == 8, "billed once")
        #expect(try await bed.row(seq).state == "reported")
    }

    @Test("usage show prints a user's meters as a table or JSON, with what went to Stripe")
    func show() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let environment = environment(bed)
        try await bed.customer(for: "user_a")
        try await bed.record("user_a", quantity: 3)
        try await bed.record("user_a", meter: "api_calls", quantity: 1_500)
        _ = try await bed.reporter(at: bed.now).run()
        try await bed.record("user_a", quantity: 2)

        let table = try await billingd(["usage", "show", "user_a"], environment: environment)
        #expect(table.status == 0, "\(table.stderr)")
        let lines = table.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("user_a (test mode, platform account): tier free") == true, "\(table.stdout)")
        #expect(lines[1].hasPrefix("METER"))
        let radars = try #require(lines.first { $0.hasPrefix("radars") })
        #expect(radars.contains("counter"))
        #expect(radars.hasSuffix("radars_created: 1 pending, 1 reported"), "\(radars)")
        let apiCalls = try #require(lines.first { $0.hasPrefix("api_calls") })
        #expect(apiCalls.contains("1500"))
        #expect(apiCalls.contains("1000"))
        #expect(apiCalls.contains(" 500 "), "overage: \(apiCalls)")

        let json = try json(try await billingd(["usage", "show", "user_a", "--json"], environment: environment).stdout)
        let meters = try #require(json["meters"] as? [[String: Any]])
        let radarsJSON = try #require(meters.first { $0["meter"] as? String == "radars" })
        #expect(radarsJSON["used"] as? Int == 5)
        #expect(radarsJSON["limit"] as? Int == 10)
        #expect(radarsJSON["remaining"] as? Int == 5)
        #expect(radarsJSON["stripe_meter"] as? String == "radars_created")
        let report = try #require(radarsJSON["report"] as? [String: [String: Int]])
        #expect(report["reported"] == ["records": 1, "quantity": 3])
        #expect(report["pending"] == ["records": 1, "quantity": 2])
        #expect(meters.first { $0["meter"] as? String == "storage_bytes" }?["period_start"] is NSNull)

        var noPlans = environment
        noPlans.removeValue(forKey: "BILLINGD_PLANS")
        let missing = try await billingd(["usage", "show", "user_a"], environment: noPlans)
        #expect(missing.status == 78)
        #expect(missing.stderr.contains("BILLINGD_PLANS"))
        let badAccount = try await billingd(["usage", "show", "user_a", "--account", "nope"], environment: environment)
        #expect(badAccount.status == 64)
    }

    @Test("--help explains both commands")
    func help() async throws {
        let report = try await billingd(["usage", "report", "--help"], environment: [:])
        #expect(report.status == 0)
        #expect(report.stdout.contains("--retry-failed"))
        #expect(report.stdout.contains("BILLINGD_USAGE_REPORT_INTERVAL"))
        let show = try await billingd(["usage", "show", "--help"], environment: [:])
        #expect(show.stdout.contains("billingd usage show user_42"))
        let root = try await billingd(["--help"], environment: [:])
        #expect(root.stdout.contains("usage"))
        #expect(root.stdout.contains("BILLINGD_USAGE_REPORT_INTERVAL"))
    }
}

/// Starts the built `billingd` without waiting for it, with the same clean environment as ``billingd(_:environment:)``.
func startBillingd(_ arguments: [String], environment: [String: String]) throws -> ChildProcess {
    try ChildProcess.start(billingdBinaryPath, arguments, environment: billingdEnvironment(environment))
}
