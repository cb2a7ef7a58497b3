/// What billingd counts for the app: a meter of the plan catalog, capped by one of each tier's
/// limits. A counter adds up usage records and starts again at 0 each billing period; a gauge
/// is a level the app sets (bytes stored, connections open) and never resets.
public struct UsageMeter: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Adds up; starts again at 0 each billing period.
        case counter
        /// A level the app sets with `PUT`.
        case gauge
    }

    public enum Enforcement: String, Sendable, Hashable, CaseIterable {
        /// A consume past the limit is refused (402).
        case hard
        /// Allowed, and counted as overage.
        case soft
    }

    /// The most a counter may add up to within one period (and over the late records of the
    /// 35 days beside it): a record that would pass it is refused, so that no total, nor a sum
    /// over years of totals, comes near `Int64.max` (about 9.2 × 10^18). 10^15, a thousand
    /// times the largest single record the service API takes.
    public static let maximumTotal: Int64 = 1_000_000_000_000_000

    /// The meter's id in paths (`/usage/radars/consume`).
    public var id: String
    public var kind: Kind
    /// The key of the tier limit that caps it (`limits.radars`).
    public var limit: String
    public var enforcement: Enforcement
    /// The Stripe Billing Meter's `event_name` its usage is reported to; counters only.
    public var stripeMeter: String?

    public init(id: String, kind: Kind, limit: String, enforcement: Enforcement = .hard, stripeMeter: String? = nil) {
        self.id = id
        self.kind = kind
        self.limit = limit
        self.enforcement = enforcement
        self.stripeMeter = stripeMeter
    }
}
