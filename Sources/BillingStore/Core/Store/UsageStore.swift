import BillingCore
import Foundation

/// Usage records, counters' totals per period and gauges: what the service API meters and
/// checks quotas against.
public protocol UsageStore: Sendable {
    /// Applies batches in order, in one durable transaction, so that a consume sees the
    /// operations before it and never overshoots a hard limit. Each batch takes effect whole or
    /// not at all: the first operation of a batch that is refused (``UsageRefusal``) undoes the
    /// batch's others, and the other batches go on. `now` is Unix milliseconds.
    func apply(batches: [[UsageOperation]], now: Int64) async throws -> [Result<[UsageOutcome], UsageRefusal>]
    /// The states of `meters` for a user, each counter over its period (nil for gauges).
    func states(
        scope: ServiceScope, user: String, meters: [(meter: UsageMeter, period: UsagePeriod?, limit: EntitlementLimit?)]
    ) async throws -> [UsageMeterState]
    /// A counter's total over any span `[start, end)` of Unix seconds, from its records, whatever
    /// periods they were recorded in (what a refund request's consumption is measured over).
    func total(scope: ServiceScope, user: String, meter: String, period: UsagePeriod) async throws -> Int64
}

extension UsageStore {
    /// Applies operations in order as one batch, in one durable transaction; throws the
    /// ``UsageRefusal`` of the first refused operation, and then nothing is written.
    public func apply(_ operations: [UsageOperation], now: Int64) async throws -> [UsageOutcome] {
        try await apply(batches: [operations], now: now)[0].get()
    }

    /// A group committer of usage batches for the service API: concurrent requests share a
    /// transaction, and so one fsync; each request's batch takes effect whole or not at all.
    public func committer(maximumBatch: Int = 512) -> BatchCommitter<[UsageOperation], Result<[UsageOutcome], UsageRefusal>> {
        BatchCommitter(maximumBatch: maximumBatch) { batches in
            try await apply(batches: batches, now: Int64(Date().timeIntervalSince1970 * 1000))
        }
    }
}

/// Why a usage operation was refused before it wrote anything; its batch is then not written.
public struct UsageRefusal: Error, Sendable, Equatable {
    public enum Reason: Sendable, Equatable {
        /// The counter's total (over the record's period, or over the late records beside it)
        /// would pass ``UsageMeter/maximumTotal``: `used` is that total before the record.
        case totalCeiling(used: Int64)
        /// The idempotency key was recorded before with another quantity (Stripe, too, refuses a
        /// key reused with other parameters).
        case idempotencyKeyReused(recordedQuantity: Int64)
    }

    public var reason: Reason
    public var meter: String
    public var quantity: Int64
    public var idempotencyKey: String
    /// The refused operation's place in its batch.
    public var index: Int

    public init(_ reason: Reason, meter: String, quantity: Int64, idempotencyKey: String, index: Int = 0) {
        self.reason = reason
        self.meter = meter
        self.quantity = quantity
        self.idempotencyKey = idempotencyKey
        self.index = index
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
