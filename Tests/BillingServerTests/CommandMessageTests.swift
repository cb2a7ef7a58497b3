import Foundation
import Testing

@Suite(
    "What the CLI says when a setting is missing: the built binary",
    .enabled(if: FileManager.default.isExecutableFile(atPath: billingdBinaryPath), "run `swift build` first")
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
        #expect(result.status == 64)
        #expect(result.stderr.contains("STRIPE_API_KEY is not set"), "\(result.stderr)")
        #expect(result.stderr.contains(access), "\(result.stderr)")
        #expect(!result.stderr.contains("reconcile"), "\(result.stderr)")
    }
}
