import Foundation
import Testing

@Suite(
    "billingd trigger: the built binary",
    .needsBillingdBinary
)
struct TriggerCommandTests {
    @Test("A misspelt event type is refused with the nearest real ones (exit 64), before anything is posted or created")
    func misspeltType() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-trigger-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("ledger.sqlite3").path
        let result = try await billingd(
            ["trigger", "customer.subscription.creatd"],
            environment: ["BILLINGD_DATABASE": database, "STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdef"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("Stripe sends no event of type 'customer.subscription.creatd'"), "\(result.stderr)")
        #expect(result.stderr.contains("Did you mean customer.subscription.created"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: database))
    }

    @Test("Without a secret, trigger says which ledger it looked in and never creates one there")
    func noLedgerHere() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-trigger-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("billingd.sqlite3").path
        let result = try await billingd(["trigger", "customer.created"], environment: ["BILLINGD_DATABASE": database])
        #expect(result.status == 78)
        #expect(result.stderr.contains("no ledger at \(database)"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty, "no billingd.sqlite3, -wal or -shm left behind")
    }

    @Test("--set reaches nested fields with JSON values, and refuses a field the sample lacks (issue 17 item 1)")
    func setNested() async throws {
        let settings = ["STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdef"]
        let nested = try await billingd(
            ["trigger", "customer.created", "--set", "id=cus_888", "--set", "metadata.app_user_id=user_8", "--print"], environment: settings)
        #expect(nested.status == 0, "\(nested.stderr)")
        #expect(nested.stdout.contains(#""app_user_id":"user_8""#), "\(nested.stdout)")
        #expect(!nested.stdout.contains("metadata.app_user_id"), "\(nested.stdout)")
        let typo = try await billingd(["trigger", "customer.created", "--set", "custmer_id=cus_1", "--print"], environment: settings)
        #expect(typo.status == 64)
        #expect(typo.stderr.contains("data.object has no field 'custmer_id'"), "\(typo.stderr)")
    }
}
