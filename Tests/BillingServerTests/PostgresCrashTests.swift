import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import Synchronization
import Testing

/// The real `billingd serve` binary, two replicas on one PostgreSQL database, killed and
/// restarted the way deploys and crashes do it.
@Suite("Crash safety of serve replicas on PostgreSQL", .serialized)
struct PostgresCrashTests {
    /// Inbox events not applied yet.
    static func unapplied(_ counts: [InboxStatus: Int]) -> Int { counts.filter { $0.key != .applied }.values.reduce(0, +) }

    /// Two replicas; senders deliver to each in turn and, like a load balancer's retry, to the
    /// other when one does not answer; once the victim is killed, to the survivor only (as a
    /// balancer does once its health check fails).
    @Test("kill -9 of one replica under load loses no acknowledged delivery; the other stores and applies everything")
    func killNineOneReplica() async throws {
        let configuration = try await PostgresTestDatabase.create()
        let url = try PostgresTestDatabase.url(of: configuration)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-pg-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // BILLINGD_DATABASE names a file that must never be created: the URL wins.
        let unused = directory.appendingPathComponent("never.sqlite3").path
        let environment = ["BILLINGD_DATABASE_URL": url, "BILLINGD_DATABASE_CONNECTIONS": "8"]
        let victim = try await DaemonProcess.start(databasePath: unused, extraEnvironment: environment)
        let survivor = try await DaemonProcess.start(databasePath: unused, extraEnvironment: environment)
        defer { survivor.stop() }

        let live = LivePorts([victim.port, survivor.port])
        let load = DeliveryLoad.start(workers: 12, prefix: "evt_pgkill") { body, index in
            let ports = live.ports
            for attempt in 0..<ports.count {
                if let status = try? await HTTP.deliver(body, port: ports[(index + attempt) % ports.count]), status == 200 { return 200 }
            }
            return 0
        }
        let floor = 200
        await load.waitForAcknowledged(floor, within: .seconds(60)) { victim.process.isRunning }
        try await Task.sleep(for: .milliseconds(Int.random(in: 100...800)))
        let runningAtKill = victim.process.isRunning
        await victim.kill(signal: SIGKILL)
        live.ports = [survivor.port]
        // The survivor keeps taking the whole load for a moment.
        let atKill = load.count
        await load.waitForAcknowledged(atKill + 100, within: .seconds(30))
        await load.stop()
        #expect(runningAtKill, "the replica was still running when it was killed")
        #expect(load.count >= atKill + 100, "the surviving replica kept acknowledging")
        #expect(!FileManager.default.fileExists(atPath: unused), "no SQLite ledger is created beside the PostgreSQL one")

        let acked = load.acknowledged.values
        #expect(acked.count >= floor)
        let store = try await PostgresLedgerStore.open(configuration, maximumConnections: 2, logger: PostgresTestDatabase.logger)
        do {
            let stored = Set(try await store.inbox.list(.init(limit: 1_000_000)).map(\.eventID))
            let lost = acked.subtracting(stored)
            #expect(lost.isEmpty, "acknowledged but lost: \(lost.prefix(5))")
            // Whatever the killed replica left unapplied, the survivor's applier takes (a claim
            // it held expires after 60 s): bound the wait, never its speed.
            // (Deliveries in flight when the senders stopped may still be stored meanwhile.)
            var counts = try await store.inbox.countsByStatus()
            for _ in 0..<1200 where Self.unapplied(counts) > 0 {
                try await Task.sleep(for: .milliseconds(100))
                counts = try await store.inbox.countsByStatus()
            }
            #expect(Self.unapplied(counts) == 0 && counts[.applied, default: 0] >= stored.count, "\(counts)")
        } catch {
            await store.close()
            try? await PostgresTestDatabase.drop(configuration)
            throw error
        }
        await store.close()
        try await PostgresTestDatabase.drop(configuration)
    }
}

/// The replicas a load balancer still sends to.
final class LivePorts: Sendable {
    private let storage: Mutex<[Int]>
    init(_ ports: [Int]) { storage = Mutex(ports) }
    var ports: [Int] {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
