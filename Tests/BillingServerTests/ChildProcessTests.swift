import BillingTestSupport
import Foundation
import Testing

/// The tests' own way of running a command: it may not hang a test run.
@Suite("ChildProcess: a command that never ends fails its test instead of holding the run")
struct ChildProcessTests {
    @Test("A command still running at its limit is killed, and the call throws naming it and its standard error")
    func limit() async throws {
        let started = ContinuousClock.now
        let error = await #expect(throws: ChildProcess.TimedOut.self) {
            try await ChildProcess.run(
                "/bin/sh", ["-c", "echo about to wait >&2; exec sleep 600"], environment: ProcessInfo.processInfo.environment,
                limit: .milliseconds(300))
        }
        #expect(error?.command == "/bin/sh -c echo about to wait >&2; exec sleep 600")
        #expect(error?.stderrTail.contains("about to wait") == true, "\(String(describing: error))")
        // Killed, not waited for: far sooner than the sleep.
        #expect(ContinuousClock.now - started < .seconds(300))
    }

    @Test("A command that ends within its limit gives its status and output")
    func withinLimit() async throws {
        let result = try await ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], environment: ProcessInfo.processInfo.environment)
        #expect(result.termination.status == 3)
        #expect(result.stdout == "out\n" && result.stderr == "err\n")
    }
}
