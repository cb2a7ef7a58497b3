import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation

/// `billingd metrics`: the revenue metrics from the ledger, as `GET /v1/metrics/…` answers them.
struct RevenueMetricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Revenue metrics across Stripe and the App Store: MRR, movement, churn, trials, revenue.",
        discussion: """
            Every figure is computed from the ledger as it is now, for the mode serve answers in (the Stripe key's test or live mode; the App Store's Sandbox for test, Production for live). Amounts are integer minor units per currency, never summed across currencies; with BILLINGD_REPORTING_CURRENCY and BILLINGD_FX_RATES the overview adds a total in the reporting currency and names the currencies without a rate. Definitions: docs/metrics.md.

            Instants (--at, --from, --to) are a date (2026-11-01, midnight UTC), an RFC 3339 time (2026-11-01T12:00:00Z) or Unix seconds. A range is [from, to): --to defaults to now, --from to 30 days before --to.

            Output: a table by default; --json prints the HTTP API's JSON, --csv one row per figure.

            Exit status: 0 done; 64 a bad option; 78 a setting is wrong or the SQLite ledger does not exist; 1 the ledger could not be read.
            """,
        subcommands: [MetricsOverviewCommand.self, MetricsMovementCommand.self, MetricsChurnCommand.self, MetricsTrialsCommand.self, MetricsRevenueCommand.self, MetricsSeriesCommand.self])
}

/// The output options every `metrics` command takes.
struct MetricsOutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print the JSON the HTTP API answers (GET /v1/metrics/…).")
    var json = false

    @Flag(name: .long, help: "Print CSV: a header, then one row per figure.")
    var csv = false

    func validate() throws {
        if json, csv { throw ValidationError("--json and --csv are two outputs; choose one.") }
    }
}

/// `--from` and `--to`.
struct MetricsRangeOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Start of the range (inclusive): a date, an RFC 3339 time or Unix seconds. Default: 30 days before --to.", valueName: "instant"))
    var from: String?

    @Option(name: .long, help: ArgumentHelp("End of the range (exclusive). Default: now.", valueName: "instant"))
    var to: String?

    func range() throws -> MetricsRange {
        let end = try to.map { try MetricsCommand.instant($0, option: "--to") } ?? MetricsCommand.now
        let start = try from.map { try MetricsCommand.instant($0, option: "--from") } ?? end - 30 * 86_400
        do { return try MetricsRange(from: start, to: end) } catch {
            throw ValidationError("--from (\(Output.iso8601(seconds: start))) must be before --to (\(Output.iso8601(seconds: end))).")
        }
    }
}

/// `--interval`.
struct MetricsIntervalOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Bucket or step: day, week (ISO, from Monday) or month; UTC.", valueName: "day|week|month"))
    var interval: String = "month"

    func parsed() throws -> MetricsInterval {
        guard let interval = MetricsInterval(rawValue: interval.lowercased()) else {
            throw ValidationError("--interval \(Output.printable(interval)) is not an interval: give day, week or month.")
        }
        return interval
    }
}

/// What the `metrics` commands share: instants, the reader over the ledger, the output.
enum MetricsCommand {
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// An instant from 1970 to the end of year 9999, as the HTTP API takes them.
    static func instant(_ text: String, option: String) throws -> Int64 {
        guard let seconds = Int64(text) ?? UTCTimestamp.parse(text), (0...MetricsController.latestInstant).contains(seconds) else {
            throw ValidationError(
                "\(option) \(Output.printable(text)) is not an instant from 1970 to 9999: give a date (2026-11-01), an RFC 3339 time (2026-11-01T12:00:00Z) or Unix seconds.")
        }
        return seconds
    }

    /// Runs `body` with a reader over the ledger the settings name, in serve's mode.
    static func withReader<Value>(_ global: GlobalOptions, _ body: (RevenueMetricsReader) async throws -> Value) async throws -> Value {
        let settings = try global.settings()
        var catalog = PlanCatalog.freeOnly
        if let path = settings.plans.catalogPath {
            do { catalog = try PlanCatalogLoader.load(path: path) } catch {
                throw CommandFailure.configuration("\(error)")  // the error names BILLINGD_PLANS and the file
            }
        }
        let configuration = RevenueMetricsReader.Configuration(
            scope: BillingDaemon.scope(settings), catalog: catalog, exchangeRates: settings.console.exchangeRates)
        return try await global.withStore(settings) { store in
            try await body(RevenueMetricsReader(facts: store.metrics, configuration: configuration))
        }
    }

    static func printJSON(_ object: [String: Any]) {
        print(String(decoding: MetricsJSON.data(object, pretty: true), as: UTF8.self))
    }

    static func printCSV(_ header: [String], _ rows: [[String]]) {
        print(([header] + rows).map { $0.map(csvField).joined(separator: ",") }.joined(separator: "\n"))
    }

    private static func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Minor units as a decimal amount of the currency: 123456 usd is 1234.56.
    static func amount(_ minorUnits: Int64, _ currency: String) -> String {
        DecimalAmount.string(minorUnits, exponent: Currency.exponent(of: currency))
    }

    static func rate(_ rate: Double?) -> String {
        rate.map { String(format: "%.4f", $0) } ?? ""
    }

    static func percent(_ rate: Double?) -> String {
        rate.map { String(format: "%.2f %%", $0 * 100) } ?? "n/a"
    }

    static func time(_ seconds: Int64) -> String { UTCTimestamp.string(seconds) }
}

struct MetricsOverviewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "overview",
        abstract: "MRR, active subscriptions and active trials at an instant.",
        discussion: """
            MRR: the sum of the monthly amounts of the subscriptions paying at the instant, per currency (Stripe: active or past_due, licensed items less forever discounts, per month; App Store: the paid transaction in force or billing grace, per month). Active subscriptions: those paying. Active trials: those in a free trial. By plan: the plan catalog's tier of the subscription's price or product.
            """)

    @Option(name: .long, help: ArgumentHelp("The instant: a date, an RFC 3339 time or Unix seconds. Default: now.", valueName: "instant"))
    var at: String?

    @OptionGroup var output: MetricsOutputOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let instant = try at.map { try MetricsCommand.instant($0, option: "--at") } ?? MetricsCommand.now
        let answer = try await MetricsCommand.withReader(global) { try await $0.overview(at: instant) }
        let figures = answer.figures
        if output.json { return MetricsCommand.printJSON(MetricsJSON.overview(answer)) }
        var rows: [[String]] = []
        for (currency, split) in figures.mrr.sorted(by: { $0.key < $1.key }) {
            rows.append(["mrr", currency, "", "\(split.total)", "\(split.stripe)", "\(split.appStore)"])
        }
        rows.append(["active_subscriptions", "", "", "\(figures.activeSubscriptions.total)", "\(figures.activeSubscriptions.stripe)", "\(figures.activeSubscriptions.appStore)"])
        rows.append(["active_trials", "", "", "\(figures.activeTrials.total)", "\(figures.activeTrials.stripe)", "\(figures.activeTrials.appStore)"])
        for (plan, planFigures) in figures.byPlan.sorted(by: { $0.key < $1.key }) {
            rows.append(["plan_active_subscriptions", "", plan, "\(planFigures.activeSubscriptions)", "", ""])
            for (currency, mrr) in planFigures.mrr.sorted(by: { $0.key < $1.key }) {
                rows.append(["plan_mrr", currency, plan, "\(mrr)", "", ""])
            }
        }
        if let reporting = answer.reporting {
            rows.append(["reporting_mrr", reporting.currency, "", "\(reporting.mrr)", "", ""])
        }
        if output.csv { return MetricsCommand.printCSV(["metric", "currency", "plan", "total", "stripe", "app_store"], rows) }

        print("At \(MetricsCommand.time(instant))\n")
        let mrr = figures.mrr.sorted(by: { $0.key < $1.key }).map { currency, split in
            [currency, MetricsCommand.amount(split.total, currency), MetricsCommand.amount(split.stripe, currency), MetricsCommand.amount(split.appStore, currency)]
        }
        print(Output.table(["MRR", "total", "stripe", "app_store"], mrr.isEmpty ? [["(none)", "", "", ""]] : mrr))
        if let reporting = answer.reporting {
            let missing = reporting.missingRates.isEmpty ? "" : "  (no rate for \(reporting.missingRates.joined(separator: ", ")): left out)"
            print("in \(reporting.currency): \(MetricsCommand.amount(reporting.mrr, reporting.currency))\(missing)")
        }
        print("")
        print(Output.table(
            ["", "total", "stripe", "app_store"],
            [
                ["active subscriptions", "\(figures.activeSubscriptions.total)", "\(figures.activeSubscriptions.stripe)", "\(figures.activeSubscriptions.appStore)"],
                ["active trials", "\(figures.activeTrials.total)", "\(figures.activeTrials.stripe)", "\(figures.activeTrials.appStore)"],
            ]))
        if !figures.byPlan.isEmpty {
            print("")
            print(Output.table(
                ["plan", "active", "MRR"],
                figures.byPlan.sorted(by: { $0.key < $1.key }).map { plan, planFigures in
                    [plan, "\(planFigures.activeSubscriptions)",
                     planFigures.mrr.sorted(by: { $0.key < $1.key }).map { currency, mrr in "\(MetricsCommand.amount(mrr, currency)) \(currency)" }.joined(separator: ", ")]
                }))
        }
    }
}

struct MetricsMovementCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "movement",
        abstract: "How MRR moved over [from, to), per currency.",
        discussion: """
            Per subscription, comparing from and to: new (paying at to, never paying at or before from), reactivation (paying at to, not at from, paying some time before from), expansion and contraction (paying at both, amount up or down), churned (paying at from, not at to). end − start = new + reactivation + expansion − contraction − churned, exactly.
            """)

    @OptionGroup var range: MetricsRangeOptions
    @OptionGroup var output: MetricsOutputOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let range = try self.range.range()
        let movements = try await MetricsCommand.withReader(global) { try await $0.movement(range) }
        if output.json { return MetricsCommand.printJSON(MetricsJSON.movement(movements, range: range)) }
        let sorted = movements.sorted { $0.key < $1.key }
        let header = ["currency", "start", "end", "new", "reactivation", "expansion", "contraction", "churned"]
        if output.csv {
            return MetricsCommand.printCSV(header, sorted.map { currency, m in
                [currency] + [m.start, m.end, m.new, m.reactivation, m.expansion, m.contraction, m.churned].map { "\($0)" }
            })
        }
        print("From \(MetricsCommand.time(range.from)) to \(MetricsCommand.time(range.to))\n")
        let rows = sorted.map { currency, m in
            [currency] + [m.start, m.end, m.new, m.reactivation, m.expansion, m.contraction, m.churned].map { MetricsCommand.amount($0, currency) }
        }
        print(Output.table(header, rows.isEmpty ? [["(none)"] + Array(repeating: "", count: 7)] : rows))
    }
}

struct MetricsChurnCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "churn",
        abstract: "Churn over [from, to): of the subscriptions paying at from, those not paying at to.",
        discussion: "rate = churned ÷ paying at from (a count), per store and in total; none when nothing paid at from.")

    @OptionGroup var range: MetricsRangeOptions
    @OptionGroup var output: MetricsOutputOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let range = try self.range.range()
        let churn = try await MetricsCommand.withReader(global) { try await $0.churn(range) }
        if output.json { return MetricsCommand.printJSON(MetricsJSON.churn(churn)) }
        let stores: [(String, ChurnFigures)] = [("total", churn.total), ("stripe", churn.stripe), ("app_store", churn.appStore)]
        if output.csv {
            return MetricsCommand.printCSV(
                ["store", "at_start", "churned", "rate"], stores.map { [$0, "\($1.atStart)", "\($1.churned)", MetricsCommand.rate($1.rate)] })
        }
        print("From \(MetricsCommand.time(range.from)) to \(MetricsCommand.time(range.to))\n")
        print(Output.table(["", "paying at start", "churned", "rate"], stores.map { [$0, "\($1.atStart)", "\($1.churned)", MetricsCommand.percent($1.rate)] }))
    }
}

struct MetricsTrialsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trials",
        abstract: "Free trials started in [from, to), and what became of them.",
        discussion: "converted: paying after the trial (a refund of the first paid period undoes it); abandoned: ended without paying; pending: still in trial now. converted + abandoned + pending = started.")

    @OptionGroup var range: MetricsRangeOptions
    @OptionGroup var output: MetricsOutputOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let range = try self.range.range()
        let trials = try await MetricsCommand.withReader(global) { try await $0.trials(range) }
        if output.json { return MetricsCommand.printJSON(MetricsJSON.trials(trials)) }
        let stores: [(String, TrialFigures)] = [("total", trials.total), ("stripe", trials.stripe), ("app_store", trials.appStore)]
        let header = ["store", "started", "converted", "abandoned", "pending"]
        let rows = stores.map { [$0, "\($1.started)", "\($1.converted)", "\($1.abandoned)", "\($1.pending)"] }
        if output.csv { return MetricsCommand.printCSV(header, rows) }
        print("Started from \(MetricsCommand.time(range.from)) to \(MetricsCommand.time(range.to))\n")
        print(Output.table(header, rows))
    }
}

struct MetricsRevenueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revenue",
        abstract: "Revenue in UTC buckets over [from, to): gross, refunds, net, transactions, refund rate.",
        discussion: """
            gross: Stripe invoices' amount_paid by paid_at, App Store transactions with a price by purchase date; refunds: Stripe refunds at their time, App Store refunded transactions at their revocation; net = gross − refunds; refund rate = refunded transactions ÷ transactions. Per currency and store. The first and last buckets are cut to the range; at most 1000 buckets.
            """)

    @OptionGroup var range: MetricsRangeOptions
    @OptionGroup var interval: MetricsIntervalOption
    @OptionGroup var output: MetricsOutputOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let range = try self.range.range()
        let interval = try self.interval.parsed()
        let buckets = try await MetricsCommand.withReader(global) { reader in
            do { try reader.checkPoints(range, interval: interval, series: false) } catch let error as MetricsParameterError { throw ValidationError("--interval: \(error.message)") }
            return try await reader.revenue(range, interval: interval)
        }
        if output.json { return MetricsCommand.printJSON(MetricsJSON.revenue(buckets)) }
        var rows: [[String]] = []
        for bucket in buckets {
            for (currency, split) in bucket.byCurrency.sorted(by: { $0.key < $1.key }) {
                for (store, figures) in [("total", split.total), ("stripe", split.stripe), ("app_store", split.appStore)] {
                    let amounts = [figures.gross, figures.refunds, figures.net].map { output.csv ? "\($0)" : MetricsCommand.amount($0, currency) }
                    rows.append(
                        [MetricsCommand.time(bucket.start), MetricsCommand.time(bucket.end), currency, store] + amounts
                            + ["\(figures.transactions)", "\(figures.refundedTransactions)", output.csv ? MetricsCommand.rate(figures.refundRate) : MetricsCommand.percent(figures.refundRate)])
                }
            }
        }
        let header = ["start", "end", "currency", "store", "gross", "refunds", "net", "transactions", "refunded_transactions", "refund_rate"]
        if output.csv { return MetricsCommand.printCSV(header, rows) }
        print(Output.table(header, rows.isEmpty ? [["(no payments or refunds)"] + Array(repeating: "", count: 9)] : rows))
    }
}

struct MetricsSeriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "series",
        abstract: "MRR, active subscriptions or active trials at each UTC day, week or month start in [from, to].",
        discussion: "Each point is the overview's figure at that instant (see `billingd metrics overview --help`); at most 1000 points.")

    @Option(name: .long, help: ArgumentHelp("The figure: mrr, active_subscriptions or active_trials.", valueName: "metric"))
    var metric: String = "mrr"

    @OptionGroup var range: MetricsRangeOptions
    @OptionGroup var interval: MetricsIntervalOption
    @OptionGroup var output: MetricsOutputOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        guard let metric = MetricsSeriesMetric(rawValue: metric) else {
            throw ValidationError("--metric \(Output.printable(self.metric)) is not a series: give mrr, active_subscriptions or active_trials.")
        }
        let range = try self.range.range()
        let interval = try self.interval.parsed()
        let points = try await MetricsCommand.withReader(global) { reader in
            do { try reader.checkPoints(range, interval: interval, series: true) } catch let error as MetricsParameterError { throw ValidationError("--interval: \(error.message)") }
            return try await reader.series(range, interval: interval)
        }
        if output.json { return MetricsCommand.printJSON(MetricsJSON.series(points, metric: metric)) }
        var rows: [[String]] = []
        for point in points {
            let at = MetricsCommand.time(point.figures.at)
            switch metric {
            case .mrr:
                for (currency, split) in point.figures.mrr.sorted(by: { $0.key < $1.key }) {
                    rows.append([at, currency] + [split.total, split.stripe, split.appStore].map { output.csv ? "\($0)" : MetricsCommand.amount($0, currency) })
                }
                if let reporting = point.reporting {
                    rows.append([at, "\(reporting.currency) (reporting)", output.csv ? "\(reporting.mrr)" : MetricsCommand.amount(reporting.mrr, reporting.currency), "", ""])
                }
            case .activeSubscriptions, .activeTrials:
                let split = metric == .activeSubscriptions ? point.figures.activeSubscriptions : point.figures.activeTrials
                rows.append([at, "", "\(split.total)", "\(split.stripe)", "\(split.appStore)"])
            }
        }
        let header = ["at", "currency", "total", "stripe", "app_store"]
        if output.csv { return MetricsCommand.printCSV(header, rows) }
        print(Output.table(header, rows.isEmpty ? [["(no points)", "", "", "", ""]] : rows))
    }
}
