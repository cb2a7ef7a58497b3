import BillingTestSupport
import Foundation

/// The built `billingd` (`swift build` first); BILLINGD_BINARY overrides.
let billingdBinaryPath: String = {
    if let path = ProcessInfo.processInfo.environment["BILLINGD_BINARY"] { return path }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/billingd").path
}()

/// Runs the built `billingd` (`swift build` first; BILLINGD_BINARY overrides) with a clean
/// environment plus `environment`, and collects its exit status (128 + the signal if one ended
/// it) and output. It waits on a thread of its own, not on the cooperative pool, which the fakes
/// of the same process need.
func billingd(_ arguments: [String], environment: [String: String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    let result = try await ChildProcess.run(billingdBinaryPath, arguments, environment: billingdEnvironment(environment))
    return (result.termination.status, result.stdout, result.stderr)
}

/// This process's environment without billingd's settings (STRIPE_, BILLINGD_, APPSTORE_), plus `settings`.
func billingdEnvironment(_ settings: [String: String]) -> [String: String] {
    ChildProcess.environment(clearingBillingdSettings: true, settings)
}
