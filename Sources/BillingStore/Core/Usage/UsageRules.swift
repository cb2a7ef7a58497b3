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

    /// The scope and user whose meter it writes.
    var scope: ServiceScope {
        switch self {
        case .record(let input), .consume(let input): input.scope
        case .setGauge(let scope, _, _, _, _): scope
        }
    }

    var user: String {
        switch self {
        case .record(let input), .consume(let input): input.user
        case .setGauge(_, let user, _, _, _): user
        }
    }
}

/// One batch of usage operations, run in order by a backend's `apply`: the outcomes, or the
/// refusal of the first operation refused (with its place in the batch), after which the
/// backend undoes the batch. Any other error is thrown on, and fails the whole transaction.
enum UsageBatch {
    static func run(
        _ operations: [UsageOperation], _ apply: (UsageOperation) throws -> UsageOutcome
    ) throws -> Result<[UsageOutcome], UsageRefusal> {
        var outcomes: [UsageOutcome] = []
        outcomes.reserveCapacity(operations.count)
        for (index, operation) in operations.enumerated() {
            do {
                outcomes.append(try apply(operation))
            } catch var refusal as UsageRefusal {
                refusal.index = index
                return .failure(refusal)
            }
        }
        return .success(outcomes)
    }

    static func run(
        _ operations: [UsageOperation], _ apply: (UsageOperation) async throws -> UsageOutcome
    ) async throws -> Result<[UsageOutcome], UsageRefusal> {
        var outcomes: [UsageOutcome] = []
        outcomes.reserveCapacity(operations.count)
        for (index, operation) in operations.enumerated() {
            do {
                outcomes.append(try await apply(operation))
            } catch var refusal as UsageRefusal {
                refusal.index = index
                return .failure(refusal)
            }
        }
        return .success(outcomes)
    }

    static func refused(_ result: Result<[UsageOutcome], UsageRefusal>) -> Bool {
        if case .failure = result { return true }
        return false
    }
}

/// What one record or consume does, from the counter's total over the input's period and
/// the quantity its idempotency key was recorded with, if it was: a duplicate changes nothing, a
/// key reused with another quantity is refused, a consume past a hard limit is refused, a total
/// past ``UsageMeter/maximumTotal`` is refused, anything else is written and, when its timestamp
/// is in the period, counted in it.
struct UsageRecordDecision {
    let outcome: UsageOutcome
    /// Whether the record is written.
    let writes: Bool
    /// The counter's new total over the input's period, when the record counts in it.
    let newTotal: Int64?

    /// - Parameters:
    ///   - recordedQuantity: the quantity recorded before under the input's key; nil when new.
    ///   - besidePeriodUsed: for a record outside the period, the total of
    ///     ``UsageRecordInput/besidePeriod`` before it; ignored otherwise.
    init(
        _ input: UsageRecordInput, used: Int64, recordedQuantity: Int64?, refusesOverLimit: Bool, besidePeriodUsed: Int64? = nil
    ) throws(UsageRefusal) {
        var state = UsageMeterState(meter: input.meter, used: used, limit: input.limit, period: input.period)
        if let recordedQuantity {
            guard recordedQuantity == input.quantity else { throw input.refusal(.idempotencyKeyReused(recordedQuantity: recordedQuantity)) }
            (outcome, writes, newTotal) = (.recorded(state, duplicate: true), false, nil)
            return
        }
        if refusesOverLimit && !state.allows(input.quantity) {
            (outcome, writes, newTotal) = (.refused(state), false, nil)
            return
        }
        let inPeriod = input.period.contains(input.timestamp)
        let before = inPeriod ? used : besidePeriodUsed ?? 0
        let (total, overflow) = before.addingReportingOverflow(input.quantity)
        guard !overflow, total <= UsageMeter.maximumTotal else { throw input.refusal(.totalCeiling(used: before)) }
        writes = true
        newTotal = inPeriod ? total : nil
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

extension UsageRecordInput {
    /// Where a record outside its period is held to the ceiling: the span beside the period
    /// that every record refused from the period yet accepted may fall in (35 days before it,
    /// for late records, or after it, for a record a few minutes ahead of a period's end); nil
    /// when the record is in its period.
    var besidePeriod: UsagePeriod? {
        if period.contains(timestamp) { return nil }
        let window = MeterEventPolicy.pastWindow
        return timestamp < period.start
            ? UsagePeriod(start: period.start - window, end: period.start) : UsagePeriod(start: period.end, end: period.end + window)
    }

    func refusal(_ reason: UsageRefusal.Reason) -> UsageRefusal {
        UsageRefusal(reason, meter: meter.id, quantity: quantity, idempotencyKey: idempotencyKey)
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
