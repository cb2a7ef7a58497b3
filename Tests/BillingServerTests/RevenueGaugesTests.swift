import BillingCore
import BillingStore
import Foundation
import Logging
import Testing

@testable import BillingServer

@Suite("Revenue gauges: billingd_mrr_minor_units, billingd_active_subscriptions, billingd_active_trials")
struct RevenueGaugesTests {
    func gauges(_ facts: InMemoryMetricsFacts, metrics: BillingMetrics) throws -> RevenueGauges {
        let reader = RevenueMetricsReader(facts: facts, configuration: .init(scope: .test, catalog: try MetricsScenario.catalog))
        return RevenueGauges(reader: reader, metrics: metrics, logger: Logger(label: "test"))
    }

    func lines(_ metrics: BillingMetrics) -> Set<String> {
        Set(String(decoding: metrics.render(), as: UTF8.self).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") })
    }

    @Test("Set from the histories as of the instant, per currency, store and plan; a figure that is gone falls to 0")
    func recompute() async throws {
        let metrics = BillingMetrics()
        try await gauges(try MetricsScenario.facts, metrics: metrics).recompute(at: MetricsScenario.d(40))
        let day40 = lines(metrics)
        for line in [
            #"billingd_mrr_minor_units{currency="usd",store="stripe"} 2900.0"#,
            #"billingd_mrr_minor_units{currency="usd",store="app_store"} 999.0"#,
            #"billingd_mrr_minor_units{currency="eur",store="stripe"} 7500.0"#,
            #"billingd_mrr_minor_units{currency="gbp",store="stripe"} 833.0"#,
            #"billingd_mrr_minor_units{currency="jpy",store="app_store"} 40.0"#,
            #"billingd_active_subscriptions{store="stripe",plan="pro"} 2.0"#,
            #"billingd_active_subscriptions{store="stripe",plan="team"} 1.0"#,
            #"billingd_active_subscriptions{store="app_store",plan="pro"} 1.0"#,
            #"billingd_active_subscriptions{store="app_store",plan="team"} 1.0"#,
            #"billingd_active_trials{store="app_store"} 1.0"#,
            #"billingd_active_trials{store="stripe"} 0.0"#,
        ] {
            #expect(day40.contains(line), "\(line) not in \(day40.sorted())")
        }
        #expect(!day40.contains { $0.contains("777700") }, "live mode never counts")
    }

    @Test("A series that disappears between two recomputations of one RevenueGauges is set to 0")
    func disappearing() async throws {
        let metrics = BillingMetrics()
        let gauges = try gauges(try MetricsScenario.facts, metrics: metrics)
        await gauges.recompute(at: MetricsScenario.d(40))
        // On day 100 every subscription of the scenario but the canceled one has ended or expired
        // on the App Store; the Stripe ones still pay.
        await gauges.recompute(at: MetricsScenario.d(100))
        let after = lines(metrics)
        #expect(after.contains(#"billingd_mrr_minor_units{currency="jpy",store="app_store"} 0.0"#), "\(after.sorted())")
        #expect(after.contains(#"billingd_mrr_minor_units{currency="usd",store="app_store"} 0.0"#))
        #expect(after.contains(#"billingd_mrr_minor_units{currency="usd",store="stripe"} 2900.0"#))
        #expect(after.contains(#"billingd_active_trials{store="app_store"} 0.0"#))
    }

    @Test("A store that cannot be read leaves the gauges as they were")
    func unreadable() async throws {
        let metrics = BillingMetrics()
        let reader = RevenueMetricsReader(facts: FailingMetricsFacts(), configuration: .init(scope: .test))
        await RevenueGauges(reader: reader, metrics: metrics, logger: Logger(label: "test")).recompute(at: 0)
        #expect(!lines(metrics).contains { $0.hasPrefix("billingd_mrr_minor_units") })
    }
}
