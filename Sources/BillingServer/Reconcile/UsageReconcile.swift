import APITransport
import BillingCore
import BillingStore
import Foundation
import Logging
import StripeAPI
import Synchronization

/// Reconcile's `usage` kind: for every customer billingd reported usage to, per Stripe meter, the
/// user's current usage period and the one before it, Stripe's event summary
/// (`GET /v1/billing/meters/{id}/event_summaries`) against the quantity billingd marked reported.
///
/// Both sides are added up over the same span, the period with its ends on whole minutes (Stripe
/// takes nothing else), by the records' timestamps. Nothing is repaired (see
/// ``UsageReconcileReport``).
enum UsageReconcile {
    /// Stripe aggregates meter events asynchronously, "usually within minutes".
    static let settleWindow: Int64 = 15 * 60
    /// How far back records are looked at: two monthly periods and some.
    static let lookBack: Int64 = 70 * 86_400

    /// The spans compared for a user: the current usage period and the one before it (of the
    /// same length), ends on whole minutes, the current one cut at a little past now.
    static func spans(current: UsagePeriod, now: Int64) -> [UsagePeriod] {
        func floorMinute(_ time: Int64) -> Int64 { time - ((time % 60) + 60) % 60 }
        let length = current.end - current.start
        let previous = UsagePeriod(start: current.start - length, end: current.start)
        let ceiling = floorMinute(now + MeterEventPolicy.futureWindow + 60)
        return [current, previous].compactMap { period in
            let span = UsagePeriod(start: floorMinute(period.start), end: floorMinute(min(period.end, ceiling)))
            return span.start < span.end ? span : nil
        }
    }

    /// How a span compares.
    enum Verdict: Equatable {
        case matched, settling, stripeLower, stripeHigher
    }

    static func verdict(stripe: Double, ledger: ReportedUsage, now: Int64) -> Verdict {
        if stripe == Double(ledger.reported) { return .matched }
        if ledger.inFlight > 0 || (ledger.lastReportedAt ?? Int64.min) >= now - settleWindow { return .settling }
        return stripe < Double(ledger.reported) ? .stripeLower : .stripeHigher
    }
}

extension ReconcileRun {
    /// The meter ids of Stripe's meters by event name (active ones win).
    private func stripeMeters() async throws -> [String: String] {
        struct Meter: Decodable {
            let id: String
            let event_name: String
            let status: String?
        }
        var active: [String: String] = [:]
        var inactive: [String: String] = [:]
        for try await page in client.list("/v1/billing/meters", account: options.account, priority: .bulk) {
            stripeRequests.withLock { $0 += 1 }
            for object in page.objects {
                guard let meter = try? JSONDecoder().decode(Meter.self, from: Data(object.bytes)) else { continue }
                if meter.status == "inactive" { inactive[meter.event_name] = meter.id } else { active[meter.event_name] = meter.id }
            }
        }
        return inactive.merging(active) { _, active in active }
    }

    /// Stripe's aggregated value for one customer on one meter over `span`.
    private func summary(meter: String, customer: String, span: UsagePeriod) async throws -> Double {
        struct Summaries: Decodable {
            struct Summary: Decodable { let aggregated_value: Double }
            let data: [Summary]
        }
        stripeRequests.withLock { $0 += 1 }
        let response = try await client.send(
            .get, "/v1/billing/meters/\(meter)/event_summaries",
            parameters: ["customer": .string(customer), "start_time": .integer(span.start), "end_time": .integer(span.end)],
            account: options.account, priority: .bulk)
        return try response.decode(Summaries.self).data.reduce(0) { $0 + $1.aggregated_value }
    }

    func reconcileUsage(into report: inout ReconcileReport) async throws {
        var result = UsageReconcileReport()
        defer { report.usage = result }
        let now = reconciler.now()
        let usage = reconciler.store.usageReports
        let keys = try await usage.reportedUsageKeys(livemode: livemode, account: account, since: now - UsageReconcile.lookBack)
        guard !keys.isEmpty else { return }
        let meters = try await stripeMeters()
        let users = reconciler.store.users
        var periods: [String: UsagePeriod] = [:]
        var comparisons: [(ReportedUsageKey, String, UsagePeriod)] = []
        var missing = Set<String>()
        for key in keys {
            try checkpoint()
            guard let meter = meters[key.stripeMeter] else {
                missing.insert(key.stripeMeter)
                continue
            }
            if periods[key.user] == nil {
                if let catalog = reconciler.catalog {
                    let billing = try await users.billing(of: key.user, in: key.scope, stripeEntitlements: false)
                    periods[key.user] = billing.resolve(catalog, now: now).usagePeriod(now: now)
                } else {
                    periods[key.user] = .calendarMonth(containing: now)
                }
            }
            for span in UsageReconcile.spans(current: periods[key.user]!, now: now) { comparisons.append((key, meter, span)) }
        }
        result.missingMeters = missing.sorted()

        for chunk in stride(from: 0, to: comparisons.count, by: options.concurrency).map({ comparisons[$0..<min($0 + options.concurrency, comparisons.count)] }) {
            try checkpoint()
            let compared = try await withThrowingTaskGroup(of: (ReportedUsageKey, UsagePeriod, Double, ReportedUsage).self) { group in
                for (key, meter, span) in chunk {
                    group.addTask {
                        let stripe = try await self.summary(meter: meter, customer: key.customer, span: span)
                        return (key, span, stripe, try await usage.reportedUsage(key, span: span))
                    }
                }
                var results: [(ReportedUsageKey, UsagePeriod, Double, ReportedUsage)] = []
                for try await result in group { results.append(result) }
                return results.sorted { ($0.0.customer, $0.0.stripeMeter, $0.1.start) < ($1.0.customer, $1.0.stripeMeter, $1.1.start) }
            }
            for (key, span, stripe, ledger) in compared {
                result.compared += 1
                result.unreported += ledger.unreported
                let verdict = UsageReconcile.verdict(stripe: stripe, ledger: ledger, now: now)
                switch verdict {
                case .matched: result.matched += 1
                case .settling: result.settling += 1
                case .stripeLower: result.stripeLower += 1
                case .stripeHigher: result.stripeHigher += 1
                }
                guard verdict == .stripeLower || verdict == .stripeHigher else { continue }
                logger.warning(
                    "usage drift: Stripe's meter summary differs from what billingd reported",
                    metadata: [
                        "customer": "\(key.customer)", "meter": "\(key.stripeMeter)", "period_start": "\(span.start)",
                        "stripe": "\(stripe)", "reported": "\(ledger.reported)",
                    ])
                if result.examples.count < options.examples {
                    result.examples.append(UsageReconcileReport.Drift(
                        account: key.scope.account.isEmpty ? nil : key.scope.account, customer: key.customer, user: key.user, meter: key.meter,
                        eventName: key.stripeMeter, periodStart: span.start, periodEnd: span.end, stripe: stripe, reported: ledger.reported,
                        unreported: ledger.unreported, kind: verdict == .stripeLower ? "stripe_lower" : "stripe_higher"))
                }
            }
            progress(.init(phase: "usage", listed: result.compared, drift: report.totalDrift + result.drift))
        }
        if !missing.isEmpty {
            logger.warning("no Stripe meter has these event names; their usage counts nowhere", metadata: ["event_names": "\(result.missingMeters.joined(separator: ","))"])
        }
    }
}
