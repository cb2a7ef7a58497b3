import APITransport
import BillingCore
import BillingServer
import BillingStore
import Foundation
import GRDB
import Logging
import ServiceLifecycle
import StripeAPI
import StripeFake
import Testing

@Suite("Usage reported to Stripe Billing Meters: each record once")
struct UsageReportTests {
    @Test("Each pending record becomes one meter event: billingd's identifier, the customer, the quantity, the record's time; a second run sends nothing")
    func reportsOnce() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let alice = try await bed.customer(for: "user_a")
        let bob = try await bed.customer(for: "user_b")
        let first = try await bed.record("user_a", quantity: 3, at: bed.now - 120)
        let second = try await bed.record("user_a", quantity: 2, at: bed.now - 60)
        let third = try await bed.record("user_b", quantity: 7)
        let unmetered = try await bed.record("user_a", meter: "api_calls", quantity: 50)

        let summary = try await bed.reporter(at: bed.now).run()
        #expect(summary.outcome == "completed")
        #expect(summary.due == 3)
        #expect(summary.sent == 3)
        #expect(summary.reported == 3)
        #expect(summary.failed == 0)
        #expect(summary.allWent)
        #expect(summary.quantities == ["radars_created": 12])
        #expect(summary.backlog.pending == 0)

        let namespace = try await bed.namespace()
        #expect(MeterEventIdentifier.isNamespace(namespace))
        // Lanes (customer, meter) run side by side: order by billingd's id.
        func seq(_ identifier: String) -> Int64 { Int64(identifier.split(separator: "-")[2]) ?? -1 }
        let events = await bed.fake.meterEvents().sorted { seq($0.identifier) < seq($1.identifier) }
        #expect(events.map { seq($0.identifier) } == [first, second, third])
        for event in events {
            let parts = event.identifier.split(separator: "-")
            #expect(parts.count == 4 && parts[0] == "billingd" && parts[1] == namespace && parts[3].count == 8, "\(event.identifier)")
        }
        #expect(events.map(\.customer) == [alice, alice, bob])
        #expect(events.map(\.value) == [3, 2, 7])
        #expect(events.map(\.timestamp) == [bed.now - 120, bed.now - 60, bed.now])
        #expect(events.allSatisfy { $0.meter == bed.meter && $0.error == nil })
        let sent = try #require(await bed.harness.sentForms("POST", "/v1/billing/meter_events").first { $0["identifier"].map(seq) == first })
        #expect(sent["event_name"] == "radars_created")
        #expect(sent["payload[stripe_customer_id]"] == alice)
        #expect(sent["payload[value]"] == "3")
        #expect(sent["identifier"] == events[0].identifier)
        #expect(sent["timestamp"] == String(bed.now - 120))

        #expect(try await bed.row(first) == ReportRow(state: "reported", attempts: 1, nextAt: nil, error: nil, reportedAt: bed.now, customer: alice, inFlightSince: nil))
        #expect(try await bed.row(unmetered).state == nil, "a meter without stripe_meter reports nowhere")
        #expect(try await bed.stripeTotal(alice) == 5)
        #expect(try await bed.stripeTotal(bob) == 7)

        let again = try await bed.reporter(at: bed.now + 60).run()
        #expect(again.due == 0)
        #expect(again.sent == 0)
        #expect(await bed.fake.meterEvents().count == 3)
    }

    @Test("A user without a Stripe customer waits an hour for one (a Checkout just completing), then is skipped")
    func withoutCustomer() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let late = try await bed.record("user_late", quantity: 4)
        let free = try await bed.record("user_free", quantity: 1, recordedAt: bed.now - 3_600)

        let summary = try await bed.reporter(at: bed.now).run()
        #expect(summary.sent == 0)
        #expect(summary.waiting == 1)
        #expect(summary.skipped == 1)
        #expect(summary.allWent, "nothing to bill is not a failure")
        #expect(try await bed.row(free).state == "skipped")
        let waiting = try await bed.row(late)
        #expect(waiting.state == "pending")
        #expect(waiting.nextAt == bed.now + MeterEventPolicy.customerRecheck)
        #expect(waiting.error?.contains("no Stripe customer") == true)

        // The customer's webhook arrives; the next look finds it.
        let customer = try await bed.customer(for: "user_late")
        let later = try await bed.reporter(at: bed.now + MeterEventPolicy.customerRecheck).run()
        #expect(later.reported == 1)
        #expect(await bed.fake.meterEvents().map(\.customer) == [customer])
        #expect(try await bed.row(free).state == "skipped", "skipped is final")
    }

    @Test("A lost answer is sent again with the same identifier; Stripe refuses the copy as a duplicate, which counts as reported, once")
    func lostAnswer() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let customer = try await bed.customer(for: "user_a")
        let seq = try await bed.record("user_a", quantity: 5)

        let losing = bed.client(transport: AnswerLosingTransport(times: 1))
        let first = try await bed.reporter(at: bed.now, client: losing).run()
        #expect(first.failed == 1)
        #expect(!first.allWent)
        #expect(await bed.fake.meterEvents().count == 1, "Stripe got it; billingd does not know")
        let unknown = try await bed.row(seq)
        #expect(unknown.state == "failed")
        #expect(unknown.inFlightSince == bed.now)
        #expect(unknown.nextAt == bed.now + 60)
        #expect(unknown.error?.contains("transport failure") == true)

        let early = try await bed.reporter(at: bed.now + 30, client: losing).run()
        #expect(early.sent == 0, "not before its retry time")

        let second = try await bed.reporter(at: bed.now + 60, client: losing).run()
        #expect(second.reported == 1)
        #expect(second.duplicates == 1)
        #expect(second.allWent)
        let requests = await bed.fake.requests(matching: .method("POST", path: "/v1/billing/meter_events"))
        #expect(requests.count == 2)
        #expect(Set(requests.compactMap(\.idempotencyKey)).count == 2, "each attempt has its own Idempotency-Key; the identifier deduplicates")
        #expect(await bed.fake.meterEvents().count == 1)
        #expect(try await bed.stripeTotal(customer) == 5)
        let done = try await bed.row(seq)
        #expect(done.state == "reported")
        #expect(done.attempts == 2)
        #expect(done.inFlightSince == nil)
    }

    @Test("A ledger restored from a backup hands out a seq again: the new record is not mistaken for the reported one of the same seq")
    func seqReusedAfterRestore() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let customer = try await bed.customer(for: "user_a")
        let lostRecord = try await bed.record("user_a", quantity: 4, key: "radar-1")
        _ = try await bed.reporter(at: bed.now).run()
        // The backup was taken before that record: after the restore it is gone and its seq is free.
        try await bed.database.writer.write { db in
            try db.execute(sql: "DELETE FROM usageRecord WHERE seq = ?", arguments: [lostRecord])
            try db.execute(sql: "UPDATE sqlite_sequence SET seq = ? WHERE name = 'usageRecord'", arguments: [lostRecord - 1])
        }
        let reused = try await bed.record("user_a", quantity: 6, key: "radar-2")
        #expect(reused == lostRecord)
        let summary = try await bed.reporter(at: bed.now + 10).run()
        #expect(summary.reported == 1)
        #expect(summary.duplicates == 0)
        #expect(try await bed.stripeTotal(customer) == 10, "both records billed")
    }

    @Test("The client retries 429 and 5xx itself; past its retries the record waits 1, 2, 4 … minutes, gives up after 10 attempts, and --retry-failed re-queues it")
    func backoff() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_a")
        let seq = try await bed.record("user_a")

        await bed.fake.inject(.status(429), times: 2, matching: .method("POST", path: "/v1/billing/meter_events"))
        let retried = try await bed.reporter(at: bed.now, client: bed.client(maxRetries: 2)).run()
        #expect(retried.reported == 1)
        #expect(await bed.fake.requestCount(matching: .method("POST", path: "/v1/billing/meter_events")) == 3)

        let refused = try await bed.record("user_a")
        await bed.fake.inject(.status(400), times: 100, matching: .method("POST", path: "/v1/billing/meter_events"))
        var time = bed.now
        var waits: [Int64] = []
        for attempt in 1...MeterEventPolicy.maximumAttempts {
            let summary = try await bed.reporter(at: time).run()
            #expect(summary.sent == 1, "attempt \(attempt)")
            #expect(summary.failed == 1)
            let row = try await bed.row(refused)
            #expect(row.attempts == attempt)
            #expect(row.inFlightSince == nil, "a refusal proves nothing was created")
            guard let next = row.nextAt else {
                #expect(attempt == MeterEventPolicy.maximumAttempts)
                #expect(summary.gaveUp == 1)
                break
            }
            waits.append(next - time)
            time = next
        }
        #expect(waits == [60, 120, 240, 480, 960, 1_920, 3_600, 3_600, 3_600])
        let idle = try await bed.reporter(at: time + 86_400).run()
        #expect(idle.sent == 0)
        #expect(idle.backlog.failed == 1)

        await bed.fake.clearFaults()
        var options = UsageReporter.Options()
        options.retryFailed = true
        let requeued = try await bed.reporter(at: time + 600).run(options)
        #expect(requeued.requeued == 1)
        #expect(requeued.reported == 1)
        #expect(try await bed.row(refused).state == "reported")
        #expect(try await bed.row(seq).attempts == 1)
    }

    @Test("A record older than 35 days fails without a call; one ahead of the clock waits until Stripe would take it")
    func window() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_a")
        let old = try await bed.record("user_a", at: bed.now - 35 * 86_400 - 1)
        let ahead = try await bed.record("user_a", at: bed.now + 3_600)

        let summary = try await bed.reporter(at: bed.now).run()
        #expect(summary.sent == 0)
        #expect(summary.failed == 1)
        #expect(summary.gaveUp == 1)
        #expect(summary.waiting == 1)
        let failure = try #require(summary.failures.first)
        #expect(failure.seq == old)
        #expect(failure.error.contains("more than 35 days old"))
        #expect(failure.retryAt == nil)
        #expect(try await bed.row(old).state == "failed")
        #expect(try await bed.row(ahead).nextAt == bed.now + 3_600 - 299)
        #expect(await bed.fake.requestCount(matching: .path("/v1/billing/meter_events")) == 0)
    }

    @Test("An attempt that may have delivered, 23 hours on, is not resent (Stripe's 24-hour identifier window); --resend-unconfirmed sends it")
    func unconfirmed() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_a")
        let seq = try await bed.record("user_a", quantity: 2)
        await bed.fake.inject(.status(500), times: 1, matching: .method("POST", path: "/v1/billing/meter_events"))
        _ = try await bed.reporter(at: bed.now).run()
        #expect(try await bed.row(seq).inFlightSince == bed.now)

        let late = bed.now + MeterEventPolicy.identifierWindow
        let summary = try await bed.reporter(at: late).run()
        #expect(summary.sent == 0)
        #expect(summary.gaveUp == 1)
        #expect(summary.failures.first?.error.contains("24 hours") == true)
        #expect(try await bed.row(seq).nextAt == nil)

        var retry = UsageReporter.Options()
        retry.retryFailed = true
        #expect(try await bed.reporter(at: late + 1).run(retry).requeued == 0, "--retry-failed alone leaves it for a person to check")
        retry.resendUnconfirmed = true
        let resent = try await bed.reporter(at: late + 2).run(retry)
        #expect(resent.requeued == 1)
        #expect(resent.reported == 1)
        #expect(await bed.fake.meterEvents().filter { $0.error == nil }.count == 1)
    }

    @Test("Never two calls at once for one customer and meter; different customers go in parallel")
    func lanes() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        for user in ["user_a", "user_b", "user_c", "user_d"] {
            try await bed.customer(for: user)
            for index in 0..<5 { try await bed.record(user, quantity: Int64(index + 1)) }
        }
        await bed.fake.inject(.delay(.milliseconds(40)), times: 100, matching: .method("POST", path: "/v1/billing/meter_events"))
        let watch = ConcurrencyWatchingTransport()
        let summary = try await bed.reporter(at: bed.now, client: bed.client(transport: watch)).run()
        #expect(summary.reported == 20)
        #expect(watch.maxPerCustomer == 1)
        #expect(watch.maxTotal >= 3, "lanes run side by side (\(watch.maxTotal))")
        // Within a lane, records go in their order.
        let events = await bed.fake.meterEvents()
        for customer in Set(events.compactMap(\.customer)) {
            #expect(events.filter { $0.customer == customer }.map(\.value) == [1, 2, 3, 4, 5])
        }
    }

    @Test("A busy lane keeps at most laneDepth records waiting; the rest go in another pass of the same run")
    func laneDepth() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_busy")
        try await bed.customer(for: "user_calm")
        for index in 0..<7 { try await bed.record("user_busy", quantity: Int64(index + 1)) }
        try await bed.record("user_calm", quantity: 100)
        var options = UsageReporter.Options()
        options.laneDepth = 2
        let summary = try await bed.reporter(at: bed.now).run(options)
        #expect(summary.due == 8)
        #expect(summary.reported == 8)
        #expect(summary.backlog.pending == 0)
        let events = await bed.fake.meterEvents()
        let busy = events.filter { $0.value < 100 }
        #expect(busy.map(\.value) == [1, 2, 3, 4, 5, 6, 7])
    }

    @Test("A connected account's usage goes with Stripe-Account to that account's customer")
    func connectedAccount() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let account = "acct_1Connected"
        let meter = try await bed.fake.createBillingMeter(eventName: "radars_created", account: account)
        let customer = try await bed.customer(for: "user_c", account: account)
        try await bed.record("user_c", quantity: 9, scope: ServiceScope.test.account(account))
        try await bed.record("user_c", quantity: 1)

        let summary = try await bed.reporter(at: bed.now).run()
        #expect(summary.reported == 1)
        #expect(summary.skipped + summary.waiting == 1, "on the platform user_c has no customer")
        let sent = try #require(await bed.fake.requests(matching: .method("POST", path: "/v1/billing/meter_events")).first)
        #expect(sent.account == account)
        let events = await bed.fake.meterEvents(account: account)
        #expect(events.map(\.customer) == [customer])
        #expect(events.map(\.meter) == [meter])
    }

    @Test("A refused key stops the run and leaves every record as it was")
    func refusedKey() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_a")
        let seqs = [try await bed.record("user_a"), try await bed.record("user_a")]
        await bed.fake.inject(.expiredKey, times: 10, matching: .method("POST", path: "/v1/billing/meter_events"))
        await #expect(throws: UsageReporter.Failure.self) {
            _ = try await bed.reporter(at: bed.now).run()
        }
        for seq in seqs {
            #expect(try await bed.row(seq) == ReportRow(state: "pending", attempts: 0, nextAt: bed.now, error: nil, reportedAt: nil, customer: try await bed.row(seq).customer, inFlightSince: nil))
        }
        #expect(await bed.fake.requestCount(matching: .method("POST", path: "/v1/billing/meter_events")) == 1)
    }

    @Test("--dry-run sends nothing and changes nothing; a second reporter waits for the lease")
    func dryRunAndLease() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_a")
        let seq = try await bed.record("user_a")
        try await bed.record("user_nobody", recordedAt: bed.now - 7_200)
        let before = try await bed.row(seq)

        var dry = UsageReporter.Options()
        dry.dryRun = true
        let summary = try await bed.reporter(at: bed.now).run(dry)
        #expect(summary.dryRun)
        #expect(summary.sent == 1)
        #expect(summary.skipped == 1)
        #expect(summary.summary.contains("would send 1"))
        #expect(try await bed.row(seq) == before)
        #expect(await bed.fake.requestCount(matching: .path("/v1/billing/meter_events")) == 0)
        #expect(try await bed.database.metaValue("usage_meter_event_namespace") == nil)

        try await SQLiteReconcileRuns(database: bed.database).acquire(UsageReporter.leaseName, holder: "cron", ttl: 120, now: bed.now)
        await #expect(throws: LeaseHeld.self) {
            _ = try await bed.reporter(at: bed.now).run()
        }
    }

    @Test("serve's scheduler reports at start and on its interval, and ends on a graceful shutdown")
    func scheduler() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_a")
        let first = try await bed.record("user_a")
        var logger = Logger(label: "test.scheduler")
        logger.logLevel = .critical
        let scheduler = UsageReportScheduler(reporter: bed.reporter(at: bed.now), interval: .milliseconds(100), logger: logger)
        let group = ServiceGroup(configuration: .init(services: [.init(service: scheduler)], logger: logger))
        let running = Task { try await group.run() }
        // Progress, not speed: a full run on two busy cores has needed more than 10 s.
        func reported(_ seq: Int64) async throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if try await bed.row(seq).state == "reported" { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
        #expect(try await reported(first))
        let second = try await bed.record("user_a")
        #expect(try await reported(second))
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(await bed.fake.meterEvents().count == 2)
    }

    @Test("Counters and backlog gauges reach /metrics")
    func metrics() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.customer(for: "user_a")
        try await bed.record("user_a")
        try await bed.record("user_a", at: bed.now - 40 * 86_400)
        try await bed.record("user_x", recordedAt: bed.now - 7_200)
        let metrics = BillingMetrics()
        _ = try await bed.reporter(at: bed.now, metrics: metrics).run()
        let text = String(decoding: metrics.render(), as: UTF8.self)
        #expect(text.contains(#"billingd_usage_reports_total{outcome="reported"} 1"#))
        #expect(text.contains(#"billingd_usage_reports_total{outcome="given_up"} 1"#))
        #expect(text.contains(#"billingd_usage_reports_total{outcome="skipped"} 1"#))
        #expect(text.contains("billingd_usage_report_failed_records 1"))
        #expect(text.contains("billingd_usage_report_pending_records 0"))
        #expect(text.contains("billingd_usage_report_last_success_timestamp_seconds \(bed.now)"))
    }
}

@Suite("What Stripe's answers to a meter event mean")
struct MeterEventAnswerTests {
    private static func error(_ kind: StripeError.Kind, status: Int? = nil, code: String? = nil, param: String? = nil, message: String = "m") -> StripeError {
        StripeError(kind: kind, status: status, type: "invalid_request_error", code: code, param: param, message: message, method: .post, path: "/v1/billing/meter_events")
    }

    @Test("A duplicate identifier is delivered: v1's message-only 400 and v2's duplicate_meter_event")
    func duplicates() {
        #expect(UsageReporter.outcome(of: Self.error(.invalidRequest, status: 400, message: "An event already exists with identifier billingd-x-1.")) == .duplicate)
        #expect(UsageReporter.outcome(of: Self.error(.invalidRequest, status: 400, code: "duplicate_meter_event", message: "already submitted")) == .duplicate)
    }

    @Test("No answer, a 5xx, a key conflict: may exist; a 4xx or 429: not created; a timestamp out of the window: final")
    func others() {
        for kind in [StripeError.Kind.transport, .server, .cancelled, .idempotency] {
            guard case .unknown = UsageReporter.outcome(of: Self.error(kind)) else {
                Issue.record("\(kind) should be unknown")
                continue
            }
        }
        for (kind, status) in [(StripeError.Kind.rateLimited, 429), (.invalidRequest, 400), (.notFound, 404), (.api, 409)] {
            #expect(UsageReporter.outcome(of: Self.error(kind, status: status)) == .refused(Self.error(kind, status: status).description, final: false))
        }
        let old = Self.error(.invalidRequest, status: 400, code: "timestamp_too_far_in_past", param: "timestamp")
        #expect(UsageReporter.outcome(of: old) == .refused(old.description, final: true))
        let ahead = Self.error(.invalidRequest, status: 400, code: "timestamp_in_future", param: "timestamp")
        #expect(UsageReporter.outcome(of: ahead) == .refused(ahead.description, final: false), "our clock may be behind; later it fits")
    }
}

@Suite("reconcile --kinds usage: Stripe's meter summaries against the usage billingd reported")
struct UsageReconcileTests {
    private func reconcile(_ bed: UsageReportBed, at time: Int64) async throws -> UsageReconcileReport {
        try #require(try await reconcileRun(bed, at: time).usage)
    }

    private func reconcileRun(_ bed: UsageReportBed, at time: Int64) async throws -> ReconcileReport {
        var logger = Logger(label: "test.reconcile")
        logger.logLevel = .critical
        let reconciler = Reconciler(
            store: bed.ledger.store, client: bed.client(), livemode: false, logger: logger, inbox: SQLiteInbox(database: bed.database),
            applier: SQLiteApplier(database: bed.database),
            catalog: bed.catalog, now: { time })
        var options = Reconciler.Options()
        options.kinds = [.usage]
        return try await reconciler.run(options)
    }

    @Test("Per customer, meter and period (the current and the one before); drift either way is reported, never repaired; a missing meter is named")
    func compare() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        let alice = try await bed.customer(for: "user_a")
        let bob = try await bed.customer(for: "user_b")
        try await bed.record("user_a", quantity: 3)
        try await bed.record("user_a", quantity: 4)
        try await bed.record("user_b", quantity: 5)
        _ = try await bed.reporter(at: bed.now).run()
        let later = bed.now + 3_600

        let clean = try await reconcile(bed, at: later)
        #expect(clean.compared == 4, "two customers, two periods each")
        #expect(clean.matched == 4)
        #expect(clean.drift == 0)

        // Stripe counts more for alice: an event from elsewhere.
        try await bed.fake.recordMeterEvent(eventName: "radars_created", customer: alice, value: 10, timestamp: bed.now - 30)
        // Stripe counts less for bob: a record billingd holds as reported that Stripe never counted.
        let lost = try await bed.record("user_b", quantity: 2)
        // A record reported moments ago: Stripe's summaries may lag, so not drift.
        try await bed.customer(for: "user_c")
        let fresh = try await bed.record("user_c", quantity: 1)
        // A record whose Stripe meter does not exist.
        let ghost = try await bed.record("user_a", quantity: 1)
        try await bed.database.writer.write { db in
            try db.execute(sql: "UPDATE usageRecord SET reportState = 'reported', stripeCustomer = ?, reportedAt = ? WHERE seq = ?", arguments: [bob, bed.now, lost])
            try db.execute(sql: "UPDATE usageRecord SET reportState = 'reported', stripeCustomer = (SELECT stripeCustomer FROM usageRecord WHERE user = 'user_a' LIMIT 1), reportedAt = ? WHERE seq = ?", arguments: [later - 60, fresh])
            try db.execute(sql: "UPDATE usageRecord SET stripeMeter = 'ghost_meter', reportState = 'reported', stripeCustomer = ? WHERE seq = ?", arguments: [alice, ghost])
        }
        let posts = await bed.fake.requestCount(matching: .method("POST"))

        let drifted = try await reconcile(bed, at: later)
        #expect(drifted.stripeHigher == 1)
        #expect(drifted.stripeLower == 1)
        #expect(drifted.settling == 1)
        #expect(drifted.missingMeters == ["ghost_meter"])
        #expect(drifted.drift == 3)
        let higher = try #require(drifted.examples.first { $0.kind == "stripe_higher" })
        #expect(higher.customer == alice)
        #expect(higher.user == "user_a")
        #expect(higher.stripe == 17)
        #expect(higher.reported == 7)
        let lower = try #require(drifted.examples.first { $0.kind == "stripe_lower" })
        #expect(lower.customer == bob)
        #expect(lower.stripe == 5)
        #expect(lower.reported == 7)
        #expect(drifted.note.contains("never sends or cancels meter events"))
        #expect(await bed.fake.requestCount(matching: .method("POST")) == posts, "nothing repaired: no meter event sent")
        #expect(await bed.fake.meterEvents().count == 4)
    }

    @Test("Without reported usage the kind makes no Stripe call; the run's summary shows the usage line")
    func nothingToCompare() async throws {
        let bed = try await UsageReportBed.start()
        defer { Task { await bed.stop() } }
        try await bed.record("user_free", recordedAt: bed.now - 7_200)
        let before = await bed.fake.requestCount()
        let report = try await reconcileRun(bed, at: bed.now)
        #expect(report.usage?.compared == 0)
        #expect(await bed.fake.requestCount() == before)
        #expect(report.summary.contains("usage: 0 customer periods compared"), "\(report.summary)")
    }
}
