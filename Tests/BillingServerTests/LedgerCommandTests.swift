import BillingStore
import BillingTestSupport
import Foundation
import Testing

/// A ledger of two users with subscriptions, on disk, for the commands to work on.
private func populatedLedger() async throws -> TemporaryLedger {
    var builder = UserLedgerBuilder()
    for (user, customer, subscription) in [("user_a", "cus_a", "sub_a"), ("user_b", "cus_b", "sub_b")] {
        builder.add("customer.created", UserFixtures.customer(customer, user: user))
        builder.add("customer.subscription.created", UserFixtures.subscription(subscription, customer: customer, status: "active"))
    }
    builder.add("customer.subscription.updated", UserFixtures.subscription("sub_b", customer: "cus_b", status: "past_due"))
    return try await builder.ledger()
}

@Suite("backup, replay --verify and copy succeed: the built binary on a ledger with data", .needsBillingdBinary, .serialized)
struct LedgerCommandTests {
    @Test("backup writes a copy that opens with the same rows and events; an existing file needs --force")
    func backup() async throws {
        let ledger = try await populatedLedger()
        defer { ledger.remove() }
        let settings = ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path]
        let target = ledger.directory.appendingPathComponent("backup.sqlite3").path
        let events = try await ledger.store.inbox.count()
        #expect(events == 5)

        let result = try await billingd(["backup", target, "--json"], environment: settings)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(summary["events"] as? Int == events)
        #expect(summary["path"] as? String == target)
        #expect((summary["bytes"] as? Int ?? 0) > 0)

        let copy = try SQLiteDatabase.open(path: target)
        let restored = SQLiteLedgerStore(database: copy)
        #expect(try await restored.maintenance.dump() == (try await ledger.store.maintenance.dump()))
        #expect(try await restored.inbox.count() == events)
        try copy.close()

        let again = try await billingd(["backup", target], environment: settings)
        #expect(again.status == 73, "\(again.stderr)")
        let forced = try await billingd(["backup", target, "--force"], environment: settings)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(forced.stdout.contains("Backed up \(events) events to \(target)"), "\(forced.stdout)")
    }

    @Test("replay --verify rebuilds the ledger from the inbox, finds it identical, and exits 0")
    func replayVerify() async throws {
        let ledger = try await populatedLedger()
        defer { ledger.remove() }
        let settings = ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path]
        let before = try await ledger.store.maintenance.dump()
        #expect(before.contains("sub_b"))

        let result = try await billingd(["replay", "--verify", "--json"], environment: settings)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(summary["identical"] as? Bool == true)
        #expect(summary["processed"] as? Int == 5)
        #expect(summary["failed"] as? Int == 0)
        #expect(try await ledger.store.maintenance.dump() == before)

        let text = try await billingd(["replay", "--verify"], environment: settings)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("The rebuilt ledger is identical to the one before."), "\(text.stdout)")
    }

    @Test("copy fills an empty PostgreSQL ledger from SQLite, verifies it by counts, rows and a replay, and the commands then read it there")
    func copyToPostgres() async throws {
        let ledger = try await populatedLedger()
        defer { ledger.remove() }
        try await PostgresTestDatabase.withFreshDatabase { target in
            // The fresh database's URL: the test server's, with its name.
            var url = try #require(URLComponents(string: ProcessInfo.processInfo.environment[PostgresTestDatabase.variable] ?? ""))
            url.path = "/" + target.database
            let targetURL = try #require(url.string)
            let source = ledger.directory.appendingPathComponent("ledger.sqlite3").path

            let result = try await billingd(["copy", "--from", source, "--to", targetURL, "--json"], environment: [:])
            #expect(result.status == 0, "\(result.stderr)")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect(summary["verified"] as? Bool == true)
            #expect(summary["ledger_identical"] as? Bool == true)
            #expect((summary["replay"] as? [String: Any])?["identical"] as? Bool == true)
            #expect((summary["replay"] as? [String: Any])?["processed"] as? Int == 5)

            let inspect = try await billingd(["inspect", "sub_b"], environment: ["BILLINGD_DATABASE_URL": targetURL])
            #expect(inspect.status == 0, "\(inspect.stderr)")
            #expect(inspect.stdout.contains("past_due"), "\(inspect.stdout)")
            // A second copy into the now-filled ledger is refused: 73.
            let again = try await billingd(["copy", "--from", source, "--to", targetURL], environment: [:])
            #expect(again.status == 73, "\(again.stderr)")
        }
    }
}
