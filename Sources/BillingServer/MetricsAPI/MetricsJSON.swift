import BillingCore
import Foundation

/// The JSON of the revenue metrics, one shape for `GET /v1/metrics/…` and `billingd metrics
/// --json`: amounts in integer minor units, currencies lower-case, stores as `stripe` and
/// `app_store` beside their `total`. A rate without a denominator (no subscription paying at the
/// start) is null.
public enum MetricsJSON {
    /// `{"at", "mrr": {cur: {total, stripe, app_store}}, "active_subscriptions", "active_trials",
    /// "by_plan": {plan: {active_subscriptions, mrr: {cur: n}}}, "reporting"?}`.
    public static func overview(_ answer: OverviewAnswer) -> [String: Any] {
        let figures = answer.figures
        var json: [String: Any] = [
            "at": figures.at,
            "mrr": mrr(figures),
            "active_subscriptions": split(figures.activeSubscriptions),
            "active_trials": split(figures.activeTrials),
            "by_plan": figures.byPlan.mapValues { plan -> [String: Any] in
                ["active_subscriptions": plan.activeSubscriptions, "mrr": plan.mrr]
            },
        ]
        if let reporting = answer.reporting { json["reporting"] = self.reporting(reporting) }
        return json
    }

    /// `{"from", "to", cur: {start, end, new, reactivation, expansion, contraction, churned}}`.
    public static func movement(_ movements: [String: MRRMovement], range: MetricsRange) -> [String: Any] {
        var json: [String: Any] = ["from": range.from, "to": range.to]
        for (currency, movement) in movements {
            json[currency] = [
                "start": movement.start, "end": movement.end, "new": movement.new, "reactivation": movement.reactivation,
                "expansion": movement.expansion, "contraction": movement.contraction, "churned": movement.churned,
            ]
        }
        return json
    }

    /// `{"total": {at_start, churned, rate}, "stripe": {…}, "app_store": {…}}`.
    public static func churn(_ churn: StoreSplit<ChurnFigures>) -> [String: Any] {
        func figures(_ figures: ChurnFigures) -> [String: Any] {
            ["at_start": figures.atStart, "churned": figures.churned, "rate": figures.rate.map { $0 as Any } ?? NSNull()]
        }
        return ["total": figures(churn.total), "stripe": figures(churn.stripe), "app_store": figures(churn.appStore)]
    }

    /// `{"total": {started, converted, abandoned, pending}, "stripe": {…}, "app_store": {…}}`.
    public static func trials(_ trials: StoreSplit<TrialFigures>) -> [String: Any] {
        func figures(_ figures: TrialFigures) -> [String: Any] {
            ["started": figures.started, "converted": figures.converted, "abandoned": figures.abandoned, "pending": figures.pending]
        }
        return ["total": figures(trials.total), "stripe": figures(trials.stripe), "app_store": figures(trials.appStore)]
    }

    /// `{"buckets": [{start, end, cur: {gross, refunds, net, transactions, refunded_transactions,
    /// stripe: {…}, app_store: {…}}}]}`.
    public static func revenue(_ buckets: [RevenueBucket]) -> [String: Any] {
        func figures(_ figures: RevenueFigures) -> [String: Any] {
            [
                "gross": figures.gross, "refunds": figures.refunds, "net": figures.net, "transactions": figures.transactions,
                "refunded_transactions": figures.refundedTransactions,
            ]
        }
        return [
            "buckets": buckets.map { bucket -> [String: Any] in
                var json: [String: Any] = ["start": bucket.start, "end": bucket.end]
                for (currency, split) in bucket.byCurrency {
                    var total = figures(split.total)
                    total["stripe"] = figures(split.stripe)
                    total["app_store"] = figures(split.appStore)
                    json[currency] = total
                }
                return json
            }
        ]
    }

    /// `{"points": [{"at", "value"}]}`: `value` is the overview's member of that name (MRR with
    /// its reporting total when configured).
    public static func series(_ points: [OverviewAnswer], metric: MetricsSeriesMetric) -> [String: Any] {
        ["points": points.map { point -> [String: Any] in ["at": point.figures.at, "value": value(point, metric: metric)] }]
    }

    static func value(_ point: OverviewAnswer, metric: MetricsSeriesMetric) -> [String: Any] {
        switch metric {
        case .mrr:
            var value = mrr(point.figures)
            if let reporting = point.reporting { value["reporting"] = self.reporting(reporting) }
            return value
        case .activeSubscriptions: return split(point.figures.activeSubscriptions)
        case .activeTrials: return split(point.figures.activeTrials)
        }
    }

    static func mrr(_ figures: MetricsOverview) -> [String: Any] {
        figures.mrr.mapValues { split($0) }
    }

    static func split(_ split: StoreSplit<Int64>) -> [String: Any] {
        ["total": split.total, "stripe": split.stripe, "app_store": split.appStore]
    }

    static func reporting(_ reporting: ReportingTotal) -> [String: Any] {
        ["currency": reporting.currency, "mrr": reporting.mrr, "missing_rates": reporting.missingRates]
    }

    /// Compact, key-sorted bytes of a JSON object.
    public static func data(_ object: [String: Any], pretty: Bool = false) -> Data {
        var options: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes]
        if pretty { options.insert(.prettyPrinted) }
        return (try? JSONSerialization.data(withJSONObject: object, options: options)) ?? Data("{}".utf8)
    }
}
