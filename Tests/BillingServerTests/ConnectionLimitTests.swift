import BillingCommands
import BillingServer
import BillingStore
import BillingTestSupport
import Foundation
import Testing

/// Timeouts of one to five seconds, so that the tests wait little; every wait for a close is
/// bounded by a generous 120 s, never asserted to be short. (In one loaded full run on two
/// cores, the idle and slow-head connections were both still open after 30 s. Why is not known:
/// a late accept or a busy event loop. Meanwhile a `serve` process closed its idle connection
/// on time.)
@Suite("Connections: idle, slow heads and bodies are closed; the connection cap holds (issue 18 item 2)")
struct ConnectionLimitTests {
    static let patience = Duration.seconds(120)

    @Test("An idle connection, new or kept alive after a request, is closed after the idle timeout")
    func idleConnectionsClose() async throws {
        // Five seconds, not one: in a full run on two busy cores, more than a second has passed
        // between opening the kept-alive connection and its request reaching the server, which
        // then closed it as idle before the request.
        let limits = ConnectionLimits(idleTimeout: .seconds(5), headerTimeout: .seconds(60), bodyTimeout: .seconds(60))
        try await LiveServer.run(limits: limits) { port, _ in
            let silent = try await RawConnection.open(port: port)
            defer { silent.close() }
            #expect(await silent.readUntilClosed(timeout: Self.patience).closed, "a connection that never sends is closed")

            let keptAlive = try await RawConnection.open(port: port)
            defer { keptAlive.close() }
            try await keptAlive.send(rawRequest("GET /healthz HTTP/1.1", ["Host: x"]))
            let (bytes, closed) = await keptAlive.readUntilClosed(timeout: Self.patience)
            #expect(RawHTTPResponse(bytes)?.status == 200)
            #expect(closed, "a keep-alive connection idle after its answer is closed")
        }
    }

    @Test("A request head sent half is closed after the header timeout, long before the idle timeout")
    func slowHeadCloses() async throws {
        let limits = ConnectionLimits(idleTimeout: .seconds(120), headerTimeout: .seconds(1), bodyTimeout: .seconds(120))
        try await LiveServer.run(limits: limits) { port, _ in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send("POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Ty")
            #expect(await connection.readUntilClosed(timeout: Self.patience).closed)
        }
    }

    @Test("A body that keeps trickling is closed after the body timeout, and the route does not take what arrived for the body")
    func slowBodyCloses() async throws {
        let limits = ConnectionLimits(idleTimeout: .seconds(120), headerTimeout: .seconds(120), bodyTimeout: .seconds(1))
        let log = CapturedLog()
        try await LiveServer.run(limits: limits, logger: log.logger(format: .text)) { port, ledger in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send(
                rawRequest("POST /webhooks/stripe HTTP/1.1", ["Host: x", "Content-Type: application/json", "Content-Length: 100000"], body: "{"))
            // One byte every 200 ms: never idle, never done.
            let trickle = Task {
                for _ in 0..<100 where !Task.isCancelled {
                    guard (try? await connection.send(" ")) != nil else { return }
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            let (_, closed) = await connection.readUntilClosed(timeout: Self.patience)
            trickle.cancel()
            #expect(closed)
            #expect(try await ledger.store.inbox.count() == 0)
        }
        // The route saw the body fail, not a short body it then took for the whole.
        #expect(log.text.contains("webhook rejected"), "\(log.text)")
        #expect(log.text.contains("reason=request_timeout"), "\(log.text)")
        #expect(!log.text.contains("unhandled error"), "\(log.text)")
    }

    @Test(
        "billingd serve reads the connection settings: with BILLINGD_IDLE_TIMEOUT=1s an idle connection is closed",
        .needsBillingdBinary)
    func serveAppliesSettings() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-idle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(
            databasePath: directory.appendingPathComponent("ledger.sqlite3").path,
            extraEnvironment: ["BILLINGD_IDLE_TIMEOUT": "1s"])
        defer { daemon.stop() }
        let idle = try await RawConnection.open(port: daemon.port)
        defer { idle.close() }
        #expect(await idle.readUntilClosed(timeout: Self.patience).closed)
    }

    /// Over `billingd serve`: Hummingbird's in-process test server drops the connection cap
    /// (`ApplicationConfiguration.with(address:)` does not copy `availableConnectionsDelegate`).
    @Test(
        "Beyond BILLINGD_MAX_CONNECTIONS a client waits to be accepted, and is served once a connection closes",
        .needsBillingdBinary)
    func connectionCap() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-cap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(
            databasePath: directory.appendingPathComponent("ledger.sqlite3").path, extraEnvironment: ["BILLINGD_MAX_CONNECTIONS": "2"])
        defer { daemon.stop() }
        var open: [RawConnection] = []
        for _ in 0..<2 {
            let connection = try await RawConnection.open(port: daemon.port)
            try await connection.send(rawRequest("GET /healthz HTTP/1.1", ["Host: x"]))
            #expect(await connection.readResponse(timeout: Self.patience)?.status == 200)
            open.append(connection)
        }
        let third = try await RawConnection.open(port: daemon.port)  // the kernel's backlog takes it
        defer { third.close() }
        try await third.send(rawRequest("GET /healthz HTTP/1.1", ["Host: x"]))
        // One read of the third's answer throughout, so that no byte read before the close is
        // dropped by a second read; 120 s, since a full run on two cores has been this slow.
        let answered = LockedSet()
        let answer = Task {
            let response = await third.readResponse(timeout: .seconds(120))
            answered.insert("third")
            return response
        }
        try await Task.sleep(for: .seconds(1))
        #expect(answered.values.isEmpty, "a third connection is not served while two are open")
        open[0].close()
        #expect(await answer.value?.status == 200, "it is served once one closes")
        open[1].close()
    }
}
