import BillingCore
import Foundation

/// A usage record due for its report to a Stripe Billing Meter.
public struct DueUsageReport: Sendable, Equatable {
    public let seq: Int64
    public let scope: ServiceScope
    public let user: String
    public let meter: String
    /// The Stripe meter's `event_name`.
    public let stripeMeter: String
    public let quantity: Int64
    /// When the usage happened, Unix seconds.
    public let timestamp: Int64
    /// The app's idempotency key of the record.
    public let idempotencyKey: String
    /// When billingd accepted it, Unix seconds.
    public let recordedAt: Int64
    public let state: UsageReportState
    public let attempts: Int
    public let nextAt: Int64
    /// Pinned at the first attempt, so that every retry sends the same event.
    public let stripeCustomer: String?
    /// The earliest attempt whose answer is unknown.
    public let inFlightSince: Int64?
}

/// Where a walk over due records is: the last `(reportNextAt, seq)` read.
public struct UsageReportCursor: Sendable, Equatable {
    public let nextAt: Int64
    public let seq: Int64

    public init(nextAt: Int64, seq: Int64) {
        self.nextAt = nextAt
        self.seq = seq
    }
}

/// One change the reporter makes to a record; a batch of them is one transaction.
public enum UsageReportUpdate: Sendable, Equatable {
    /// About to be sent to `customer`: the customer is pinned and the record in flight since
    /// `at` (unless it already was), before the call, so that a crash leaves a trace.
    case claim(seq: Int64, customer: String, at: Int64)
    /// A claim the run never sent (it stopped): in flight as before.
    case unclaim(seq: Int64, inFlightSince: Int64?)
    /// The result of an attempt, the `attempts`-th.
    case attempted(seq: Int64, attempts: Int, next: MeterEventPolicy.Next, at: Int64)
    /// Not sent now: due again at `until`, with why.
    case wait(seq: Int64, until: Int64, note: String)
    /// Not sent, ever: `failed` or `skipped`, with why.
    case close(seq: Int64, state: UsageReportState, error: String?)
}

/// The report backlog in one mode: what is waiting and what failed.
public struct UsageReportBacklog: Sendable, Equatable {
    /// Pending records due now or later (future timestamps, users awaiting a customer).
    public var pending = 0
    /// Failed records that will be tried again.
    public var retrying = 0
    /// Failed records given up on (`--retry-failed` re-queues them).
    public var failed = 0
    /// When the oldest pending or retrying record was accepted, Unix seconds.
    public var oldestRecordedAt: Int64?

    public init() {}
}

/// A record's report states over a span, for `billingd usage show`.
public struct UsageReportTally: Sendable, Equatable {
    public var records: [UsageReportState: Int] = [:]
    public var quantities: [UsageReportState: Int64] = [:]

    public init() {}
}

/// What the ledger holds for one customer on one Stripe meter over a span, for reconcile.
public struct ReportedUsage: Sendable, Equatable {
    /// The quantity Stripe accepted.
    public var reported: Int64 = 0
    /// The quantity still pending or failed.
    public var unreported: Int64 = 0
    /// When the latest of them was reported, Unix seconds.
    public var lastReportedAt: Int64?
    /// Records an attempt may have delivered without billingd knowing.
    public var inFlight = 0

    public init() {}
}

/// A (user, meter) whose usage went to a Stripe customer, in one scope.
public struct ReportedUsageKey: Sendable, Hashable {
    public let scope: ServiceScope
    public let user: String
    public let meter: String
    public let stripeMeter: String
    public let customer: String

    public init(scope: ServiceScope, user: String, meter: String, stripeMeter: String, customer: String) {
        self.scope = scope
        self.user = user
        self.meter = meter
        self.stripeMeter = stripeMeter
        self.customer = customer
    }
}

/// What both backends' report queues share: the `meta` key of the meter event namespace, and
/// the condition of a record still to report.
enum UsageReportRows {
    /// The `meta` key under which a database keeps the namespace of its meter event identifiers.
    static let namespaceKey = "usage_meter_event_namespace"

    /// `reportState IN ('pending', 'failed')` spelled as the partial index `usageRecord_due` is,
    /// so that SQLite can use it (bound parameters would not prove the index's condition).
    static let dueCondition = "reportState IN ('\(UsageReportState.pending.rawValue)', '\(UsageReportState.failed.rawValue)')"
}
