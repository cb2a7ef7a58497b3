import BillingCore
import BillingStore
import Foundation
import Testing

@Suite(
    "billingd events retry: the built binary",
    .needsBillingdBinary
)
struct EventsCommandTests {
    @Test("An id that failed in test and live mode is re-queued only where --mode says; alone, it asks which")
    func retryIsScoped() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-events-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.sqlite3").path
        do {
            let database = try SQLiteDatabase.open(path: path)
            defer { try? database.close() }
            // Bodies without an object: one try leaves each dead.
            let deliveries = [false, true].map { livemode in
                InboxDelivery(
                    envelope: EventEnvelope(
                        id: "evt_twice", type: "invoice.paid", apiVersion: nil, created: 1, livemode: livemode, account: nil,
                        objectID: nil, objectType: nil),
                    body: Array(#"{"id":"evt_twice"}"#.utf8), receivedAt: 1, source: .webhook, secretIndex: 0)
            }
            _ = try await SQLiteInbox(database: database).insert(deliveries)
            #expect(try await SQLiteApplier(database: database, configuration: .init(maximumAttempts: 1)).drain().dead == 2)
        }
        let settings = ["BILLINGD_DATABASE": path]

        let ambiguous = try await billingd(["events", "retry", "evt_twice"], environment: settings)
        #expect(ambiguous.status != 0)
        #expect(ambiguous.stderr.contains("evt_twice failed in 2 places (platform test, platform live): name one with --account and --mode"), "\(ambiguous.stderr)")

        let live = try await billingd(["events", "retry", "evt_twice", "--mode", "live"], environment: settings)
        #expect(live.status == 0, "\(live.stderr)")
        #expect(live.stdout.contains("Re-queued evt_twice (live)."), "\(live.stdout)")

        let listed = try await billingd(["events", "--status", "dead", "--json"], environment: settings)
        let dead = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(dead.map { $0["livemode"] as? Bool } == [false], "the test-mode event is still dead")

        let elsewhere = try await billingd(["events", "retry", "evt_twice", "--account", "acct_1"], environment: settings)
        #expect(elsewhere.status != 0)
        #expect(elsewhere.stderr.contains("No failed or dead event evt_twice (acct_1) in the inbox"), "\(elsewhere.stderr)")
    }
}
