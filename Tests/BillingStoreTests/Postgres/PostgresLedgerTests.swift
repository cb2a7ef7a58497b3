import BillingCore
import BillingSamples
import BillingStore
import BillingTestSupport
import Foundation
import PostgresNIO
import Testing

@Suite("PostgreSQL ledger: several replicas, one ledger")
struct PostgresLedgerTests {
    /// The ledger SQLite builds from in-order, duplicate-free delivery of `bodies`.
    static func sqliteReference(_ deliveries: [InboxDelivery]) async throws -> String {
        var dump = ""
        try await withLedger(.sqlite) { ledger in
            let pass = try await ledger.deliver(deliveries)
            #expect(pass.failed + pass.dead == 0)
            dump = try await ledger.dump()
        }
        return dump
    }

    /// Delivers in bursts, alternating the two paths a delivery takes: a group commit that applies
    /// it at once, and the inbox with a drain after.
    static func deliverInBursts(_ deliveries: [InboxDelivery], applier: any EventApplier, inbox: any EventInbox, seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        var index = 0
        var viaIngest = true
        while index < deliveries.count {
            let burst = Array(deliveries[index..<min(index + Int.random(in: 1...12, using: &random), deliveries.count)])
            index += burst.count
            if viaIngest {
                _ = try await applier.ingest(burst.map(applier.prepare), now: 1)
            } else {
                _ = try await inbox.insert(burst)
                try await applier.drain()
            }
            viaIngest.toggle()
        }
        try await applier.drain()
    }

    @Test("The Stripe lifecycles in order on SQLite and shuffled with duplicates on PostgreSQL give the same dump", arguments: [UInt64(1), 2, 3])
    func stripeShuffled(seed: UInt64) async throws {
        let reference = try await Self.sqliteReference(Lifecycle.events().map(EventFactory.delivery))
        #expect(reference.contains("subscription "), "the reference holds a ledger")
        try await withLedger(.postgres) { ledger in
            let deliveries = try shuffledWithDuplicates(Lifecycle.events(), seed: seed).map(EventFactory.delivery)
            try await Self.deliverInBursts(deliveries, applier: ledger.applier, inbox: ledger.inbox, seed: seed)
            #expect(try await ledger.dump() == reference)
        }
    }

    @Test("The App Store lifecycles in order on SQLite and shuffled with duplicates on PostgreSQL give the same dump")
    func appStoreShuffled() async throws {
        let reference = try await Self.sqliteReference(AppStoreFactory.lifecycles.map(AppStoreFactory.delivery))
        #expect(reference.contains("appStoreSubscription "), "the reference holds a ledger")
        try await withLedger(.postgres) { ledger in
            let deliveries = try shuffledWithDuplicates(AppStoreFactory.lifecycles, seed: 9).map(AppStoreFactory.delivery)
            try await Self.deliverInBursts(deliveries, applier: ledger.applier, inbox: ledger.inbox, seed: 9)
            #expect(try await ledger.dump() == reference)
        }
    }

    // MARK: Replicas

    /// Runs `body` with two stores (two replicas) on one fresh database.
    static func withTwoReplicas(_ body: (PostgresLedgerStore, PostgresLedgerStore) async throws -> Void) async throws {
        try await PostgresTestDatabase.withFreshDatabase { configuration in
            let first = try await PostgresLedgerStore.open(configuration, maximumConnections: 4, logger: PostgresTestDatabase.logger)
            let second = try await PostgresLedgerStore.open(configuration, maximumConnections: 4, logger: PostgresTestDatabase.logger)
            do {
                try await body(first, second)
            } catch {
                await first.close()
                await second.close()
                throw error
            }
            await first.close()
            await second.close()
        }
    }

    /// How many inbox rows were applied other than exactly once (attempts other than 1, or not done).
    static func notAppliedOnce(_ store: PostgresLedgerStore) async throws -> Int {
        let rows = try await store.client.query(
            "SELECT count(*) FROM inboxEvent WHERE attempts <> 1 OR status NOT IN ('applied', 'ignored')")
        for try await count in rows.decode(Int.self) { return count }
        return -1
    }

    @Test("Two replicas draining one database at once apply every event exactly once, into the in-order ledger")
    func concurrentDrains() async throws {
        let bodies = Lifecycle.events(customers: 8)
        let reference = try await Self.sqliteReference(bodies.map(EventFactory.delivery))
        try await Self.withTwoReplicas { first, second in
            let deliveries = try shuffledWithDuplicates(bodies, seed: 5).map(EventFactory.delivery)
            for start in stride(from: 0, to: deliveries.count, by: 50) {
                _ = try await first.inbox.insert(Array(deliveries[start..<min(start + 50, deliveries.count)]))
            }
            #expect(try await first.inbox.count() == bodies.count)
            let configuration = ApplierConfiguration(batchSize: 4)
            async let one = first.applier(configuration).drain()
            async let other = second.applier(configuration).drain()
            let (a, b) = try await (one, other)
            #expect(a.processed + b.processed == bodies.count, "each event processed by one replica")
            #expect(a.failed + a.dead + b.failed + b.dead == 0)
            #expect(try await Self.notAppliedOnce(first) == 0)
            #expect(try await first.maintenance.dump() == reference)
        }
    }

    @Test("A delivery group reaching two replicas at once is stored and applied once")
    func concurrentIngest() async throws {
        let bodies = Lifecycle.events(customers: 2)
        try await Self.withTwoReplicas { first, second in
            let deliveries = try bodies.map(EventFactory.delivery)
            let one = first.applier(.init()), other = second.applier(.init())
            async let a = one.ingest(deliveries.map(one.prepare), now: 1)
            // The other replica sees the same deliveries in the opposite order.
            async let b = other.ingest(deliveries.reversed().map(other.prepare), now: 1)
            let (x, y) = try await (a, b)
            let stored = x.outcomes.count { $0 != .duplicate } + y.outcomes.count { $0 != .duplicate }
            #expect(stored == bodies.count)
            #expect(x.pass.processed + y.pass.processed + x.queued + y.queued == bodies.count)
            #expect(try await first.applier(.init()).drain().processed == x.queued + y.queued)
            #expect(try await Self.notAppliedOnce(first) == 0)
        }
    }

    /// One customer's lifecycle stored through the first replica, and an applier on each replica
    /// (batches of 8, claims of a minute), for the claim tests.
    static func withClaimants(
        _ body: (_ bodies: [[UInt8]], _ first: PostgresApplier, _ second: PostgresApplier, _ store: PostgresLedgerStore) async throws -> Void
    ) async throws {
        let bodies = Lifecycle.events(customers: 1)
        #expect(bodies.count > 8, "more events than one claim")
        try await withTwoReplicas { first, second in
            _ = try await first.inbox.insert(try bodies.map(EventFactory.delivery))
            let configuration = ApplierConfiguration(batchSize: 8)
            try await body(
                bodies, first.postgresApplier(configuration, claimDuration: .seconds(60)),
                second.postgresApplier(configuration, claimDuration: .seconds(60)), first)
        }
    }

    static let t: Int64 = 1_800_000_000_000

    @Test("A replica stopped after claiming: its claims expire and another replica applies the events, once")
    func expiredClaimIsTakenOver() async throws {
        let reference = try await Self.sqliteReference(Lifecycle.events(customers: 1).map(EventFactory.delivery))
        try await Self.withClaimants { bodies, stopped, survivor, store in
            let t = Self.t
            let claim = try await stopped.claim(now: t)
            #expect(claim.count == 8)

            // The survivor applies everything else, and leaves the claimed events while the claim holds.
            let before = try await survivor.drain(now: { t }, progress: { _ in })
            #expect(before.processed == bodies.count - 8)
            #expect(try await survivor.drain(now: { t + 59_999 }, progress: { _ in }).processed == 0)

            // At expiry the survivor takes them over.
            let after = try await survivor.drain(now: { t + 60_000 }, progress: { _ in })
            #expect(after.processed == 8)

            // The stopped replica, resuming late, finds its claims gone and applies nothing.
            #expect(try await stopped.apply(claim, now: t + 60_001).processed == 0)
            #expect(try await Self.notAppliedOnce(store) == 0)
            #expect(try await store.maintenance.dump() == reference)
        }
    }

    @Test("A replica that applies within its claim applies its events, and no one else does")
    func claimHeldIsApplied() async throws {
        try await Self.withClaimants { bodies, claimer, other, store in
            let claim = try await claimer.claim(now: Self.t)
            #expect(try await claimer.apply(claim, now: Self.t + 1).processed == 8)
            #expect(try await other.drain(now: { Self.t + 120_000 }, progress: { _ in }).processed == bodies.count - 8)
            #expect(try await Self.notAppliedOnce(store) == 0)
        }
    }
}
