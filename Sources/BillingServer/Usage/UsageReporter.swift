import APITransport
import BillingCore
import BillingStore
import Foundation
import Logging
import StripeAPI

/// Reports usage records of meters with a `stripe_meter` to Stripe Billing Meters, one meter
/// event per record (`POST /v1/billing/meter_events`), each counted exactly once.
///
/// The rule it keeps: a record is marked `reported` only after Stripe answered, and every attempt
/// for a record carries the same `identifier` (``MeterEventIdentifier``), so a record whose answer
/// was lost — a timeout, a 5xx, a crash between the call and the write — is simply sent again and
/// Stripe refuses the copy as a duplicate, which counts as delivered. Before any call the record
/// is marked in flight, so that a resend is never made once Stripe's 24-hour identifier window
/// may have passed (``MeterEventPolicy``).
///
/// Calls go through the shared rate limiter at bulk priority, several at a time but never two for
/// one (customer, meter): Stripe allows one concurrent call per customer per meter. A run holds
/// the `usage-report` lease, so `serve`'s schedule and a `billingd usage report` never overlap.
public struct UsageReporter: Sendable {
    public struct Options: Sendable {
        /// Look and count only: no call, no write.
        public var dryRun = false
        /// Calls in flight at once, each for a different (customer, meter).
        public var concurrency = 16
        /// Records read from the ledger at a time.
        public var pageSize = 500
        /// Records waiting at most in one lane (customer, meter), which goes one call at a time;
        /// more are left for another pass, so that one busy customer does not hold up the rest.
        public var laneDepth = 100
        /// Re-queue records given up on first.
        public var retryFailed = false
        /// With ``retryFailed``: also those an unanswered attempt may have delivered more than
        /// 23 hours ago (after checking Stripe's summaries).
        public var resendUnconfirmed = false
        /// Failures kept in the summary.
        public var examples = 10

        public init() {}
    }

    /// A run that could not complete; its summary holds what was done.
    public struct Failure: Error, CustomStringConvertible {
        public let summary: UsageReportSummary
        public let underlying: any Error
        public var description: String { "usage report could not complete: \(underlying)" }
    }

    public static let leaseName = "usage-report"
    static let leaseTTL: Int64 = 120
    /// Results are written at least this often, and every this many.
    static let flushInterval: Duration = .milliseconds(500)
    static let flushCount = 256
    static let maximumPasses = 20

    let usage: any UsageReportStore
    let users: any UserLedgerStore
    let runs: any ReconcileRunStore
    let client: StripeClient
    let livemode: Bool
    let logger: Logger
    let metrics: BillingMetrics?
    let holder: String
    let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - livemode: the key's mode; records of the other mode are left alone.
    ///   - now: Unix seconds; tests move it.
    public init(
        store: any LedgerStore, client: StripeClient, livemode: Bool, logger: Logger, metrics: BillingMetrics? = nil,
        holder: String = Reconciler.defaultHolder, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        usage = store.usageReports
        users = store.users
        runs = store.reconcileRuns
        self.client = client
        self.livemode = livemode
        self.logger = logger
        self.metrics = metrics
        self.holder = holder
        self.now = now
    }

    /// Reports what is due. Throws ``LeaseHeld`` (nothing done) when another run
    /// holds the lease, and ``Failure`` when the run could not complete.
    /// - Parameter shouldStop: asked between records; true stops sending (a graceful shutdown),
    ///   and the calls in flight finish and are recorded.
    public func run(_ options: Options = Options(), shouldStop: @escaping @Sendable () -> Bool = { false }) async throws -> UsageReportSummary {
        var summary = UsageReportSummary()
        summary.dryRun = options.dryRun
        summary.livemode = livemode
        summary.startedAt = now()
        if options.dryRun {
            try await walk(options, into: &summary, lease: nil, shouldStop: shouldStop)
            summary.outcome = "completed"
            summary.finishedAt = now()
            try await readBacklog(into: &summary)
            return summary
        }

        let lease = try await LeaseWatch.hold(Self.leaseName, runs: runs, holder: holder, ttl: Self.leaseTTL, now: now)
        defer { lease.stopRenewing() }
        var failure: (any Error)?
        do {
            if options.retryFailed {
                summary.requeued = try await usage.requeueFailed(livemode: livemode, resendUnconfirmed: options.resendUnconfirmed, now: now())
            }
            // Another pass while busy lanes left records for later; each pass sends at least
            // what those lanes held, and the number of passes is bounded.
            var passes = 0
            while try await walk(options, into: &summary, lease: lease, shouldStop: shouldStop) > 0, summary.error == nil, !shouldStop() {
                passes += 1
                if passes >= Self.maximumPasses { break }
            }
        } catch {
            failure = error
        }
        try? await runs.release(Self.leaseName, holder: holder)
        summary.finishedAt = now()
        if let failure {
            summary.outcome = "failed"
            summary.error = summary.error ?? "\(failure)"
        } else if summary.error != nil {
            summary.outcome = "failed"
        } else {
            summary.outcome = shouldStop() ? "stopped" : "completed"
        }
        try? await readBacklog(into: &summary)
        publish(summary)
        let metadata: Logger.Metadata = [
            "due": "\(summary.due)", "sent": "\(summary.sent)", "reported": "\(summary.reported)", "duplicates": "\(summary.duplicates)",
            "failed": "\(summary.failed)", "skipped": "\(summary.skipped)", "pending": "\(summary.backlog.pending)",
        ]
        if summary.outcome == "failed" {
            logger.error("usage report failed: \(summary.error ?? "")", metadata: metadata)
            throw Failure(summary: summary, underlying: failure ?? UsageReportError.stopped(summary.error ?? ""))
        }
        if summary.due > 0 || summary.requeued > 0 {
            logger.log(level: summary.failed > 0 ? .warning : .info, "usage report \(summary.outcome)", metadata: metadata)
        }
        return summary
    }

    // MARK: - The walk

    /// One record to send, with what every attempt of it carries.
    struct Job: Sendable {
        let record: DueUsageReport
        let customer: String
        let identifier: String
    }

    /// Records sent one after another: one Stripe customer on one meter, in one account.
    struct Lane: Hashable, Sendable {
        let account: String
        let customer: String
        let stripeMeter: String
    }

    /// One finished call.
    struct Attempt: Sendable {
        let job: Job
        let lane: Lane
        let sentAt: Int64
        let result: Result<Void, StripeError>
    }

    /// Reads due records page by page and sends them, lanes in parallel, each lane in order.
    /// - Returns: how many due records were left for another pass (their lane was full).
    @discardableResult
    private func walk(_ options: Options, into summary: inout UsageReportSummary, lease: LeaseWatch?, shouldStop: @escaping @Sendable () -> Bool) async throws -> Int {
        let namespace = options.dryRun ? "dry-run" : try await usage.meterEventNamespace()
        let runNow = now()
        var customers: [ServiceScope: [String: String?]] = [:]
        var lanes: [Lane: [Job]] = [:]
        var ready: [Lane] = []
        var active: Set<Lane> = []
        var queued = 0
        var cursor: UsageReportCursor?
        var exhausted = false
        var updates: [UsageReportUpdate] = []
        var lastFlush = ContinuousClock.now
        var stopping = false
        var deferred = 0

        func flush() async throws {
            guard !updates.isEmpty else { return }
            if !options.dryRun { try await usage.updateReports(updates) }
            updates.removeAll(keepingCapacity: true)
            lastFlush = .now
        }

        try await withThrowingTaskGroup(of: Attempt.self) { group in
            do {
                while true {
                    if !stopping, shouldStop() { stopping = true }
                    if !stopping, !exhausted, queued < options.pageSize {
                        try lease?.checkpoint()
                        let page = try await usage.dueReports(livemode: livemode, now: runNow, after: cursor, limit: options.pageSize)
                        exhausted = page.count < options.pageSize
                        if let last = page.last { cursor = UsageReportCursor(nextAt: last.nextAt, seq: last.seq) }
                        var claims: [UsageReportUpdate] = []
                        for record in page {
                            summary.due += 1
                            let now = now()
                            guard let customer = try await triage(record, now: now, customers: &customers, updates: &updates, summary: &summary, options: options) else { continue }
                            if options.dryRun {
                                summary.sent += 1
                                continue
                            }
                            let lane = Lane(account: record.scope.account, customer: customer, stripeMeter: record.stripeMeter)
                            if lanes[lane, default: []].count >= options.laneDepth {
                                summary.due -= 1
                                deferred += 1
                                continue
                            }
                            let job = Job(record: record, customer: customer, identifier: Self.identifier(of: record, namespace: namespace))
                            claims.append(.claim(seq: record.seq, customer: customer, at: now))
                            if lanes[lane, default: []].isEmpty, !active.contains(lane) { ready.append(lane) }
                            lanes[lane, default: []].append(job)
                            queued += 1
                        }
                        // In flight before the first call: a crash from here on leaves a trace.
                        try await usage.updateReports(claims)
                        if options.dryRun { try await flush() }
                        continue
                    }
                    while !stopping, active.count < options.concurrency, !ready.isEmpty {
                        let lane = ready.removeFirst()
                        guard var jobs = lanes[lane], !jobs.isEmpty else { continue }
                        let job = jobs.removeFirst()
                        lanes[lane] = jobs
                        queued -= 1
                        active.insert(lane)
                        summary.sent += 1
                        group.addTask { await self.send(job, lane: lane) }
                    }
                    if active.isEmpty, stopping || exhausted { break }
                    guard !active.isEmpty, let attempt = try await group.next() else { continue }
                    active.remove(attempt.lane)
                    if record(attempt, updates: &updates, summary: &summary, options: options) { stopping = true }
                    if let jobs = lanes[attempt.lane], !jobs.isEmpty { ready.append(attempt.lane) }
                    if updates.count >= Self.flushCount || lastFlush.duration(to: .now) >= Self.flushInterval { try await flush() }
                }
            } catch {
                // Calls in flight still finish and are recorded: their answers are real.
                stopping = true
                while let attempt = try? await group.next() {
                    _ = record(attempt, updates: &updates, summary: &summary, options: options)
                }
                releaseUnsent(lanes, updates: &updates)
                try? await flush()
                throw error
            }
            releaseUnsent(lanes, updates: &updates)
            try await flush()
        }
        return deferred
    }

    /// Decides a due record: the customer to send it to, or nil with the record waiting, closed or
    /// skipped (in `updates`).
    private func triage(
        _ record: DueUsageReport, now: Int64, customers: inout [ServiceScope: [String: String?]], updates: inout [UsageReportUpdate],
        summary: inout UsageReportSummary, options: Options
    ) async throws -> String? {
        var decision = MeterEventPolicy.decide(timestamp: record.timestamp, inFlightSince: record.inFlightSince, now: now)
        var customer = record.stripeCustomer
        if decision == .send, customer == nil {
            if customers[record.scope]?[record.user] == nil {
                customers[record.scope, default: [:]][record.user] = .some(try await users.customers(of: record.user, in: record.scope).first?.id)
            }
            customer = customers[record.scope]?[record.user] ?? nil
            if customer == nil { decision = MeterEventPolicy.withoutCustomer(recordedAt: record.recordedAt, now: now) }
        }
        switch decision {
        case .send:
            return customer
        case .wait(let hold, let until):
            summary.waiting += 1
            updates.append(.wait(seq: record.seq, until: until, note: Self.message(hold)))
        case .giveUp(.noCustomer):
            summary.skipped += 1
            updates.append(.close(seq: record.seq, state: .skipped, error: Self.message(.noCustomer)))
            metrics?.count("billingd_usage_reports_total", dimensions: [("outcome", "skipped")])
        case .giveUp(let hold):
            summary.failed += 1
            summary.gaveUp += 1
            let message = Self.message(hold)
            updates.append(.close(seq: record.seq, state: .failed, error: message))
            summary.noteFailure(Self.failure(record, customer: customer, error: message, retryAt: nil), limit: options.examples)
            metrics?.count("billingd_usage_reports_total", dimensions: [("outcome", "given_up")])
        }
        return nil
    }

    /// One call: the record as a meter event, at bulk priority.
    private func send(_ job: Job, lane: Lane) async -> Attempt {
        let sentAt = now()
        let record = job.record
        let parameters: StripeParameters = [
            "event_name": .string(record.stripeMeter),
            "payload": .dictionary(["stripe_customer_id": .string(job.customer), "value": .integer(record.quantity)]),
            "identifier": .string(job.identifier),
            "timestamp": .integer(record.timestamp),
        ]
        do {
            // A new Idempotency-Key per attempt (the client's retries share it): across attempts the
            // identifier deduplicates, and a 5xx Stripe saved under a key is never replayed for a day.
            _ = try await client.send(
                .post, "/v1/billing/meter_events", parameters: parameters, account: record.scope.account.isEmpty ? nil : record.scope.account,
                priority: .bulk)
            return Attempt(job: job, lane: lane, sentAt: sentAt, result: .success(()))
        } catch {
            return Attempt(job: job, lane: lane, sentAt: sentAt, result: .failure(error))
        }
    }

    /// Turns an answer into the record's next state; true when the run must stop (the key was refused).
    private func record(_ attempt: Attempt, updates: inout [UsageReportUpdate], summary: inout UsageReportSummary, options: Options) -> Bool {
        let record = attempt.job.record
        let outcome: MeterEventOutcome
        var stop = false
        switch attempt.result {
        case .success:
            outcome = .accepted
        case .failure(let error):
            if error.kind == .authentication || error.kind == .permission {
                // Nothing was created, and no other record will fare better: stop, and leave this
                // one as it was.
                summary.error = "Stripe refused the key: \(error). Check STRIPE_API_KEY (it needs write access to Billing meter events)."
                updates.append(.unclaim(seq: record.seq, inFlightSince: record.inFlightSince))
                summary.sent -= 1
                return true
            }
            outcome = Self.outcome(of: error)
            stop = error.kind == .cancelled
        }
        let attempts = record.attempts + 1
        let next = MeterEventPolicy.next(after: outcome, attempts: attempts, inFlightBefore: record.inFlightSince, sentAt: attempt.sentAt, now: now())
        updates.append(.attempted(seq: record.seq, attempts: attempts, next: next, at: now()))
        switch outcome {
        case .accepted, .duplicate:
            summary.reported += 1
            if outcome == .duplicate { summary.duplicates += 1 }
            // Summed over every user of a run: held at Int64.max rather than trapping.
            let (sum, overflow) = summary.quantities[record.stripeMeter, default: 0].addingReportingOverflow(record.quantity)
            summary.quantities[record.stripeMeter] = overflow ? .max : sum
            metrics?.count("billingd_usage_reports_total", dimensions: [("outcome", outcome == .duplicate ? "duplicate" : "reported")])
        case .refused, .unknown:
            summary.failed += 1
            if next.nextAt == nil { summary.gaveUp += 1 }
            metrics?.count("billingd_usage_reports_total", dimensions: [("outcome", next.nextAt == nil ? "given_up" : "failed")])
            // The first few of a run, not thousands in an outage: the summary counts them all.
            guard summary.failures.count < options.examples else { break }
            summary.noteFailure(Self.failure(record, customer: attempt.job.customer, error: next.error ?? "", retryAt: next.nextAt), limit: options.examples)
            logger.warning(
                "usage record not reported",
                metadata: [
                    "seq": "\(record.seq)", "meter": "\(record.meter)", "customer": "\(attempt.job.customer)", "attempts": "\(attempts)",
                    "error": "\(next.error ?? "")", "retry_at": "\(next.nextAt.map { UTCTimestamp.string($0) } ?? "never")",
                ])
        }
        return stop
    }

    /// Claims never sent (the run stopped) go back to how they were.
    private func releaseUnsent(_ lanes: [Lane: [Job]], updates: inout [UsageReportUpdate]) {
        for jobs in lanes.values {
            for job in jobs { updates.append(.unclaim(seq: job.record.seq, inFlightSince: job.record.inFlightSince)) }
        }
    }

    private func readBacklog(into summary: inout UsageReportSummary) async throws {
        summary.backlog = UsageReportSummary.Backlog(
            try await usage.reportBacklog(livemode: livemode), otherMode: try await usage.reportBacklog(livemode: !livemode))
    }

    /// The backlog as gauges, after each run.
    private func publish(_ summary: UsageReportSummary) {
        guard let metrics else { return }
        metrics.gauge("billingd_usage_report_pending_records", Double(summary.backlog.pending))
        metrics.gauge("billingd_usage_report_retrying_records", Double(summary.backlog.retrying))
        metrics.gauge("billingd_usage_report_failed_records", Double(summary.backlog.failed))
        metrics.gauge(
            "billingd_usage_report_oldest_pending_age_seconds",
            Double(summary.backlog.oldestRecordedAt.map { max(0, (summary.finishedAt ?? now()) - $0) } ?? 0))
        if summary.outcome == "completed" {
            metrics.gauge("billingd_usage_report_last_success_timestamp_seconds", Double(summary.finishedAt ?? now()))
        }
    }

    // MARK: - Stripe's answers

    /// What a failed call means for the record. A duplicate identifier is Stripe's proof that an
    /// earlier attempt got through (``StripeError/isDuplicateMeterEvent`` reads v1's and v2's answers).
    public static func outcome(of error: StripeError) -> MeterEventOutcome {
        if error.isDuplicateMeterEvent { return .duplicate }
        switch error.kind {
        case .transport, .server, .cancelled, .idempotency:
            // The request may have been processed: only a resend with the identifier can tell.
            return .unknown(error.description)
        default:
            return .refused(error.description, final: error.isMeterEventTimestampRefused && !error.isMeterEventTimestampInFuture)
        }
    }

    /// The meter event identifier of a record: the same on every attempt.
    public static func identifier(of record: DueUsageReport, namespace: String) -> String {
        MeterEventIdentifier.make(
            namespace: namespace, seq: record.seq,
            fingerprint: MeterEventIdentifier.fingerprint(
                account: record.scope.account, livemode: record.scope.livemode, user: record.user, meter: record.meter,
                idempotencyKey: record.idempotencyKey, timestamp: record.timestamp, quantity: record.quantity))
    }

    static func message(_ hold: MeterEventPolicy.Hold) -> String {
        switch hold {
        case .tooOld(let timestamp):
            "the usage at \(UTCTimestamp.string(timestamp)) is more than 35 days old, older than Stripe accepts meter events for; it was not reported in time (is `billingd serve` reporting, BILLINGD_USAGE_REPORT_INTERVAL not off?) and cannot be billed through the meter now"
        case .future(let timestamp):
            "the usage is at \(UTCTimestamp.string(timestamp)), more than 5 minutes ahead of billingd's clock; Stripe refuses that, so it waits"
        case .unconfirmed(let since):
            "an attempt at \(UTCTimestamp.string(since)) may have reached Stripe but its answer was never recorded, and Stripe keeps meter event identifiers unique for 24 hours only, so a resend could bill it twice; compare with Stripe's summaries (`billingd reconcile --kinds usage`), then `billingd usage report --retry-failed --resend-unconfirmed` if Stripe lacks it"
        case .noCustomer:
            "the user has no Stripe customer in this scope (App Store or free user); kept pending for an hour in case one appears, then skipped"
        }
    }

    private static func failure(_ record: DueUsageReport, customer: String?, error: String, retryAt: Int64?) -> UsageReportSummary.Failure {
        UsageReportSummary.Failure(
            seq: record.seq, account: record.scope.account.isEmpty ? nil : record.scope.account, user: record.user, meter: record.meter,
            eventName: record.stripeMeter, customer: customer, error: error, retryAt: retryAt)
    }
}

/// Why a usage report run ended early without a thrown error.
public enum UsageReportError: Error, CustomStringConvertible {
    case stopped(String)

    public var description: String {
        switch self {
        case .stopped(let reason): reason
        }
    }
}
