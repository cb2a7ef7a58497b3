import BillingCore

/// How a usage operation is recorded, decided the same way on every backend from what its
/// transaction read; each backend only reads and writes the rows.
extension UsageOperation {
    /// The record to write, the source it is written with, and whether a hard limit refuses it;
    /// nil for a gauge.
    var recording: (input: UsageRecordInput, source: String, refusesOverLimit: Bool)? {
        switch self {
        case .record(let input): (input, "event", false)
        case .consume(let input): (input, "consume", input.meter.enforcement == .hard)
        case .setGauge: nil
        }
    }
}

/// What one record or consume does, from the counter's total over the input's period and
/// whether its idempotency key was seen: a duplicate changes nothing, a consume past a hard limit
/// is refused, anything else is written and, when its timestamp is in the period, counted in it.
struct UsageRecordDecision {
    let outcome: UsageOutcome
    /// Whether the record is written.
    let writes: Bool
    /// The counter's new total over the input's period, when the record counts in it.
    let newTotal: Int64?

    init(_ input: UsageRecordInput, used: Int64, duplicate: Bool, refusesOverLimit: Bool) {
        var state = UsageMeterState(meter: input.meter, used: used, limit: input.limit, period: input.period)
        if duplicate || (refusesOverLimit && !state.allows(input.quantity)) {
            outcome = duplicate ? .recorded(state, duplicate: true) : .refused(state)
            writes = false
            newTotal = nil
            return
        }
        writes = true
        newTotal = input.period.contains(input.timestamp) ? used + input.quantity : nil
        state.used = newTotal ?? used
        outcome = .recorded(state, duplicate: false)
    }

    /// The cached total of a counter when it is of `period`; nil when it must be added up again
    /// from the records (another period, or none cached).
    static func cachedUsed(_ cached: (period: UsagePeriod, used: Int64)?, in period: UsagePeriod) -> Int64? {
        guard let cached, cached.period == period else { return nil }
        return cached.used
    }
}

/// The report columns a new usage record starts with: pending and due at once (Unix seconds) when
/// its meter reports to a Stripe meter, empty otherwise.
struct UsageRecordReportColumns {
    let stripeMeter: String?
    let state: String?
    let nextAt: Int64?

    /// - Parameter now: Unix milliseconds.
    init(_ meter: UsageMeter, now: Int64) {
        stripeMeter = meter.stripeMeter
        state = meter.stripeMeter == nil ? nil : UsageReportState.pending.rawValue
        nextAt = meter.stripeMeter == nil ? nil : now / 1000
    }
}

extension UsageReportBacklog {
    /// Adds a group of records in the report queue: their state, whether they were given up on
    /// (no next attempt), how many, and the oldest's acceptance (Unix ms).
    mutating func add(state: UsageReportState?, givenUp: Bool, records: Int, oldestRecordedAt oldest: Int64?) {
        switch state {
        case .pending: pending += records
        case .failed where givenUp: failed += records
        case .failed: retrying += records
        default: return
        }
        if !givenUp, let oldest {
            oldestRecordedAt = min(self.oldestRecordedAt ?? Int64.max, oldest / 1000)
        }
    }
}
