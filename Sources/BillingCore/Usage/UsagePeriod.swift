import Foundation

/// The half-open span `[start, end)` a counter adds up over, in Unix seconds: a record at
/// exactly `end` belongs to the next period.
public struct UsagePeriod: Sendable, Hashable, CustomStringConvertible {
    public var start: Int64
    public var end: Int64

    public init(start: Int64, end: Int64) {
        self.start = start
        self.end = end
    }

    public func contains(_ time: Int64) -> Bool { start <= time && time < end }

    public var description: String { "[\(start), \(end))" }

    /// The calendar month in UTC that holds `time`: the period of users on the default tier.
    public static func calendarMonth(containing time: Int64) -> UsagePeriod {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let date = Date(timeIntervalSince1970: TimeInterval(time))
        let parts = calendar.dateComponents([.year, .month], from: date)
        let start = calendar.date(from: parts)!
        let end = calendar.date(byAdding: .month, value: 1, to: start)!
        return UsagePeriod(start: Int64(start.timeIntervalSince1970), end: Int64(end.timeIntervalSince1970))
    }
}

extension PlanResolution {
    /// The billing period a counter adds up over at `now` (Unix seconds): the current period of
    /// the Stripe subscription that grants the tier (the item's period where Stripe keeps it
    /// there, as API versions since 2025-03-31 do), the App Store purchase's period (its latest
    /// transaction's purchase date to its expiry date), and the calendar month in UTC for a user
    /// on the default tier, a purchase with no period (a lifetime one) or a promotional grant.
    ///
    /// A period that `now` has passed — a renewal not heard of yet, a grace period — is moved on
    /// by its own length until it holds `now`, so usage never counts into an ended period.
    public func usagePeriod(now: Int64) -> UsagePeriod {
        guard entitled else { return .calendarMonth(containing: now) }
        var bounds: (Int64?, Int64?)
        switch source {
        case .stripe:
            bounds = (item?.currentPeriodStart ?? subscription?.currentPeriodStart, item?.currentPeriodEnd ?? subscription?.currentPeriodEnd)
        case .appStore:
            bounds = (appStoreSubscription?.purchaseDate.map { $0 / 1000 }, appStoreSubscription?.expiresDate.map { $0 / 1000 })
        case .grant, nil:
            // A grant has no billing period: its counters add up per calendar month, as the default tier's.
            bounds = (nil, nil)
        }
        guard let start = bounds.0, let end = bounds.1, start < end, start <= now else { return .calendarMonth(containing: now) }
        let length = end - start
        guard now >= end else { return UsagePeriod(start: start, end: end) }
        let skipped = (now - end) / length + 1
        return UsagePeriod(start: start + skipped * length, end: end + skipped * length)
    }

    /// The limit of the resolved tier (per-seat limits already multiplied) that caps `meter`;
    /// nil when the tier has none (the catalog refuses that for tiers it knows).
    public func limit(of meter: UsageMeter) -> EntitlementLimit? {
        limits.first { $0.key == meter.limit }?.value
    }
}
