import BillingStore
import Foundation

/// What reconcile found comparing Stripe's meter event summaries with the usage billingd reported,
/// per customer, meter and period. Drift is reported, never repaired.
public struct UsageReconcileReport: Sendable, Codable, Equatable {
    /// (customer, meter, period) spans compared.
    public var compared = 0
    public var matched = 0
    /// Differences explained by reports still settling: a record reported in the last
    /// ``UsageReconcile/settleWindow`` (Stripe's summaries lag by minutes), or an attempt whose
    /// answer is unknown.
    public var settling = 0
    /// Stripe counts less than billingd reported: events Stripe accepted and then dropped (a
    /// deleted customer, an inactive meter) — usage not billed.
    public var stripeLower = 0
    /// Stripe counts more than billingd reported: events from elsewhere, another billingd
    /// database on the same meter, or a resend past Stripe's identifier window — usage billed twice.
    public var stripeHigher = 0
    /// Event names of the plan catalog's meters that no Stripe meter has: their events count nowhere.
    public var missingMeters: [String] = []
    /// Quantity in the compared spans that is still pending or failed (not in Stripe yet).
    public var unreported: Int64 = 0
    public var examples: [Drift] = []
    public var note = UsageReconcileReport.notRepaired

    static let notRepaired =
        "usage drift is reported, not repaired: billingd never sends or cancels meter events to make totals agree, since an invented event bills a customer. Check the examples in Stripe's Dashboard; correct there (a meter event adjustment), or re-queue failed records with `billingd usage report --retry-failed`."

    public var drift: Int { stripeLower + stripeHigher + missingMeters.count }

    public struct Drift: Sendable, Codable, Equatable {
        public var account: String?
        public var customer: String
        public var user: String
        public var meter: String
        public var eventName: String
        public var periodStart: Int64
        public var periodEnd: Int64
        /// Stripe's `aggregated_value`.
        public var stripe: Double
        /// The quantity billingd has marked reported.
        public var reported: Int64
        public var unreported: Int64
        /// `stripe_lower`, `stripe_higher`.
        public var kind: String

        enum CodingKeys: String, CodingKey {
            case account, customer, user, meter, eventName = "event_name", periodStart = "period_start", periodEnd = "period_end"
            case stripe, reported, unreported, kind
        }
    }

    enum CodingKeys: String, CodingKey {
        case compared, matched, settling, stripeLower = "stripe_lower", stripeHigher = "stripe_higher"
        case missingMeters = "missing_meters", unreported, examples, note
    }

    /// One line for the run's summary, and a few examples.
    var lines: [String] {
        var line = "  usage: \(compared) customer periods compared, \(matched) match"
        if settling > 0 { line += ", \(settling) settling" }
        if stripeLower > 0 { line += ", \(stripeLower) where Stripe counts less" }
        if stripeHigher > 0 { line += ", \(stripeHigher) where Stripe counts more" }
        if unreported > 0 { line += "; \(unreported) not reported yet" }
        var lines = [line]
        if !missingMeters.isEmpty {
            lines.append("    no Stripe meter for \(missingMeters.joined(separator: ", ")): create one with that event_name")
        }
        for example in examples.prefix(3) {
            lines.append(
                "    e.g. \(example.customer) (\(example.user)) \(example.eventName) \(UTCTimestamp.string(example.periodStart))…: Stripe \(Self.number(example.stripe)), billingd reported \(example.reported) → \(example.kind)")
        }
        if drift > 0 { lines.append("    not repaired: " + note.dropFirst("usage drift is reported, not repaired: ".count)) }
        return lines
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
