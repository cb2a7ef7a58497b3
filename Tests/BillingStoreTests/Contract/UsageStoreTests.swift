import BillingCore
import BillingStore
import BillingTestSupport
import Testing

@Suite("Usage records, counters, gauges and the report queue, on both backends")
struct UsageStoreTests {
    static let radars = UsageMeter(id: "radars", kind: .counter, limit: "radars", enforcement: .hard, stripeMeter: "radar_created")
    static let calls = UsageMeter(id: "api_calls", kind: .counter, limit: "api_calls", enforcement: .soft)
    static let seats = UsageMeter(id: "seats", kind: .gauge, limit: "seats", enforcement: .hard)
    static let january = UsagePeriod(start: 1_767_225_600, end: 1_769_904_000)
    static let february = UsagePeriod(start: 1_769_904_000, end: 1_772_323_200)

    static func input(
        _ key: String, quantity: Int64 = 1, at timestamp: Int64 = january.start + 60, meter: UsageMeter = radars,
        period: UsagePeriod = january, limit: Int64 = 5, user: String = "user_1", scope: ServiceScope = .test
    ) -> UsageRecordInput {
        UsageRecordInput(
            scope: scope, user: user, meter: meter, quantity: quantity, timestamp: timestamp, idempotencyKey: key, period: period,
            limit: .count(limit))
    }

    @Test("Consume up to a hard limit then refuse; a key counts once; late records count in their own period; gauges set", arguments: StoreBackend.allCases)
    func recording(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let usage = stores[0].usage
            let outcomes = try await usage.apply(
                [
                    .consume(Self.input("k1", quantity: 3)),
                    .consume(Self.input("k2", quantity: 3)),  // 3 + 3 > 5: refused
                    .consume(Self.input("k3", quantity: 2)),
                    .consume(Self.input("k1", quantity: 3)),  // the same key: counted once
                    .record(Self.input("k4", quantity: 4)),  // usage that happened is never refused
                    .record(Self.input("k5", quantity: 7, at: Self.january.start - 10)),  // December's
                    .consume(Self.input("k6", meter: Self.calls)),
                    .setGauge(scope: .test, user: "user_1", meter: Self.seats, value: 4, limit: .count(3)),
                ], now: 1_767_225_700_000)
            #expect(outcomes.map(\.state.used) == [3, 3, 5, 5, 9, 9, 1, 4])
            #expect(outcomes[1] == .refused(UsageMeterState(meter: Self.radars, used: 3, limit: .count(5), period: Self.january)))
            #expect(outcomes[3] == .recorded(UsageMeterState(meter: Self.radars, used: 5, limit: .count(5), period: Self.january), duplicate: true))
            #expect(outcomes[6] == .recorded(
                UsageMeterState(meter: Self.calls, used: 1, limit: .count(5), period: Self.january), duplicate: false))

            let states = try await usage.states(
                scope: .test, user: "user_1",
                meters: [(Self.radars, Self.january, .count(5)), (Self.seats, nil, .count(3)), (Self.radars, Self.february, .count(5))])
            #expect(states.map(\.used) == [9, 4, 0])
            // A new period starts from zero; the records of the old one stay.
            let february = try await usage.apply([.consume(Self.input("k7", at: Self.february.start, period: Self.february))], now: 0)
            #expect(february.map(\.state.used) == [1])
            let january = try await usage.states(scope: .test, user: "user_1", meters: [(Self.radars, Self.january, .count(5))])
            #expect(january.map(\.used) == [9])
            // Scopes and users are apart.
            let other = try await usage.states(
                scope: ServiceScope(livemode: true), user: "user_1", meters: [(Self.radars, Self.january, .count(5))])
            #expect(other.map(\.used) == [0])
        }
    }

    @Test("A counter's total over any span adds the records whose time falls in it, across the periods they were recorded in, for that scope, user and meter only", arguments: StoreBackend.allCases)
    func totalOverSpan(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let usage = stores[0].usage
            let start = Self.january.end - 100
            _ = try await usage.apply(
                [
                    .record(Self.input("a", quantity: 2, at: start - 1)),  // before the span
                    .record(Self.input("b", quantity: 3, at: start)),  // its first second
                    .record(Self.input("c", quantity: 4, at: Self.february.start + 5, period: Self.february)),  // another period
                    .record(Self.input("d", quantity: 5, at: start + 200, period: Self.february)),  // its end: the next span's
                    .record(Self.input("e", quantity: 6, at: start + 10, meter: Self.calls)),
                    .record(Self.input("f", quantity: 7, at: start + 10, user: "user_2")),
                    .record(Self.input("g", quantity: 8, at: start + 10, scope: ServiceScope(livemode: true))),
                ], now: 1_767_225_700_000)
            let span = UsagePeriod(start: start, end: start + 200)
            #expect(try await usage.total(scope: .test, user: "user_1", meter: "radars", period: span) == 7)
            #expect(try await usage.total(scope: .test, user: "user_1", meter: "api_calls", period: span) == 6)
            #expect(try await usage.total(scope: .test, user: "user_2", meter: "radars", period: span) == 7)
            #expect(try await usage.total(scope: ServiceScope(livemode: true), user: "user_1", meter: "radars", period: span) == 8)
            #expect(try await usage.total(scope: .test, user: "user_3", meter: "radars", period: span) == 0)
        }
    }

    @Test("A total past the ceiling is refused without a trap, late records too; a refused batch is undone whole, the others kept", arguments: StoreBackend.allCases)
    func ceilingAndAtomicBatches(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let usage = stores[0].usage
            let ceiling = UsageMeter.maximumTotal
            let results = try await usage.apply(
                batches: [
                    [.record(Self.input("big", quantity: ceiling - 1, meter: Self.calls))],
                    // Fits, then passes the ceiling: neither is kept.
                    [.record(Self.input("fits", quantity: 1, meter: Self.calls)), .record(Self.input("over", quantity: 2, meter: Self.calls))],
                    // Would overflow Int64: refused, not a trap.
                    [.record(Self.input("max", quantity: .max, meter: Self.calls))],
                    // Another user's batch in the same transaction is kept.
                    [.record(Self.input("other", quantity: 5, meter: Self.calls, user: "user_2")), .consume(Self.input("other-2", user: "user_2"))],
                    // Late records (December's) are held to the ceiling of the span beside the period.
                    [.record(Self.input("late", quantity: ceiling, at: Self.january.start - 10, meter: Self.calls))],
                    [.record(Self.input("late-2", quantity: 1, at: Self.january.start - 20, meter: Self.calls))],
                ], now: 1_767_225_700_000)
            #expect(try results[0].get().map(\.state.used) == [ceiling - 1])
            #expect(results[1] == .failure(UsageRefusal(.totalCeiling(used: ceiling), meter: "api_calls", quantity: 2, idempotencyKey: "over", index: 1)))
            #expect(results[2] == .failure(UsageRefusal(.totalCeiling(used: ceiling - 1), meter: "api_calls", quantity: .max, idempotencyKey: "max")))
            #expect(try results[3].get().map(\.state.used) == [5, 1])
            #expect(try results[4].get().count == 1)
            #expect(results[5] == .failure(UsageRefusal(.totalCeiling(used: ceiling), meter: "api_calls", quantity: 1, idempotencyKey: "late-2")))

            let states = try await usage.states(scope: .test, user: "user_1", meters: [(Self.calls, Self.january, .count(5))])
            #expect(states.map(\.used) == [ceiling - 1], "the refused batch's first record was undone")
            // "fits" was undone with its batch: the key is free, and counts now.
            #expect(try await usage.apply([.record(Self.input("fits", quantity: 1, meter: Self.calls))], now: 0).map(\.state.used) == [ceiling])
            // apply(_:) throws the refusal and writes nothing of its operations.
            await #expect(throws: UsageRefusal.self) {
                try await usage.apply([.record(Self.input("x", quantity: 1, meter: Self.radars)), .record(Self.input("y", quantity: 1, meter: Self.calls))], now: 0)
            }
            #expect(try await usage.states(scope: .test, user: "user_1", meters: [(Self.radars, Self.january, .count(5))]).map(\.used) == [0])
        }
    }

    @Test("Many batches of several records in one call (more than PostgreSQL's savepoints per transaction): each whole or not at all, in order", arguments: StoreBackend.allCases)
    func manyBatches(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let batches: [[UsageOperation]] = (0..<80).map { index in
                let user = "user_\(index)"
                // Every seventh batch's second record passes the ceiling: that batch is undone.
                let second: Int64 = index % 7 == 3 ? UsageMeter.maximumTotal : 2
                return [.record(Self.input("a\(index)", quantity: 1, meter: Self.calls, user: user)),
                        .record(Self.input("b\(index)", quantity: second, meter: Self.calls, user: user))]
            }
            let results = try await stores[0].usage.apply(batches: batches, now: 0)
            #expect(results.count == 80)
            for (index, result) in results.enumerated() {
                let used = try await stores[0].usage.states(scope: .test, user: "user_\(index)", meters: [(Self.calls, Self.january, .count(5))])
                if index % 7 == 3 {
                    #expect(throws: UsageRefusal.self) { try result.get() }
                    #expect(used.map(\.used) == [0], "batch \(index) undone whole")
                } else {
                    #expect(try result.get().map(\.state.used) == [1, 3])
                    #expect(used.map(\.used) == [3])
                }
            }
        }
    }

    @Test("A key recorded before with another quantity is refused; with the same quantity it is a duplicate", arguments: StoreBackend.allCases)
    func idempotencyKeyReused(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let usage = stores[0].usage
            _ = try await usage.apply([.record(Self.input("k", quantity: 2))], now: 0)
            let results = try await usage.apply(
                batches: [[.consume(Self.input("k", quantity: 3))], [.record(Self.input("k", quantity: 2))]], now: 0)
            #expect(results[0] == .failure(UsageRefusal(.idempotencyKeyReused(recordedQuantity: 2), meter: "radars", quantity: 3, idempotencyKey: "k")))
            #expect(try results[1].get() == [.recorded(UsageMeterState(meter: Self.radars, used: 2, limit: .count(5), period: Self.january), duplicate: true)])
        }
    }

    /// Ten batches of four consumes, five on each of two replicas (two stores over one ledger),
    /// held at a barrier until all ten are ready, so that they race rather than run in turn.
    @Test("Concurrent consumes on two replicas around a hard limit allow exactly the limit", arguments: StoreBackend.allCases)
    func concurrentConsumes(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend, replicas: 2) { stores in
            let barrier = AsyncBarrier(parties: 10)
            let outcomes = try await withThrowingTaskGroup(of: [UsageOutcome].self) { group in
                for batch in 0..<10 {
                    let usage = stores[batch % 2].usage
                    group.addTask {
                        await barrier.arriveAndWait()
                        return try await usage.apply((0..<4).map { .consume(Self.input("b\(batch)-\($0)", limit: 25)) }, now: 0)
                    }
                }
                var all: [UsageOutcome] = []
                for try await outcomes in group { all += outcomes }
                return all
            }
            let recorded = outcomes.filter { if case .recorded = $0 { true } else { false } }
            #expect(recorded.count == 25)
            #expect(outcomes.count - recorded.count == 15)
            let state = try await stores[0].usage.states(scope: .test, user: "user_1", meters: [(Self.radars, Self.january, .count(25))])
            #expect(state.map(\.used) == [25])
        }
    }

    @Test("The report queue: due in order, claimed, attempted, given up and re-queued; backlog, tally and what was sent", arguments: StoreBackend.allCases)
    func reportQueue(_ backend: StoreBackend) async throws {
        try await withRoleStores(backend) { stores in
            let reports = stores[0].usageReports
            let namespace = try await reports.meterEventNamespace()
            #expect(try await reports.meterEventNamespace() == namespace)
            // Accepted at 1,767,225,700 s: due then.
            _ = try await stores[0].usage.apply(
                (1...3).map { .record(Self.input("r\($0)", quantity: Int64($0))) } + [.record(Self.input("c1", meter: Self.calls))],
                now: 1_767_225_700_000)
            let now: Int64 = 1_767_226_000
            let due = try await reports.dueReports(livemode: false, now: now, after: nil, limit: 2)
            #expect(due.map(\.idempotencyKey) == ["r1", "r2"])
            #expect(due.first?.stripeMeter == "radar_created")
            #expect(due.first?.recordedAt == 1_767_225_700)
            #expect(due.first?.state == .pending)
            let rest = try await reports.dueReports(
                livemode: false, now: now, after: UsageReportCursor(nextAt: due[1].nextAt, seq: due[1].seq), limit: 10)
            #expect(rest.map(\.idempotencyKey) == ["r3"])
            #expect(try await reports.dueReports(livemode: true, now: now, after: nil, limit: 10).isEmpty)

            try await reports.updateReports([
                .claim(seq: due[0].seq, customer: "cus_1", at: now),
                .attempted(seq: due[0].seq, attempts: 1, next: .init(state: .reported, nextAt: nil, error: nil, inFlightSince: nil), at: now),
                .claim(seq: due[1].seq, customer: "cus_1", at: now),
                .attempted(seq: due[1].seq, attempts: 10, next: .init(state: .failed, nextAt: nil, error: "gave up", inFlightSince: now), at: now),
                .wait(seq: rest[0].seq, until: now + 3600, note: "no customer yet"),
            ])
            var backlog = UsageReportBacklog()
            backlog.pending = 1
            backlog.failed = 1
            backlog.oldestRecordedAt = 1_767_225_700
            #expect(try await reports.reportBacklog(livemode: false) == backlog)
            let tally = try await reports.reportTally(scope: .test, user: "user_1", meter: "radars", period: Self.january)
            #expect(tally.records == [.reported: 1, .failed: 1, .pending: 1])
            #expect(tally.quantities == [.reported: 1, .failed: 2, .pending: 3])

            let keys = try await reports.reportedUsageKeys(livemode: false, account: nil, since: Self.january.start)
            #expect(keys == [ReportedUsageKey(scope: .test, user: "user_1", meter: "radars", stripeMeter: "radar_created", customer: "cus_1")])
            #expect(try await reports.reportedUsageKeys(livemode: false, account: "acct_x", since: Self.january.start).isEmpty)
            var sent = ReportedUsage()
            sent.reported = 1
            sent.unreported = 2
            sent.lastReportedAt = now
            sent.inFlight = 1
            #expect(try await reports.reportedUsage(keys[0], span: Self.january) == sent)

            // Unconfirmed inside Stripe's window: re-queued; past it, only when asked.
            #expect(try await reports.requeueFailed(livemode: false, resendUnconfirmed: false, now: now + 24 * 3600) == 0)
            #expect(try await reports.requeueFailed(livemode: false, resendUnconfirmed: true, now: now + 24 * 3600) == 1)
            let requeued = try await reports.dueReports(livemode: false, now: now + 24 * 3600, after: nil, limit: 10)
            #expect(requeued.map(\.idempotencyKey) == ["r3", "r2"])
            let again = try #require(requeued.last)
            #expect(again.attempts == 0 && again.inFlightSince == nil && again.state == .pending)
            #expect(again.stripeCustomer == "cus_1")
        }
    }
}
