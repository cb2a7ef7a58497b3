import BillingCommands
import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import BillingServer

/// A ledger on disk whose subscription `sub_ret` was sent four times (three superseded
/// snapshots) and whose customer once, all in February 2026: older than a 35-day window.
private func ledgerWithSupersededSnapshots() async throws -> TemporaryLedger {
    var builder = UserLedgerBuilder()
    builder.add("customer.created", UserFixtures.customer("cus_ret", user: "user_ret"))
    for status in ["trialing", "active", "past_due", "active"] {
        builder.add("customer.subscription.updated", UserFixtures.subscription("sub_ret", customer: "cus_ret", status: status))
    }
    return try await builder.ledger()
}

@Suite("BILLINGD_RETENTION_BODIES: 400d from 35d to 36500d, unset keeps every body")
struct RetentionSettingTests {
    static func days(_ value: String?) throws -> Int? {
        try Settings.load(environment: value.map { ["BILLINGD_RETENTION_BODIES": $0] } ?? [:], configFile: nil).database.retentionBodiesDays
    }

    @Test("Accepted spellings", arguments: [("400d", 400), ("35d", 35), ("36500d", 36_500), (" 90d ", 90)])
    func accepted(text: String, days: Int) throws {
        #expect(try Self.days(text) == days)
    }

    @Test("Unset (or blank) keeps bodies forever")
    func unset() throws {
        #expect(try Self.days(nil) == nil)
        #expect(try Self.days("  ") == nil)
    }

    @Test("Refused spellings name the variable and the accepted form", arguments: ["400", "34d", "36501d", "0d", "-400d", "1y", "400 days", "d", "forever", "4e2d"])
    func refused(text: String) throws {
        #expect {
            _ = try Self.days(text)
        } throws: { error in
            let message = "\(error)"
            return message.contains("BILLINGD_RETENTION_BODIES") && message.contains("400d") && message.contains("35 to 36500")
        }
    }
}

@Suite("serve's daily body compaction")
struct BodyCompactionServiceTests {
    @Test("It prunes at start and on its interval, logs one line a run, and ends on a graceful shutdown")
    func runsAndStops() async throws {
        let ledger = try await ledgerWithSupersededSnapshots()
        defer { ledger.remove() }
        let log = CapturedLog()
        let logger = log.logger(format: .text)
        let service = BodyCompactionService(store: ledger.store, days: 35, interval: .milliseconds(50), space: nil, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
        let running = Task { try await group.run() }
        // Progress, not speed: polled with a generous bound.
        func pruned(_ count: Int) async throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if try await ledger.store.retention.eventCounts()["stripe"]?.pruned == count { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
        #expect(try await pruned(3), "the three superseded snapshots of sub_ret")
        var builder = UserLedgerBuilder(eventPrefix: "evt_later_")
        builder.add("customer.subscription.updated", UserFixtures.subscription("sub_ret", customer: "cus_ret", status: "canceled"), created: 1_769_950_000)
        try await builder.apply(to: ledger)
        #expect(try await pruned(4), "a later run prunes the snapshot the new one superseded")
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(log.text.contains("bodies compacted"))
        #expect(log.text.contains("bodies_pruned=3"), "\(log.text)")
    }
}

extension BodyCompactionServiceTests {
    @Test("While another replica holds the body-compaction lease a run skips its turn; once it is free the run prunes and gives it back")
    func leaseSkips() async throws {
        let ledger = try await ledgerWithSupersededSnapshots()
        defer { ledger.remove() }
        let now = Int64(Date().timeIntervalSince1970)
        var quiet = Logger(label: "test.retention")
        quiet.logLevel = .critical
        let service = BodyCompactionService(store: ledger.store, days: 35, space: nil, logger: quiet, holder: "replica-a", now: { now })
        try await ledger.store.reconcileRuns.acquire(BodyCompactionService.leaseName, holder: "replica-b", ttl: 600, now: now)
        #expect(await service.runOnce() == nil)
        #expect(try await ledger.store.retention.eventCounts()["stripe"]?.pruned == 0)
        try await ledger.store.reconcileRuns.release(BodyCompactionService.leaseName, holder: "replica-b")
        let result = try #require(await service.runOnce())
        #expect(result.bodies == 3)
        #expect(try await ledger.store.retention.eventCounts()["stripe"]?.pruned == 3)
        // Given back: the other replica takes it at once.
        try await ledger.store.reconcileRuns.acquire(BodyCompactionService.leaseName, holder: "replica-b", ttl: 600, now: now)
    }
}

@Suite("serve with BILLINGD_RETENTION_BODIES")
struct RetentionDaemonTests {
    @Test("The daemon built from settings prunes the superseded bodies at start, and stops on shutdown")
    func daemonPrunes() async throws {
        let ledger = try await ledgerWithSupersededSnapshots()
        defer { ledger.remove() }
        var quiet = Logger(label: "test.retention")
        quiet.logLevel = .critical
        let settings = try Settings.load(
            environment: ["BILLINGD_PORT": "0", "STRIPE_WEBHOOK_SECRET": testSecret, "BILLINGD_RETENTION_BODIES": "35d"], configFile: nil)
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let daemon = try await BillingDaemon(
            settings: settings, store: ledger.store, options: .init(gracefulShutdownSignals: [], onListening: { listening.yield($0) }, cancellationLimit: nil),
            logger: quiet)
        let running = Task {
            defer { listening.finish() }
            try await daemon.run()
        }
        var iterator = ports.makeAsyncIterator()
        #expect(await iterator.next() != nil, "it listens")
        let deadline = ContinuousClock.now + .seconds(60)
        var counts = try await ledger.store.retention.eventCounts()["stripe"]
        while counts?.pruned != 3, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            counts = try await ledger.store.retention.eventCounts()["stripe"]
        }
        #expect(counts == InboxEventCount(events: 5, bodies: 2))
        await daemon.shutdown()
        try await running.value
    }
}

@Suite("compact, stats and replay after compaction: the built binary", .needsBillingdBinary, .serialized)
struct CompactCommandTests {
    @Test("serve and compact refuse a malformed BILLINGD_RETENTION_BODIES with exit 78, naming the accepted form", arguments: ["400", "34d", "1y"])
    func refusedSetting(value: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let settings = [
            "BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path, "BILLINGD_RETENTION_BODIES": value,
            "STRIPE_WEBHOOK_SECRET": testSecret, "BILLINGD_PORT": "0",
        ]
        for command in [["serve"], ["compact"]] {
            let result = try await billingd(command, environment: settings)
            #expect(result.status == 78, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("BILLINGD_RETENTION_BODIES=\(value) is not valid"), "\(result.stderr)")
            #expect(result.stderr.contains("such as 400d"), "\(result.stderr)")
        }
    }

    @Test("compact --dry-run changes nothing; compact prunes the superseded bodies, stats counts them, and replay --verify finds the ledger identical")
    func compactThenReplay() async throws {
        let ledger = try await ledgerWithSupersededSnapshots()
        defer { ledger.remove() }
        let path = ledger.directory.appendingPathComponent("ledger.sqlite3").path
        let dump = try await ledger.store.maintenance.dump()

        let noWindow = try await billingd(["compact"], environment: ["BILLINGD_DATABASE": path])
        #expect(noWindow.status == 78, "\(noWindow.stderr)")
        #expect(noWindow.stderr.contains("BILLINGD_RETENTION_BODIES"))

        let shortWindow = try await billingd(["compact", "--older-than", "10d"], environment: ["BILLINGD_DATABASE": path])
        #expect(shortWindow.status == 64, "a bad option: \(shortWindow.stderr)")
        #expect(shortWindow.stderr.contains("35 to 36500"), "\(shortWindow.stderr)")

        let dry = try await billingd(["compact", "--dry-run", "--older-than", "35d", "--json"], environment: ["BILLINGD_DATABASE": path])
        #expect(dry.status == 0, "\(dry.stderr)")
        let drySummary = try #require(try JSONSerialization.jsonObject(with: Data(dry.stdout.utf8)) as? [String: Any])
        #expect(drySummary["bodies_pruned"] as? Int == 3)
        #expect(drySummary["dry_run"] as? Bool == true)
        #expect(try await ledger.store.retention.eventCounts()["stripe"] == InboxEventCount(events: 5, bodies: 5))

        let settings = ["BILLINGD_DATABASE": path, "BILLINGD_RETENTION_BODIES": "35d"]
        let compact = try await billingd(["compact", "--json"], environment: settings)
        #expect(compact.status == 0, "\(compact.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(compact.stdout.utf8)) as? [String: Any])
        #expect(summary["bodies_pruned"] as? Int == 3)
        #expect(summary["older_than_days"] as? Int == 35)
        #expect(summary["bodies_uncompressed"] as? Int == 0, "serve stored every body compressed")
        #expect(summary["objects_uncompressed"] as? Int == 0, "and every object's raw JSON")
        #expect((summary["bytes_after"] as? Int ?? .max) <= (summary["bytes_before"] as? Int ?? 0))
        #expect(try await ledger.store.maintenance.dump() == dump)

        let stats = try await billingd(["stats", "--json"], environment: settings)
        #expect(stats.status == 0, "\(stats.stderr)")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
        #expect(figures["events"] as? Int == 5)
        let stripe = try #require((figures["stores"] as? [String: Any])?["stripe"] as? [String: Any])
        #expect(stripe["bodies_pruned"] as? Int == 3)
        #expect(stripe["bodies"] as? Int == 2)
        #expect((figures["bytes_per_event"] as? Int ?? 0) > 0)
        #expect(((figures["tables"] as? [String: Any])?["inboxbody"] as? Int ?? 0) > 0)
        let text = try await billingd(["stats"], environment: settings)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("Per event:"), "\(text.stdout)")

        let replay = try await billingd(["replay", "--verify", "--json"], environment: settings)
        #expect(replay.status == 0, "\(replay.stderr)")
        let replayed = try #require(try JSONSerialization.jsonObject(with: Data(replay.stdout.utf8)) as? [String: Any])
        #expect(replayed["identical"] as? Bool == true)
        #expect(replayed["processed"] as? Int == 2)
        #expect(try await ledger.store.maintenance.dump() == dump)
    }
}
