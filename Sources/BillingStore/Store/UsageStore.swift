import BillingCore
import Foundation

/// Usage records, counters' totals per period and gauges: what the service API meters and
/// checks quotas against.
public protocol UsageStore: Sendable {
    /// Applies operations in order, in one durable transaction, so that a consume sees the
    /// operations before it and never overshoots a hard limit. `now` is Unix milliseconds.
    func apply(_ operations: [UsageOperation], now: Int64) async throws -> [UsageOutcome]
    /// The states of `meters` for a user, each counter over its period (nil for gauges).
    func states(
        scope: ServiceScope, user: String, meters: [(meter: UsageMeter, period: UsagePeriod?, limit: EntitlementLimit?)]
    ) async throws -> [UsageMeterState]
}

extension UsageStore {
    /// A group committer of usage operations for the service API: concurrent requests share a
    /// transaction, and so one fsync.
    public func committer(maximumBatch: Int = 512) -> BatchCommitter<UsageOperation, UsageOutcome> {
        BatchCommitter(maximumBatch: maximumBatch) { operations in
            try await apply(operations, now: Int64(Date().timeIntervalSince1970 * 1000))
        }
    }
}

/// The queue of usage records reported to Stripe's meters, and what was sent, for the usage
/// reporter, `billingd usage` and usage reconcile.
public protocol UsageReportStore: Sendable {
    /// The namespace of this ledger's meter event identifiers, drawn once and kept.
    func meterEventNamespace() async throws -> String
    /// Records of one mode due at `now`, in `(nextAt, seq)` order after `cursor`.
    func dueReports(livemode: Bool, now: Int64, after cursor: UsageReportCursor?, limit: Int) async throws -> [DueUsageReport]
    /// Applies the reporter's changes in one transaction.
    func updateReports(_ updates: [UsageReportUpdate]) async throws
    /// Puts records given up on back in the queue, due at `now`; returns how many. Records whose
    /// delivery is unconfirmed past Stripe's identifier window stay failed unless `resendUnconfirmed`.
    func requeueFailed(livemode: Bool, resendUnconfirmed: Bool, now: Int64) async throws -> Int
    /// The backlog of one mode.
    func reportBacklog(livemode: Bool) async throws -> UsageReportBacklog
    /// How a user's records of one meter over `period` were reported.
    func reportTally(scope: ServiceScope, user: String, meter: String, period: UsagePeriod) async throws -> UsageReportTally
    /// Every (user, meter, Stripe customer) with usage since `since` sent, or being sent, to a
    /// Stripe customer; `account` nil for every account of the mode.
    func reportedUsageKeys(livemode: Bool, account: String?, since: Int64) async throws -> [ReportedUsageKey]
    /// What the ledger sent to `key`'s customer over `span`.
    func reportedUsage(_ key: ReportedUsageKey, span: UsagePeriod) async throws -> ReportedUsage
}
