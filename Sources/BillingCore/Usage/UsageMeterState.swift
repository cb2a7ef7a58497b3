/// A meter as the service API answers it for one user: what is used against which limit.
public struct UsageMeterState: Sendable, Equatable {
    public var meter: UsageMeter
    /// A counter's total in the period, or a gauge's level.
    public var used: Int64
    /// Nil when the tier names no such limit (then nothing is enforced).
    public var limit: EntitlementLimit?
    /// The counter's current period; nil for a gauge, which never resets.
    public var period: UsagePeriod?

    public init(meter: UsageMeter, used: Int64, limit: EntitlementLimit?, period: UsagePeriod?) {
        self.meter = meter
        self.used = used
        self.limit = limit
        self.period = period
    }

    public var isUnlimited: Bool { limit == .unlimited || limit == nil }

    /// The limit as a number; nil when unlimited.
    public var limitCount: Int64? {
        if case .count(let count) = limit { return count }
        return nil
    }

    /// What is left before the limit; nil when unlimited.
    public var remaining: Int64? { limitCount.map { max(0, $0 - used) } }

    /// Usage past the limit (soft meters, gauges set above it, late records); 0 when unlimited.
    public var overage: Int64 { limitCount.map { max(0, used - $0) } ?? 0 }

    /// Whether `quantity` more fits under the limit.
    public func allows(_ quantity: Int64) -> Bool {
        guard let count = limitCount else { return true }
        let (total, overflow) = used.addingReportingOverflow(quantity)
        return !overflow && total <= count
    }
}
