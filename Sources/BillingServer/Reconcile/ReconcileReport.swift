import BillingCore
import BillingStore
import Foundation

/// What `billingd reconcile` compares: the Stripe lists it walks.
public enum ReconcileKind: String, Sendable, CaseIterable, Codable, Comparable {
    /// `/v1/events` from the stored cursor: events the inbox lacks go into it.
    case events
    case products, prices, customers, subscriptions, invoices
    /// Per customer: `/v1/customers/{id}/payment_methods`.
    case paymentMethods = "payment_methods"
    /// Per customer: `/v1/entitlements/active_entitlements`.
    case entitlements
    /// Per customer, Stripe meter and usage period: `/v1/billing/meters/{id}/event_summaries`
    /// against the usage billingd reported. Reported, never repaired.
    case usage

    /// Parses `--kinds` (comma-separated, `payment-methods` also accepted).
    public static func parse(_ text: String) throws -> [ReconcileKind] {
        var kinds: [ReconcileKind] = []
        for part in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "-", with: "_") })
        where !part.isEmpty {
            guard let kind = ReconcileKind(rawValue: part) else {
                throw ReconcileError.invalidKind(part)
            }
            if !kinds.contains(kind) { kinds.append(kind) }
        }
        return kinds.sorted()
    }

    /// The order a run walks kinds in: events first (so recovered events are applied before the
    /// lists are compared), products and prices before what refers to them, per-customer lists last.
    public static func < (lhs: ReconcileKind, rhs: ReconcileKind) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }

    /// The ledger kind its objects land in (nil for events and usage).
    var ledgerKind: LedgerObjectKind? {
        switch self {
        case .events: nil
        case .products: .product
        case .prices: .price
        case .customers: .customer
        case .subscriptions: .subscription
        case .invoices: .invoice
        case .paymentMethods: .paymentMethod
        case .entitlements: .entitlementSummary
        case .usage: nil
        }
    }
}

/// A reconcile run that could not be done (as opposed to one that found drift).
public enum ReconcileError: Error, CustomStringConvertible {
    case invalidKind(String)
    case noAPIKey

    public var description: String {
        switch self {
        case .invalidKind(let kind):
            "unknown kind '\(kind)'; use any of \(ReconcileKind.allCases.map(\.rawValue).joined(separator: ", "))"
        case .noAPIKey:
            "STRIPE_API_KEY is not set; reconcile reads Stripe's API. Set it to a secret key (sk_…) or a restricted key (rk_…) with read access, or set the App Store Server API settings (APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY) to reconcile the App Store."
        }
    }
}

/// The report of one run: what was listed, what drifted and how, by kind. `--json` prints it;
/// the run record keeps it.
public struct ReconcileReport: Sendable, Codable {
    public struct KindReport: Sendable, Codable {
        /// Objects Stripe listed (or that were fetched) of this kind.
        public var listed = 0
        public var matched = 0
        public var missingLocally = 0
        public var goneInStripe = 0
        public var fieldDiffers = 0
        public var repaired = 0
        public var keptNewer = 0
        /// How often each field differed.
        public var fields: [String: Int] = [:]
        /// The first few drifted objects.
        public var examples: [ObjectDrift] = []

        public var drift: Int { missingLocally + goneInStripe + fieldDiffers }

        enum CodingKeys: String, CodingKey {
            case listed, matched, missingLocally = "missing_locally", goneInStripe = "gone_in_stripe"
            case fieldDiffers = "field_differs", repaired, keptNewer = "kept_newer", fields, examples
        }
    }

    public struct EventsReport: Sendable, Codable {
        /// Events `/v1/events` listed since the cursor.
        public var listed = 0
        /// Of those, events the inbox lacked and now holds.
        public var recovered = 0
        /// The window walked: `created >= from`.
        public var from: Int64 = 0
        /// The cursor after the walk.
        public var cursor: Int64?
        /// Set when the cursor was older than 25 days: events older than Stripe's 30-day window
        /// cannot be recovered.
        public var warning: String?
        /// Recovered events applied by this run (the CLI applies them; `serve`'s applier does so
        /// by itself).
        public var applied = 0
    }

    public var runID: Int64 = 0
    public var mode: String = "full"
    public var dryRun = false
    public var account: String?
    public var livemode = false
    public var startedAt: Int64 = 0
    public var finishedAt: Int64?
    public var outcome: String = "running"
    public var error: String?
    public var kinds: [ReconcileKind] = []
    /// Objects fetched because the applier had marked them for re-fetch.
    public var refetched = 0
    public var events: EventsReport?
    public var byKind: [String: KindReport] = [:]
    /// The `usage` kind's comparison of meter summaries.
    public var usage: UsageReconcileReport?
    public var stripeRequests = 0

    public var totalDrift: Int { byKind.values.reduce(0) { $0 + $1.drift } + (usage?.drift ?? 0) }
    public var totalRepaired: Int { byKind.values.reduce(0) { $0 + $1.repaired } }
    public var totalObjects: Int { byKind.values.reduce(0) { $0 + $1.listed } }

    enum CodingKeys: String, CodingKey {
        case runID = "run_id", mode, dryRun = "dry_run", account, livemode, startedAt = "started_at", finishedAt = "finished_at"
        case outcome, error, kinds, refetched, events, byKind = "by_kind", usage, stripeRequests = "stripe_requests"
    }

    mutating func record(_ page: PageReconciliation, kind: LedgerObjectKind, examples limit: Int) {
        var report = byKind[kind.rawValue] ?? KindReport()
        report.matched += page.matched
        for drift in page.drifts {
            switch drift.drift {
            case .missingLocally: report.missingLocally += 1
            case .goneInStripe: report.goneInStripe += 1
            case .fieldDiffers: report.fieldDiffers += 1
            }
            switch drift.outcome {
            case .repaired: report.repaired += 1
            case .keptNewer: report.keptNewer += 1
            case .dryRun: break
            }
            for field in drift.fields { report.fields[field, default: 0] += 1 }
            if report.examples.count < limit { report.examples.append(drift) }
        }
        byKind[kind.rawValue] = report
    }

    mutating func listed(_ count: Int, kind: LedgerObjectKind) {
        byKind[kind.rawValue, default: KindReport()].listed += count
    }

    /// A few lines a person reads at the end of a run.
    public var summary: String {
        var lines: [String] = []
        let verb = dryRun ? "would repair" : "repaired"
        lines.append("reconcile run \(runID) \(outcome)\(dryRun ? " (dry run)" : ""): \(totalObjects) objects compared, \(totalDrift) drifted, \(verb) \(dryRun ? totalDrift : totalRepaired)")
        if let events {
            lines.append("  events: \(events.listed) listed since \(UTCTimestamp.string(events.from)), \(events.recovered) missing from the inbox \(dryRun ? "(not stored: dry run)" : "recovered")")
            if let warning = events.warning { lines.append("  WARNING: \(warning)") }
        }
        if refetched > 0 { lines.append("  re-fetched \(refetched) objects marked by the applier") }
        for kind in kinds {
            guard let ledgerKind = kind.ledgerKind, let report = byKind[ledgerKind.rawValue] else { continue }
            var line = "  \(kind.rawValue): \(report.listed) listed, \(report.matched) match"
            if report.drift > 0 {
                line += ", \(report.missingLocally) missing locally, \(report.goneInStripe) gone in Stripe, \(report.fieldDiffers) differ"
                if !report.fields.isEmpty {
                    line += " (" + report.fields.sorted { $0.value > $1.value }.prefix(6).map { "\($0.key) ×\($0.value)" }.joined(separator: ", ") + ")"
                }
                if report.keptNewer > 0 { line += ", \(report.keptNewer) kept (ledger newer)" }
            }
            lines.append(line)
            for example in report.examples.prefix(3) {
                lines.append("    e.g. \(example.id): \(example.drift.rawValue)\(example.fields.isEmpty ? "" : " [" + example.fields.joined(separator: ", ") + "]") → \(example.outcome.rawValue)")
            }
        }
        if let usage { lines += usage.lines }
        if let error { lines.append("  error: \(error)") }
        return lines.joined(separator: "\n")
    }
}
