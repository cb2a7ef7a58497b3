import BillingCore
import Foundation

/// One usage record as the service API accepted it, with what the request resolved about the
/// user: the counter's current period and the tier's limit.
public struct UsageRecordInput: Sendable, Equatable {
    public var scope: ServiceScope
    public var user: String
    public var meter: UsageMeter
    public var quantity: Int64
    /// When the usage happened, Unix seconds: it counts in the period that holds it.
    public var timestamp: Int64
    /// Counts once per (user, meter).
    public var idempotencyKey: String
    /// The user's current period at the request.
    public var period: UsagePeriod
    public var limit: EntitlementLimit?

    public init(
        scope: ServiceScope, user: String, meter: UsageMeter, quantity: Int64, timestamp: Int64, idempotencyKey: String,
        period: UsagePeriod, limit: EntitlementLimit?
    ) {
        self.scope = scope
        self.user = user
        self.meter = meter
        self.quantity = quantity
        self.timestamp = timestamp
        self.idempotencyKey = idempotencyKey
        self.period = period
        self.limit = limit
    }
}

/// A write to the usage tables; a batch of them shares one transaction (``UsageStore/committer(maximumBatch:)``).
public enum UsageOperation: Sendable, Equatable {
    /// Usage that happened: never refused for the limit.
    case record(UsageRecordInput)
    /// Check and record at once: refused when it does not fit under a hard limit.
    case consume(UsageRecordInput)
    /// A gauge's new level.
    case setGauge(scope: ServiceScope, user: String, meter: UsageMeter, value: Int64, limit: EntitlementLimit?)
}

/// What became of one operation, with the meter's state after it.
public enum UsageOutcome: Sendable, Equatable {
    /// Written (or, with `duplicate`, written before under the same idempotency key).
    case recorded(UsageMeterState, duplicate: Bool)
    /// A consume past a hard limit: nothing written.
    case refused(UsageMeterState)

    public var state: UsageMeterState {
        switch self {
        case .recorded(let state, _), .refused(let state): state
        }
    }
}
