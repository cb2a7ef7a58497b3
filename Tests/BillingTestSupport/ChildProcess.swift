import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process of a test, started with `posix_spawn`.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3.1) can crash the test process with a bad
/// pointer dereference while it lists `/proc/self/fd` (a 256-byte over-read of each directory
/// entry, swift-corelibs-foundation#5472), and the more files the process has open and the more
/// children it starts, the likelier: billingd's suite, with its many ledgers, fakes and CLI
/// tests, crashed so in CI. This starts the child without that code.
public final class ChildProcess: Sendable {
    /// How a child ended.
    public enum Termination: Sendable, Equatable {
        case exit(Int32)
        case signal(Int32)

        /// The exit status as a shell gives it: the code, or 128 + the signal.
        public var status: Int32 {
            switch self {
            case .exit(let code): code
            case .signal(let signal): 128 + signal
            }
        }
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public let description: String
    }

    public let pid: pid_t
    private let ended = Mutex<Termination?>(nil)

    private init(pid: pid_t) {
        self.pid = pid
    }

    /// Starts `path` with `arguments` and exactly `environment`; standard output and error go to
    /// the files named (created or truncated), or to /dev/null.
    public static func start(
        _ path: String, _ arguments: [String], environment: [String: String], standardOutput: String? = nil,
        standardError: String? = nil
    ) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Nothing of the test process but the three below: SwiftNIO accepts connections without
        // close-on-exec, so a child would otherwise hold every connection an in-process server
        // had open at that moment, and the server's close would send no FIN until the child
        // ended (HostileHTTPTests failed so in CI, beside the kill -9 test's daemons).
        let closing = Self.addCloseFrom(&actions, 3)
        guard closing == 0 else {
            throw SpawnError(description: "posix_spawn_file_actions_addclosefrom_np: \(String(cString: strerror(closing)))")
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, standardOutput ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, standardError ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard result == 0 else {
            throw SpawnError(description: "posix_spawn \(path): \(String(cString: strerror(result)))")
        }
        return ChildProcess(pid: pid)
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), looked up at run
    /// time (RTLD_DEFAULT) because Swift's Glibc module does not declare it.
    private static let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            fatalError("glibc 2.34 or later is needed: posix_spawn_file_actions_addclosefrom_np is missing")
        }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// Runs `path` to its end on a thread of its own (never the cooperative pool, which fakes in
    /// the same process need), and returns its termination with what it wrote.
    /// - Parameter limit: how long the child may run; past it, it is killed and the call throws
    ///   ``TimedOut`` (a command that never ends fails its test, naming itself, instead of
    ///   holding the run until the suite's watchdog).
    public static func run(
        _ path: String, _ arguments: [String], environment: [String: String], limit: Duration = .seconds(600)
    ) async throws -> (termination: Termination, stdout: String, stderr: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("stdout").path
        let err = directory.appendingPathComponent("stderr").path
        let child = try start(path, arguments, environment: environment, standardOutput: out, standardError: err)
        let termination = try await child.wait(failingAfter: limit, describing: ([path] + arguments).joined(separator: " "), standardError: err)
        return (
            termination, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        )
    }

    /// Whether the child has not ended yet (reaping it if it has).
    public var isRunning: Bool {
        if ended.withLock({ $0 }) != nil { return false }
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        guard reaped == pid else { return reaped == 0 }
        record(status)
        return false
    }

    /// Blocks until the child ends.
    @discardableResult
    public func waitBlocking() -> Termination {
        if let termination = ended.withLock({ $0 }) { return termination }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { return ended.withLock { $0 } ?? .exit(-1) }
        }
        return record(status)
    }

    /// Polls for the end up to `limit`, blocking the calling thread: the termination, or nil
    /// when the child still runs.
    public func waitBlocking(upTo limit: Duration) -> Termination? {
        let end = ContinuousClock.now + limit
        while isRunning {
            guard ContinuousClock.now < end else { return nil }
            usleep(20_000)
        }
        return ended.withLock { $0 }
    }

    /// Waits for the end up to `limit`: the termination, or nil when the child still runs.
    public func wait(upTo limit: Duration) async -> Termination? {
        let end = ContinuousClock.now + limit
        while isRunning {
            guard ContinuousClock.now < end else { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return ended.withLock { $0 }
    }

    /// Waits for the end on a thread of its own.
    @discardableResult
    public func wait() async -> Termination {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.waitBlocking()) }.start()
        }
    }

    /// Waits for the end on a thread of its own, up to `limit`; past it, kills the child
    /// (SIGKILL), reaps it, and throws ``TimedOut`` with `command` and the end of the file at
    /// `standardError`, if given.
    @discardableResult
    public func wait(failingAfter limit: Duration, describing command: String, standardError: String? = nil) async throws -> Termination {
        let termination: Termination? = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.waitBlocking(upTo: limit)) }.start()
        }
        if let termination { return termination }
        signal(SIGKILL)
        await wait()
        let stderr = standardError.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
        throw TimedOut(command: command, limit: limit, stderrTail: String(stderr.suffix(2_000)))
    }

    /// A child that was still running when its time was up, and was killed.
    public struct TimedOut: Error, CustomStringConvertible {
        public let command: String
        public let limit: Duration
        public let stderrTail: String

        public var description: String {
            "\(command) still ran after \(limit) and was killed; the end of its standard error:\n\(stderrTail)"
        }
    }

    /// Sends `signal` if the child still runs.
    public func signal(_ signal: Int32) {
        if isRunning { _ = kill(pid, signal) }
    }

    @discardableResult
    private func record(_ status: Int32) -> Termination {
        let termination: Termination = (status & 0x7f) == 0 ? .exit((status >> 8) & 0xff) : .signal(status & 0x7f)
        ended.withLock { $0 = termination }
        return termination
    }

    /// This process's environment without billingd's settings (STRIPE_, BILLINGD_, APPSTORE_), plus `settings`.
    public static func environment(clearingBillingdSettings clear: Bool, _ settings: [String: String]) -> [String: String] {
        var inherited = ProcessInfo.processInfo.environment
        if clear { inherited = inherited.filter { key, _ in !["STRIPE_", "BILLINGD_", "APPSTORE_"].contains { key.hasPrefix($0) } } }
        for (key, value) in settings { inherited[key] = value }
        return inherited
    }
}
