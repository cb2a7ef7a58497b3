import BillingTestSupport
import Foundation
import Testing

/// The built `billingd` (`swift build` first); BILLINGD_BINARY overrides.
let billingdBinaryPath: String = {
    if let path = ProcessInfo.processInfo.environment["BILLINGD_BINARY"] { return path }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/billingd").path
}()

extension Trait where Self == ConditionTrait {
    /// For tests that run the built `billingd`: on a developer's machine they are skipped, with
    /// the reason, until `swift build` made it; under CI (`CI=true`) they always run, so that a
    /// missing binary fails them instead of skipping them silently (`scripts/test` builds it).
    static var needsBillingdBinary: Self {
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: billingdBinaryPath) || ProcessInfo.processInfo.environment["CI"] == "true",
            "run `swift build` first: \(billingdBinaryPath) is missing")
    }
}

/// Runs the built `billingd` (`swift build` first; BILLINGD_BINARY overrides) with a clean
/// environment plus `environment`, and collects its exit status (128 + the signal if one ended
/// it) and output. It waits on a thread of its own, not on the cooperative pool, which the fakes
/// of the same process need.
func billingd(_ arguments: [String], environment: [String: String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    guard FileManager.default.isExecutableFile(atPath: billingdBinaryPath) else {
        throw BillingdBinaryMissing()
    }
    let result = try await ChildProcess.run(billingdBinaryPath, arguments, environment: billingdEnvironment(environment))
    return (result.termination.status, result.stdout, result.stderr)
}

/// This process's environment without billingd's settings (STRIPE_, BILLINGD_, APPSTORE_), plus `settings`.
func billingdEnvironment(_ settings: [String: String]) -> [String: String] {
    ChildProcess.environment(clearingBillingdSettings: true, settings)
}

/// The built `billingd` is not where the tests look for it.
struct BillingdBinaryMissing: Error, CustomStringConvertible {
    var description: String { "billingd binary not found at \(billingdBinaryPath): run `swift build` before `swift test` (scripts/test does)" }
}
