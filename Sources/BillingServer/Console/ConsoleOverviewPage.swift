import BillingCore
import BillingStore
import Foundation

/// `/console/overview`: MRR now and over the last 12 months per currency, the last 30 days'
/// movement, churn, trials and refunds — the revenue metrics API's figures (docs/metrics.md),
/// drawn as SVG with their numbers in tables beneath.
struct ConsoleOverviewPage {
    let console: ConsoleController

    func render(csrf: String) async throws -> HTML {
        let configuration = console.configuration
        let reader = RevenueMetricsReader(
            facts: console.facts,
            configuration: .init(scope: configuration.scope, catalog: configuration.catalog, exchangeRates: configuration.exchangeRates, now: configuration.now))
        let now = console.now
        let monthAgo = now - 30 * 86_400
        // One refresh of the index for every figure of the page.
        let index = try await reader.index()
        let overview = reader.answer(try await index.overview(at: now))
        var points: [(at: Int64, figures: MetricsOverview)] = []
        for at in MetricsInterval.month.boundaries(from: now - 365 * 86_400, to: now) + [now] {
            points.append((at, try await index.overview(at: at)))
        }
        let range = try MetricsRange(from: monthAgo, to: now)
        let movement = try await RevenueMetricsReader.movement(index, range)
        let churn = try await RevenueMetricsReader.churn(index, range)
        let trials = try await RevenueMetricsReader.trials(index, range, now: now)
        let revenue = try await reader.revenue(range, interval: .month)

        var body: [HTML] = []
        let figures = overview.figures
        var cards: [HTML] = figures.mrr.keys.sorted().map { currency in
            ConsolePages.figure("MRR (\(currency.uppercased()))", ConsoleFormat.money(figures.mrr[currency]?.total ?? 0, currency), id: "mrr-\(currency)")
        }
        if figures.mrr.isEmpty { cards.append(ConsolePages.figure("MRR", "none yet", id: "mrr-none")) }
        if let reporting = overview.reporting {
            cards.append(ConsolePages.figure("MRR in \(reporting.currency.uppercased())", ConsoleFormat.money(reporting.mrr, reporting.currency)))
        }
        cards.append(ConsolePages.figure("Active subscriptions", String(figures.activeSubscriptions.total), id: "active-subscriptions"))
        cards.append(ConsolePages.figure("Active trials", String(figures.activeTrials.total), id: "active-trials"))
        body.append("<div class=\"figures\">\(cards)</div>")

        body.append("<h2>MRR over the last 12 months</h2>")
        let currencies = Set(points.flatMap { $0.figures.mrr.keys }).sorted()
        if currencies.isEmpty { body.append("<p class=\"muted\">No paying subscription in the last 12 months.</p>") }
        for currency in currencies {
            let series = points.map { (label: $0.at == now ? "now" : ConsoleFormat.month($0.at), value: $0.figures.mrr[currency]?.total ?? 0) }
            body.append("<section class=\"card\"><h2>\(currency.uppercased())</h2>")
            body.append(ConsoleChart.line(series, title: "MRR in \(currency.uppercased()) over 12 months") { ConsoleFormat.money($0, currency) })
            body.append(ConsolePages.table(
                ["Month start", "MRR"], series.map { ["\($0.label)", "\(ConsoleFormat.money($0.value, currency))"] }, numeric: [1], id: "mrr-series-\(currency)"))
            body.append("</section>")
        }

        body.append("<h2>MRR movement, last 30 days</h2>")
        if movement.isEmpty { body.append("<p class=\"muted\">No movement.</p>") }
        for currency in movement.keys.sorted() {
            guard let change = movement[currency] else { continue }
            let bars: [(label: String, value: Int64)] = [
                ("new", change.new), ("reactivation", change.reactivation), ("expansion", change.expansion),
                ("contraction", -change.contraction), ("churned", -change.churned),
            ]
            body.append("<section class=\"card\"><h2>\(currency.uppercased())</h2>")
            body.append(ConsoleChart.bars(bars, title: "MRR movement in \(currency.uppercased())") { ConsoleFormat.money($0, currency) })
            body.append(ConsolePages.table(
                ["Start", "New", "Reactivation", "Expansion", "Contraction", "Churned", "End"],
                [[change.start, change.new, change.reactivation, change.expansion, change.contraction, change.churned, change.end].map {
                    "\(ConsoleFormat.money($0, currency))"
                }], numeric: Set(0..<7), id: "movement-\(currency)"))
            body.append("</section>")
        }

        body.append("<h2>Active subscriptions and trials</h2><section class=\"card\">")
        body.append(ConsolePages.table(
            ["Store", "Subscriptions", "Trials"],
            [["Stripe", "\(figures.activeSubscriptions.stripe)", "\(figures.activeTrials.stripe)"],
             ["App Store", "\(figures.activeSubscriptions.appStore)", "\(figures.activeTrials.appStore)"]],
            numeric: [1, 2], id: "by-store"))
        body.append(ConsolePages.table(
            ["Plan", "Subscriptions", "MRR"],
            figures.byPlan.keys.sorted().map { plan in
                let entry = figures.byPlan[plan]!
                let mrr = entry.mrr.keys.sorted().map { ConsoleFormat.money(entry.mrr[$0] ?? 0, $0) }.joined(separator: ", ")
                return ["\(plan)", "\(entry.activeSubscriptions)", "\(mrr)"]
            }, numeric: [1, 2], id: "by-plan", empty: "No active subscription."))
        body.append("</section>")

        body.append("<h2>Last 30 days</h2><section class=\"card\">")
        body.append(ConsolePages.table(
            ["", "Stripe", "App Store", "Both"],
            [["Churn (subscriptions ended / at start)", "\(Self.churn(churn.stripe))", "\(Self.churn(churn.appStore))", "\(Self.churn(churn.total))"],
             ["Trials started", "\(trials.stripe.started)", "\(trials.appStore.started)", "\(trials.total.started)"],
             ["Trials converted", "\(trials.stripe.converted)", "\(trials.appStore.converted)", "\(trials.total.converted)"],
             ["Trial conversion", "\(Self.conversion(trials.stripe))", "\(Self.conversion(trials.appStore))", "\(Self.conversion(trials.total))"]],
            numeric: [1, 2, 3], id: "last-30-days"))
        var refunds: [String: RevenueFigures] = [:]
        for bucket in revenue {
            for (currency, split) in bucket.byCurrency { refunds[currency, default: .zero] += split.total }
        }
        body.append(ConsolePages.table(
            ["Currency", "Gross revenue", "Refunds", "Refunded transactions"],
            refunds.keys.sorted().map { currency in
                let total = refunds[currency]!
                return ["\(currency.uppercased())", "\(ConsoleFormat.money(total.gross, currency))", "\(ConsoleFormat.money(total.refunds, currency))",
                        "\(total.refundedTransactions)"]
            }, numeric: [1, 2, 3], id: "refunds", empty: "No revenue in the last 30 days."))
        body.append("</section>")
        return ConsolePages.layout(.overview, title: "Overview", csrf: csrf, body: HTML(body))
    }

    static func churn(_ figures: ChurnFigures) -> String {
        "\(ConsoleFormat.percent(figures.rate)) (\(figures.churned) / \(figures.atStart))"
    }

    static func conversion(_ figures: TrialFigures) -> String {
        let judged = figures.converted + figures.abandoned
        return judged == 0 ? "—" : ConsoleFormat.percent(Double(figures.converted) / Double(judged))
    }
}
