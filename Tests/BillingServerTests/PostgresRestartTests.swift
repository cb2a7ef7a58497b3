import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import NIOCore
import Testing

/// `serve` on PostgreSQL while the database restarts (a failover, a minor-version upgrade).
/// It stops the server every other PostgreSQL test shares, so scripts/test runs it alone
/// (after the others, under its own time limit), handing it the commands in BILLINGD_TEST_POSTGRES_STOP
/// and BILLINGD_TEST_POSTGRES_START; without them it is cancelled, saying so.
@Suite("serve while PostgreSQL restarts", .serialized)
struct PostgresRestartTests {
    static func command(_ name: String) throws -> String {
        guard let command = ProcessInfo.processInfo.environment[name], !command.isEmpty else {
            try Test.cancel("\(name) is not set: scripts/test runs this suite alone after the others, since it restarts their PostgreSQL.")
        }
        return command
    }

    static func shell(_ command: String) async throws {
        let result = try await ChildProcess.run("/bin/sh", ["-c", command], environment: ProcessInfo.processInfo.environment)
        guard result.termination == .exit(0) else {
            throw DaemonError("`\(command)` failed (\(result.termination)): \(result.stderr)")
        }
    }

    /// Polls `condition` until it holds or `limit` has passed; whether it held.
    static func waitUntil(within limit: Duration, _ condition: () async throws -> Bool) async throws -> Bool {
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    @Test("While the database is down, /readyz and deliveries answer 503; once it is back the replica serves again, and nothing acknowledged is lost")
    func restartUnderLoad() async throws {
        let (stop, start) = (try Self.command("BILLINGD_TEST_POSTGRES_STOP"), try Self.command("BILLINGD_TEST_POSTGRES_START"))
        let configuration = try await PostgresTestDatabase.create()
        let url = try PostgresTestDatabase.url(of: configuration)
        let unused = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-pg-restart-\(UUID().uuidString).sqlite3").path
        let log = unused + ".log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let daemon = try await DaemonProcess.start(databasePath: unused, extraEnvironment: ["BILLINGD_DATABASE_URL": url], standardError: log)
        defer { daemon.stop() }

        // Each sender waits past serve's store deadline (20 s), so that what it sees while the
        // database is down is serve's answer, not its own timeout.
        let load = DeliveryLoad.start(workers: 8, prefix: "evt_pgrestart", port: daemon.port, timeout: .seconds(40))
        defer { load.cancel() }
        await load.waitForAcknowledged(100, within: .seconds(60))
        let beforeStop = load.count
        try await Self.shell(stop)
        let stoppedAt = ContinuousClock.now

        // Down: the replica says so, within its deadlines, rather than acknowledge what it cannot
        // store or hold the request until the pool gives up.
        let clock = ContinuousClock()
        var readyWhileDown = 0
        _ = try await Self.waitUntil(within: .seconds(30)) {
            readyWhileDown = (try? await HTTP.request("http://127.0.0.1:\(daemon.port)/readyz", method: "GET", timeout: .seconds(15)).0) ?? 0
            return readyWhileDown == 503
        }
        // On a connection of its own: the HTTP client's pool is the senders'.
        let downBody = eventBody(id: "evt_pgrestart_while_down")
        let signature = SignatureVerifier.header(body: downBody, secret: testSecret, timestamp: Int64(Date().timeIntervalSince1970))
        let downConnection = try await RawConnection.open(port: daemon.port)
        defer { downConnection.close() }
        let sentWhileDown = clock.now
        try await downConnection.send(
            rawRequest(
                "POST /webhooks/stripe HTTP/1.1",
                ["Host: x", "Content-Type: application/json", "Stripe-Signature: \(signature)", "Content-Length: \(downBody.count)"],
                body: String(decoding: downBody, as: UTF8.self)))
        let downStatus = await downConnection.readResponse(timeout: .seconds(60))?.status ?? 0
        let downAnsweredIn = clock.now - sentWhileDown
        // Down for over a minute: past the pool's circuit breaker (60 s without a connection),
        // after which it refuses leases at once and retries its connection every few seconds.
        try await Task.sleep(until: stoppedAt + .seconds(70))
        try await Self.shell(start)

        var readyAfter = 0
        _ = try await Self.waitUntil(within: .seconds(120)) {
            readyAfter = (try? await HTTP.request("http://127.0.0.1:\(daemon.port)/readyz", method: "GET", timeout: .seconds(15)).0) ?? 0
            return readyAfter == 200
        }
        let afterRestart = load.count
        // Within the group commit's deadline (120 s), past which a commit stuck on a connection
        // the stop cut is given up.
        await load.waitForAcknowledged(afterRestart + 100, within: .seconds(180))
        await load.stop()
        let retryStatus = (try? await HTTP.deliver(downBody, port: daemon.port, timeout: .seconds(40))) ?? 0

        #expect(beforeStop >= 100, "deliveries were acknowledged before the stop: \(load.statuses)")
        #expect(readyWhileDown == 503, "/readyz while the database is down")
        #expect(downStatus == 503, "a delivery while the database is down is refused, so Stripe retries it")
        #expect(downAnsweredIn < .seconds(50), "the refusal comes within serve's store deadline (20 s), not the pool's minute: \(downAnsweredIn)")
        #expect(load.statuses[500, default: 0] == 0, "never a 500: \(load.statuses)")
        #expect(readyAfter == 200, "/readyz once the database is back")
        #expect(load.count >= afterRestart + 100, "deliveries are acknowledged again: \(load.statuses)")
        #expect(daemon.process.isRunning, "the replica survived the restart")
        let serveLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(!serveLog.contains("unhandled error"), "\(serveLog.suffix(4000))")

        let store = try await PostgresLedgerStore.open(configuration, maximumConnections: 2, logger: PostgresTestDatabase.logger)
        let stored = Set(try await store.inbox.list(.init(limit: 1_000_000)).map(\.eventID))
        await store.close()
        let lost = load.acknowledged.values.subtracting(stored)
        #expect(lost.isEmpty, "acknowledged but lost: \(lost.prefix(5))")
        // The refused delivery may have been committed once the database came back (it was
        // queued when its deadline passed): Stripe's retry then stores it or is told duplicate.
        #expect(retryStatus == 200, "the retry of the refused delivery is acknowledged")
        #expect(stored.contains("evt_pgrestart_while_down"))

        // The database then goes away under the running replica (dropped, as a failover to an
        // empty server would leave it): SIGTERM still stops it, within its shutdown grace (20 s),
        // rather than when every wait on the database gives up.
        try await PostgresTestDatabase.drop(configuration)
        daemon.process.signal(SIGTERM)
        let stopped = await daemon.process.wait(upTo: .seconds(60))
        #expect(stopped == .exit(0), "SIGTERM stops a replica whose database is gone, within its grace: \(stopped.map { "\($0)" } ?? "still running after 60 s")")
    }
}
