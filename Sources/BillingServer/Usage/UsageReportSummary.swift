import BillingCore
import BillingStore
import Foundation

/// What one run of ``UsageReporter`` did: `billingd usage report --json` prints it.
public struct UsageReportSummary: Sendable, Codable {
    public var dryRun = false
    public var livemode = false
    public var startedAt: Int64 = 0
    public var finishedAt: Int64?
    /// `completed`, `stopped` (shutdown), or `failed` (the key was refused, the ledger failed).
    public var outcome = "running"
    public var error: String?
    /// Records due that the run looked at.
    public var due = 0
    /// Calls made (with `--dry-run`, records that would be sent).
    public var sent = 0
    /// Records Stripe accepted, `duplicates` among them: Stripe already held their identifier
    /// from an attempt whose answer was lost.
    public var reported = 0
    public var duplicates = 0
    /// Records that failed in this run, `gaveUp` of them for good (too old, unconfirmed, out of
    /// attempts); the rest are tried again later.
    public var failed = 0
    public var gaveUp = 0
    /// Records of users without a Stripe customer in their scope: nothing to bill.
    public var skipped = 0
    /// Records left pending: a timestamp ahead of the clock, a user whose customer may still come.
    public var waiting = 0
    /// Failed records put back in the queue by `--retry-failed`.
    public var requeued = 0
    /// The quantity reported, by Stripe meter event name.
    public var quantities: [String: Int64] = [:]
    /// The first failures of the run.
    public var failures: [Failure] = []
    /// What is left after the run.
    public var backlog = Backlog()

    public struct Failure: Sendable, Codable, Equatable {
        public var seq: Int64
        public var account: String?
        public var user: String
        public var meter: String
        public var eventName: String
        public var customer: String?
        public var error: String
        /// When it is tried again; nil when given up.
        public var retryAt: Int64?

        enum CodingKeys: String, CodingKey {
            case seq, account, user, meter, eventName = "event_name", customer, error, retryAt = "retry_at"
        }
    }

    public struct Backlog: Sendable, Codable, Equatable {
        public var pending = 0
        public var retrying = 0
        /// Given up on: `billingd usage report --retry-failed` re-queues them.
        public var failed = 0
        /// When the oldest waiting record was accepted.
        public var oldestRecordedAt: Int64?
        /// Pending records of the other mode, which this key cannot report.
        public var otherMode = 0

        init() {}

        init(_ backlog: UsageReportBacklog, otherMode: UsageReportBacklog) {
            pending = backlog.pending
            retrying = backlog.retrying
            failed = backlog.failed
            oldestRecordedAt = backlog.oldestRecordedAt
            self.otherMode = otherMode.pending + otherMode.retrying
        }

        enum CodingKeys: String, CodingKey {
            case pending, retrying, failed, oldestRecordedAt = "oldest_recorded_at", otherMode = "other_mode"
        }
    }

    /// Exit status 0 of `billingd usage report`: nothing failed.
    public var allWent: Bool { failed == 0 && error == nil }

    enum CodingKeys: String, CodingKey {
        case dryRun = "dry_run", livemode, startedAt = "started_at", finishedAt = "finished_at", outcome, error, due, sent
        case reported, duplicates, failed, gaveUp = "gave_up", skipped, waiting, requeued, quantities, failures, backlog
    }

    mutating func noteFailure(_ failure: Failure, limit: Int) {
        if failures.count < limit { failures.append(failure) }
    }

    /// A few lines a person reads.
    public var summary: String {
        var lines: [String] = []
        let mode = livemode ? "live" : "test"
        if dryRun {
            lines.append(
                "usage report (dry run, \(mode) mode): \(due) records due; would send \(sent), skip \(skipped) (no Stripe customer), leave \(waiting) waiting, give up on \(gaveUp)")
        } else {
            var line = "usage report \(outcome) (\(mode) mode): \(due) records due, \(sent) sent, \(reported) reported"
            if duplicates > 0 { line += " (\(duplicates) Stripe already had)" }
            line += ", \(failed) failed"
            if gaveUp > 0 { line += " (\(gaveUp) given up)" }
            line += ", \(skipped) skipped (no Stripe customer), \(waiting) waiting"
            lines.append(line)
        }
        if requeued > 0 { lines.append("  re-queued \(requeued) failed records") }
        for (event, quantity) in quantities.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(event): \(quantity) reported")
        }
        for failure in failures.prefix(5) {
            let retry = failure.retryAt.map { "retry at \(UTCTimestamp.string($0))" } ?? "given up"
            lines.append("  failed #\(failure.seq) \(failure.user) \(failure.meter) → \(failure.customer ?? "?"): \(failure.error) [\(retry)]")
        }
        var left = "  left: \(backlog.pending) pending, \(backlog.retrying) to retry, \(backlog.failed) given up"
        if backlog.failed > 0 { left += " (re-queue with --retry-failed)" }
        if let oldest = backlog.oldestRecordedAt { left += "; oldest from \(UTCTimestamp.string(oldest))" }
        lines.append(left)
        if backlog.otherMode > 0 {
            lines.append(
                "  note: \(backlog.otherMode) records of \(livemode ? "test" : "live") mode wait for a \(livemode ? "test" : "live") key; this \(mode) key cannot report them")
        }
        if let error { lines.append("  error: \(error)") }
        return lines.joined(separator: "\n")
    }
}
