import Foundation

/// The built `billingd` (`swift build` first); BILLINGD_BINARY overrides.
let billingdBinaryPath: String = {
    if let path = ProcessInfo.processInfo.environment["BILLINGD_BINARY"] { return path }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/billingd").path
}()

/// Runs the built `billingd` (`swift build` first; BILLINGD_BINARY overrides) with a clean
/// environment plus `environment`, and collects its exit status and output.
func billingd(_ arguments: [String], environment: [String: String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let out = directory.appendingPathComponent("stdout")
    let err = directory.appendingPathComponent("stderr")
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    _ = FileManager.default.createFile(atPath: err.path, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: billingdBinaryPath)
    process.arguments = arguments
    process.environment = billingdEnvironment(environment)
    process.standardOutput = try FileHandle(forWritingTo: out)
    process.standardError = try FileHandle(forWritingTo: err)
    // Wait without blocking a thread of the cooperative pool, which the fake's handlers need.
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    return (status, try String(contentsOf: out, encoding: .utf8), try String(contentsOf: err, encoding: .utf8))
}

/// This process's environment without billingd's settings (STRIPE_, BILLINGD_, APPSTORE_), plus `settings`.
func billingdEnvironment(_ settings: [String: String]) -> [String: String] {
    var inherited = ProcessInfo.processInfo.environment.filter { key, _ in !["STRIPE_", "BILLINGD_", "APPSTORE_"].contains { key.hasPrefix($0) } }
    for (key, value) in settings { inherited[key] = value }
    return inherited
}
