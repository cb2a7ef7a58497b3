import BillingStore
import BillingTestSupport
import Foundation
import Testing

@Suite(
    "What the CLI says when a setting is missing: the built binary",
    .needsBillingdBinary
)
struct CommandMessageTests {
    @Test("Without STRIPE_API_KEY each command says what it needs the key for and which access, not reconcile's (issue 17 item 6)", arguments: [
        (["checkout", "--user", "u", "--price", "price_1", "--success-url", "https://a.example/ok", "--cancel-url", "https://a.example/no"],
         "write access to customers, Checkout Sessions"),
        (["portal", "--user", "u", "--return-url", "https://a.example/account"], "write access to customers, Checkout Sessions"),
        (["usage", "report"], "write access to billing meter events"),
    ])
    func missingKey(_ arguments: [String], access: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-nokey-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try await billingd(arguments, environment: ["BILLINGD_DATABASE": directory.appendingPathComponent("l.sqlite3").path])
        #expect(result.status == 78, "a missing setting is a configuration error")
        #expect(!result.stderr.contains("Usage:"), "\(result.stderr)")
        #expect(result.stderr.contains("STRIPE_API_KEY is not set"), "\(result.stderr)")
        #expect(result.stderr.contains(access), "\(result.stderr)")
        #expect(!result.stderr.contains("reconcile"), "\(result.stderr)")
    }

    @Test("Runtime failures have their own exit statuses and no usage text; bad options keep 64 and the usage hint (issue 17 item 5)")
    func exitStatuses() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-exit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let settings = ["BILLINGD_DATABASE": directory.appendingPathComponent("l.sqlite3").path]
        let existing = directory.appendingPathComponent("existing.sqlite3").path
        FileManager.default.createFile(atPath: existing, contents: Data("keep".utf8))
        // The ledger the read-only commands read: they never create one.
        try SQLiteDatabase.open(path: settings["BILLINGD_DATABASE"]!).close()

        let cases: [(arguments: [String], environment: [String: String], status: Int32, says: String)] = [
            (["inspect", "cus_unknown"], settings, 66, "The ledger has no object cus_unknown"),
            (["events", "retry", "evt_unknown"], settings, 66, "No failed or dead event evt_unknown"),
            (["backup", existing], settings, 73, "already exists"),
            (["backup", "/no/such/dir/backup.sqlite3"], settings, 73, "/no/such/dir"),
            (["inspect", "cus_1"], settings.merging(["BILLINGD_PORT": "eighty"]) { $1 }, 78, "BILLINGD_PORT=eighty"),
            (["inspect", "cus_1"], ["BILLINGD_DATABASE": "/no/such/dir/l.sqlite3"], 78, "/no/such/dir"),
        ]
            // A mistyped ledger path: every command that reads a ledger says so, and creates none.
            + [["events"], ["inspect", "cus_1"], ["outbox"], ["export", "invoices"], ["backup", directory.appendingPathComponent("b.sqlite3").path],
               ["replay"]].map {
                ($0, ["BILLINGD_DATABASE": directory.appendingPathComponent("typo.sqlite3").path], 78, "which does not exist")
            }
        for failure in cases {
            let result = try await billingd(failure.arguments, environment: failure.environment)
            #expect(result.status == failure.status, "\(failure.arguments): \(result.stderr)")
            #expect(result.stderr.contains(failure.says), "\(failure.arguments): \(result.stderr)")
            #expect(!result.stderr.contains("Usage:"), "\(failure.arguments): \(result.stderr)")
        }
        #expect(String(decoding: FileManager.default.contents(atPath: existing) ?? Data(), as: UTF8.self) == "keep")

        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("typo.sqlite3").path))

        // What is echoed from outside is shown, not obeyed: a terminal's escape sequence stays text.
        let escape = try await billingd(["inspect", "cus_\u{1B}[2J\u{1B}[31mred\r"], environment: settings)
        #expect(escape.status == 66, "\(escape.stderr)")
        #expect(!escape.stderr.contains("\u{1B}") && !escape.stderr.contains("\r"), "\(escape.stderr)")
        #expect(escape.stderr.contains(#"cus_\u{1B}[2J\u{1B}[31mred\u{D}"#), "\(escape.stderr)")
        let escapedOption = try await billingd(["events", "--limit", "\u{1B}]0;title\u{07}"], environment: settings)
        #expect(escapedOption.status == 64)
        #expect(!escapedOption.stderr.contains("\u{1B}") && !escapedOption.stderr.contains("\u{07}"), "\(escapedOption.stderr)")

        let badOption = try await billingd(["events", "--limit", "0"], environment: settings)
        #expect(badOption.status == 64)
        #expect(badOption.stderr.contains("--limit takes 1 to 100000"), "\(badOption.stderr)")
        #expect(badOption.stderr.contains("Usage:"), "\(badOption.stderr)")
    }

    /// Starts `billingd serve --local` and returns its standard error once `marker` is in it (or it ended).
    private func serveUntil(_ marker: String, settings: [String: String], in directory: URL) async throws -> String {
        let errors = directory.appendingPathComponent("stderr").path
        var settings = settings
        settings["BILLINGD_DATABASE"] = directory.appendingPathComponent("l.sqlite3").path
        settings["BILLINGD_PORT"] = String(Int.random(in: 20_000..<60_000))
        let serve = try ChildProcess.start(billingdBinaryPath, ["serve", "--local"], environment: billingdEnvironment(settings), standardError: errors)
        defer {
            serve.signal(SIGTERM)
            serve.waitBlocking()
        }
        let deadline = ContinuousClock.now + .seconds(20)
        var text = ""
        while ContinuousClock.now < deadline {
            text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            if text.contains(marker) || !serve.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return (try? String(contentsOfFile: errors, encoding: .utf8)) ?? text
    }

    @Test("The start-up line says what is on: service API, plan catalog, Stripe, App Store, schedules, database (issue 17 item 9)")
    func startupLine() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-startup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let plans = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/plans/usage.yaml").path
        let text = try await serveUntil(
            "billingd listening", settings: ["BILLINGD_API_TOKENS": "tok_0123456789abcdef0", "BILLINGD_PLANS": plans], in: directory)
        let line = try #require(text.split(separator: "\n").first { $0.contains("billingd listening") }, "\(text)")
        #expect(line.contains(#"service_api="on, 1 token(s)""#), "\(line)")
        #expect(line.contains("(3 tiers, 3 meters)"), "\(line)")
        #expect(line.contains(#"stripe_api="local fake at http://127.0.0.1:"#), "serve --local without a key runs the Stripe fake: \(line)")
        #expect(line.contains(#"app_store="on (Production,Sandbox)""#), "\(line)")
        #expect(line.contains("reconcile="), "\(line)")
        #expect(line.contains("database=\(directory.appendingPathComponent("l.sqlite3").standardizedFileURL.path)"), "\(line)")
    }

    @Test("A plan catalog error is the first thing serve says, before the local mode banner (issue 17 item 6)")
    func catalogErrorFirst() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-badplans-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let plans = directory.appendingPathComponent("plans.yaml").path
        try "tiers:\n  - {id: free, name: Free, rank: 0, limts: {}}\n".write(toFile: plans, atomically: true, encoding: .utf8)
        let text = try await serveUntil("never printed", settings: ["BILLINGD_PLANS": plans], in: directory)
        #expect(text.contains("BILLINGD_PLANS"), "\(text)")
        #expect(text.contains("limts"), "\(text)")
        #expect(!text.contains("LOCAL MODE"), "\(text)")
        #expect(!text.contains("BILLINGD_PLANS: Plan catalog"), "the file is named once: \(text)")
    }
}
