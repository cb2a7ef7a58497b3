import BillingStore
import Foundation
import Testing

@Suite("Reconcile's lease, runs and event cursors, on both backends")
struct ReconcileRunStoreTests {
    @Test("One holder at a time: the holder renews, an expired lease is taken over, only the holder releases it", arguments: StoreBackend.allCases)
    func leaseRules(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let runs = stores[0].reconcileRuns
            try await runs.acquire("reconcile", holder: "a", ttl: 60, now: 1000)
            let held = await #expect(throws: LeaseHeld.self) { try await runs.acquire("reconcile", holder: "b", ttl: 60, now: 1059) }
            #expect(held?.holder == "a")
            #expect(held?.acquiredAt == 1000)
            #expect(held?.expiresAt == 1060)
            // Taking a lease one holds renews it; so does renew.
            try await runs.acquire("reconcile", holder: "a", ttl: 60, now: 1030)
            try await runs.renew("reconcile", holder: "a", ttl: 60, now: 1050)
            await #expect(throws: LeaseHeld.self) { try await runs.acquire("reconcile", holder: "b", ttl: 60, now: 1109) }
            // Expired: taken over, and the old holder's renewal learns it lost the lease to b.
            try await runs.acquire("reconcile", holder: "b", ttl: 60, now: 1110)
            let lost = await #expect(throws: LeaseHeld.self) { try await runs.renew("reconcile", holder: "a", ttl: 60, now: 1111) }
            #expect(lost?.holder == "b")
            // Only the holder's release frees it.
            try await runs.release("reconcile", holder: "a")
            await #expect(throws: LeaseHeld.self) { try await runs.acquire("reconcile", holder: "c", ttl: 60, now: 1112) }
            try await runs.release("reconcile", holder: "b")
            try await runs.acquire("reconcile", holder: "c", ttl: 60, now: 1113)
            // Leases of other names are apart.
            try await runs.acquire("usage-report", holder: "a", ttl: 60, now: 1113)
            let gone = await #expect(throws: LeaseHeld.self) { try await runs.renew("nothing", holder: "a", ttl: 60, now: 1113) }
            #expect(gone?.holder == "nobody")
        }
    }

    @Test("Two replicas race for the lease: exactly one holds it, and once it expires exactly one other takes it over", arguments: StoreBackend.allCases)
    func replicasRace(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend, replicas: 2) { stores in
            for round in 0..<4 {
                let name = "race-\(round)"
                let first = try await race(stores, name: name, contenders: (0..<8).map { "replica-\($0)" }, now: 1000)
                #expect(first.count == 1, "round \(round): \(first)")
                let holder = try #require(first.first)
                let refused = await #expect(throws: LeaseHeld.self) {
                    try await stores[1].reconcileRuns.acquire(name, holder: "cron", ttl: 60, now: 1059)
                }
                #expect(refused?.holder == holder)
                // At its expiry the others race again: one of them takes it over.
                let others = (0..<8).map { "replica-\($0)" }.filter { $0 != holder }
                let second = try await race(stores, name: name, contenders: others, now: 1060)
                #expect(second.count == 1, "round \(round): \(second)")
                let lost = await #expect(throws: LeaseHeld.self) {
                    try await stores[0].reconcileRuns.renew(name, holder: holder, ttl: 60, now: 1061)
                }
                #expect(lost?.holder == second.first)
            }
        }
    }

    /// Every contender tries to take the lease at once, alternating between the replicas; the
    /// ones that got it.
    private func race(_ stores: [RoleStores], name: String, contenders: [String], now: Int64) async throws -> [String] {
        try await withThrowingTaskGroup(of: String?.self) { group in
            for (index, contender) in contenders.enumerated() {
                let runs = stores[index % stores.count].reconcileRuns
                group.addTask {
                    do {
                        try await runs.acquire(name, holder: contender, ttl: 60, now: now)
                        return contender
                    } catch is LeaseHeld {
                        return nil
                    }
                }
            }
            var winners: [String] = []
            for try await winner in group { if let winner { winners.append(winner) } }
            return winners
        }
    }

    @Test("Runs are recorded; runs of a holder without the lease become interrupted; the cursor never moves back", arguments: StoreBackend.allCases)
    func runsAndCursors(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let runs = stores[0].reconcileRuns
            try await runs.acquire("reconcile", holder: "h1", ttl: 600, now: 1000)
            let first = try await runs.start(mode: "full", holder: "h1", dryRun: false, now: 1000)
            try await runs.finish(
                first, outcome: .completed, totals: ReconcileTotals(drift: 2, repaired: 1, recoveredEvents: 3, objects: 10), error: nil,
                report: Data("{}".utf8), now: 1010)
            let second = try await runs.start(mode: "full", holder: "h1", dryRun: true, now: 1020)
            try await runs.finish(second, outcome: .failed, totals: ReconcileTotals(), error: "Stripe is down", report: nil, now: 1030)
            let latest = try await runs.latest(mode: "full")
            let completed = try #require(latest.completed)
            #expect(completed.id == first && completed.mode == "full" && completed.holder == "h1" && completed.outcome == .completed)
            #expect(completed.startedAt == 1000 && completed.finishedAt == 1010 && !completed.dryRun && completed.error == nil)
            #expect([completed.drift, completed.repaired, completed.recoveredEvents, completed.objects] == [2, 1, 3, 10] as [Int])
            let finished = try #require(latest.finished)
            #expect(finished.id == second && finished.outcome == .failed && finished.dryRun && finished.error == "Stripe is down")
            #expect(finished.startedAt == 1020 && finished.finishedAt == 1030)
            #expect([finished.drift, finished.repaired, finished.recoveredEvents, finished.objects] == [0, 0, 0, 0] as [Int])
            #expect(try await runs.latest(mode: "events").finished == nil)

            let crashed = try await runs.start(mode: "events", holder: "h0", dryRun: false, now: 1040)
            _ = try await runs.start(mode: "events", holder: "h1", dryRun: false, now: 1041)
            try await runs.markAbandoned(leaseName: "reconcile", now: 1050)
            let events = try await runs.latest(mode: "events")
            #expect(events.finished?.id == crashed)
            #expect(events.finished?.outcome == .interrupted)
            #expect(events.finished?.finishedAt == 1050)
            #expect(events.completed == nil)

            #expect(try await runs.eventCursor(account: "", livemode: false) == nil)
            try await runs.advanceEventCursor(account: "", livemode: false, created: 500, walkedAt: 1000)
            try await runs.advanceEventCursor(account: "", livemode: false, created: 400, walkedAt: 2000)
            let cursor = try #require(try await runs.eventCursor(account: "", livemode: false))
            #expect(cursor.created == 500 && cursor.walkedAt == 2000)
            try await runs.advanceEventCursor(account: "acct_1", livemode: false, created: 700, walkedAt: 3000)
            #expect(try await runs.eventCursor(account: "acct_1", livemode: true) == nil)
            #expect(try await runs.eventCursor(account: "acct_1", livemode: false)?.created == 700)
        }
    }

    @Test("The console's list of runs: newest first over every mode, running ones included, with each finished run's report", arguments: StoreBackend.allCases)
    func recentRunsAndReports(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let runs = stores[0].reconcileRuns
            #expect(try await runs.recent(limit: 5).isEmpty)
            let full = try await runs.start(mode: "full", holder: "h1", dryRun: true, now: 1000)
            try await runs.finish(
                full, outcome: .completed, totals: ReconcileTotals(drift: 1, objects: 4), error: nil, report: Data(#"{"run_id":1}"#.utf8), now: 1010)
            let events = try await runs.start(mode: "events", holder: "h1", dryRun: false, now: 1020)
            let running = try await runs.start(mode: "full", holder: "h2", dryRun: true, now: 1030)
            let recent = try await runs.recent(limit: 5)
            #expect(recent.map(\.id) == [running, events, full])
            #expect(recent.map(\.outcome) == [.running, .running, .completed])
            #expect(recent.last?.drift == 1 && recent.last?.dryRun == true && recent.last?.finishedAt == 1010)
            #expect(try await runs.recent(limit: 2).map(\.id) == [running, events])
            #expect(try await runs.report(full).map { String(decoding: $0, as: UTF8.self) } == #"{"run_id":1}"#)
            #expect(try await runs.report(running) == nil, "a running run has no report yet")
            #expect(try await runs.report(9_999) == nil)
        }
    }
}
