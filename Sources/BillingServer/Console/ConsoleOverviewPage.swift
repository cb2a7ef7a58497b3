import BillingCore
import BillingStore
import Foundation

/// `/console/overview`: MRR now and over the last 12 months per currency, the last 30 days'
/// movement, churn, trials and refunds — the revenue metrics API's figures (docs/metrics.md),
/// drawn as SVG with their numbers in tables beneath.
struct ConsoleOverviewPage {
    let console: ConsoleController

    func render(csrf: String) async throws -> HTML {
        let kept = try await console.overviewFigures.visit()
        let (now, overview, movement, churn, trials) = (kept.asOf, kept.overview, kept.movement, kept.churn, kept.trials)
        let points = kept.points.map { (at: $0.at, figures: $0.figures) }

        var body: [HTML] = []
        let freshness = console.overviewFigures.configuration
        let stale: HTML = console.now - now >= freshness.maximumAge ? " (being recomputed: reload in a minute)" : .empty
        body.append("""
            <p class="muted" id="as-of">Figures as of \(ConsoleFormat.clock(now, today: console.now)) UTC\(stale). \
            They are recomputed when the ledger changes, at most every \(String(freshness.interval)) seconds, \
            and every \(String(freshness.maximumAge / 60)) minutes while the console is open.</p>
            """)
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
        if movement.isEmpty { body.append("<p class=\"muted\" id=\"no-movement\">No movement.</p>") }
        for currency in movement.keys.sorted() {
            guard let change = movement[currency] else { continue }
            let bars: [(label: String, value: Int64)] = [
                ("new", change.new), ("reactivation", change.reactivation), ("expansion", change.expansion),
                ("contraction", -change.contraction), ("churned", -change.churned),
            ]
            body.append("<section class=\"card\"><h2>\(currency.uppercased())</h2>")
            if bars.allSatisfy({ $0.value == 0 }) {
                // No bar to draw: an empty chart reads as a drawing that failed.
                body.append("<p class=\"muted\" id=\"no-movement-\(currency)\">No movement.</p>")
            } else {
                body.append(ConsoleChart.bars(bars, title: "MRR movement in \(currency.uppercased())") { ConsoleFormat.money($0, currency) })
            }
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
        let refunds = kept.revenue
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
