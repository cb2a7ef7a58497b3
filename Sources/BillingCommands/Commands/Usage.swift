import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation
import Logging

/// `billingd usage`: usage metering from the command line.
struct Usage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Usage metering: report usage to Stripe Billing Meters, show a user's meters.",
        subcommands: [UsageReportCommand.self, UsageShow.self])
}

/// `billingd usage report`: one run of the reporter `serve` runs on its schedule.
struct UsageReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Report pending usage records to Stripe Billing Meters as meter events.",
        discussion: """
            Sends every usage record that is due — of meters with a stripe_meter in the plan catalog, of users with a Stripe customer in the record's scope — as one meter event (POST /v1/billing/meter_events: event_name, payload[stripe_customer_id], payload[value], the record's timestamp, and an identifier made of billingd's id of the record). A record is marked reported only once Stripe answered; one whose answer was lost is sent again with the same identifier, which Stripe refuses as a duplicate: it is counted once. Calls share the Stripe rate limit (STRIPE_RATE_LIMIT) at low priority, one at a time per customer and meter.

            Failed records are retried after 1, 2, 4 … minutes, at most an hour apart, 10 attempts in all; then they stay failed until --retry-failed. Records older than Stripe's 35 days fail for good. Records of users without a Stripe customer wait an hour for one, then are skipped.

            `billingd serve` runs this every BILLINGD_USAGE_REPORT_INTERVAL (1m); both take the same lease, so running it from cron or by hand beside serve is safe.

            Exit status: 0 when every record went (or nothing was due); 1 when some failed (the report says which and why) or the key was refused; 75 when another report run holds the lease — try again later.
            """)

    @Flag(name: .long, help: "Say what would be sent, skipped or given up; send and change nothing.")
    var dryRun = false

    @Flag(name: .long, help: "Print the report as JSON on standard output.")
    var json = false

    @Flag(name: .long, help: "First put records given up on back in the queue, with their attempts counted anew.")
    var retryFailed = false

    @Flag(name: .long, help: "With --retry-failed: also resend records an unanswered attempt may have delivered more than 23 hours ago. Check Stripe's summaries first (billingd reconcile --kinds usage): Stripe no longer deduplicates them.")
    var resendUnconfirmed = false

    @Option(name: .long, help: ArgumentHelp("Calls in flight at once, each for another customer and meter (1…64).", valueName: "n"))
    var concurrency = 16

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...64).contains(concurrency) else { throw ValidationError("--concurrency takes a number from 1 to 64.") }
        if resendUnconfirmed, !retryFailed { throw ValidationError("--resend-unconfirmed goes with --retry-failed.") }
        if dryRun, retryFailed { throw ValidationError("--dry-run changes nothing, so it cannot --retry-failed.") }
    }

    func run() async throws {
        let settings = try global.settings()
        let logger = global.logger("billingd.usage", settings: settings)
        let client = try StripeClients.make(
            settings, logger: logger, purpose: "sends usage to Stripe Billing Meters: a restricted key (rk_…) needs write access to billing meter events")
        try await global.withStore(settings) { store in
            var options = UsageReporter.Options()
            options.dryRun = dryRun
            options.retryFailed = retryFailed
            options.resendUnconfirmed = resendUnconfirmed
            options.concurrency = concurrency
            let reporter = UsageReporter(store: store, client: client, livemode: settings.stripe.apiKeyIsLive ?? false, logger: logger)
            let summary: UsageReportSummary
            do {
                summary = try await reporter.run(options)
            } catch let held as LeaseHeld {
                FileHandle.standardError.write(Data(
                    "billingd usage report: another usage report run holds the lease (\(held.holder), since \(UTCTimestamp.string(held.acquiredAt))); try again later. Nothing was done.\n".utf8))
                throw ExitCode(75)
            } catch let failure as UsageReporter.Failure {
                print(json ? Self.encode(failure.summary) : failure.summary.summary)
                FileHandle.standardError.write(Data("billingd usage report: \(failure.summary.error ?? "\(failure.underlying)")\n".utf8))
                throw ExitCode(1)
            }
            print(json ? Self.encode(summary) : summary.summary)
            if !summary.allWent { throw ExitCode(1) }
        }
    }

    static func encode(_ summary: UsageReportSummary) -> String {
        Output.json(encoding: summary)
    }
}

/// `billingd usage show USER`: a user's meters as the service API answers them.
struct UsageShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print a user's meters: used, limit, remaining, overage, period, and what went to Stripe.",
        discussion: """
            Reads the ledger only (no Stripe call): the user's plan decides each counter's period and limit, as GET /v1/users/{user}/usage answers. For meters with a stripe_meter, the last column counts the period's records by report state (reported, pending, failed, skipped).

            Needs BILLINGD_PLANS. The mode is the key's (STRIPE_API_KEY; test without one).

            Examples:
              billingd usage show user_42
              billingd usage show user_42 --account acct_1Nv0FGQ9RKHgCVdK --json
            """)

    @Argument(help: ArgumentHelp("The app's id of the user.", valueName: "user"))
    var user: String

    @Flag(name: .long, help: "Print the meters as JSON.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("A connected account (Stripe-Account); default the platform account.", valueName: "acct_…"))
    var account: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...255).contains(user.utf8.count) else {
            throw ValidationError("USER is the app's user id, 1 to 255 bytes, as the service API takes it.")
        }
        _ = try BillingCommandSupport.scope(account, base: .test)
    }

    func run() async throws {
        let settings = try global.settings()
        guard let path = settings.plans.catalogPath else {
            throw CommandFailure.configuration("BILLINGD_PLANS is not set: meters are defined in the plan catalog. Set it to your plans.yaml.")
        }
        let catalog: PlanCatalog
        do {
            catalog = try PlanCatalogLoader.load(path: path)
        } catch {
            throw CommandFailure.configuration("\(error)")  // the error names BILLINGD_PLANS and the file
        }
        try await global.withStore(settings) { store in
            let scope = try BillingCommandSupport.scope(account, base: .forAPIKey(isLive: settings.stripe.apiKeyIsLive))
            let now = Int64(Date().timeIntervalSince1970)
            let billing = try await store.users.billing(of: user, in: scope, stripeEntitlements: false)
            let resolution = billing.resolve(catalog, now: now)
            let states = try await UsageController.states(store.usage, catalog: catalog, of: user, in: scope, resolution: resolution, now: now)
            var tallies: [String: UsageReportTally] = [:]
            for state in states where state.meter.stripeMeter != nil {
                if let period = state.period {
                    tallies[state.meter.id] = try await store.usageReports.reportTally(scope: scope, user: user, meter: state.meter.id, period: period)
                }
            }
            if json {
                print(Output.json(Self.json(user: user, scope: scope, resolution: resolution, states: states, tallies: tallies)))
            } else {
                print(Self.text(user: user, scope: scope, resolution: resolution, states: states, tallies: tallies, catalogHasMeters: !catalog.meters.isEmpty))
            }
        }
    }

    static func text(
        user: String, scope: ServiceScope, resolution: PlanResolution, states: [UsageMeterState], tallies: [String: UsageReportTally],
        catalogHasMeters: Bool
    ) -> String {
        let plan = resolution.plan.map { "\($0)\(resolution.source.map { " via \($0.rawValue)" } ?? "")" } ?? "none"
        var lines = ["\(user) (\(scope)): tier \(resolution.tier.id), plan \(plan)"]
        guard catalogHasMeters else {
            lines.append("The plan catalog (BILLINGD_PLANS) defines no meters.")
            return lines.joined(separator: "\n")
        }
        let rows = states.map { state -> [String] in
            [
                state.meter.id, state.meter.kind.rawValue, String(state.used),
                state.isUnlimited ? "unlimited" : String(state.limitCount ?? 0),
                state.remaining.map(String.init) ?? "-", String(state.overage),
                state.period.map { "\(UTCTimestamp.string($0.start)) → \(UTCTimestamp.string($0.end))" } ?? "-",
                stripeColumn(state, tallies[state.meter.id]),
            ]
        }
        lines.append(Output.table(["METER", "KIND", "USED", "LIMIT", "REMAINING", "OVERAGE", "PERIOD", "STRIPE"], rows))
        return lines.joined(separator: "\n")
    }

    private static func stripeColumn(_ state: UsageMeterState, _ tally: UsageReportTally?) -> String {
        guard let event = state.meter.stripeMeter else { return "-" }
        let counts = UsageReportState.allCases.compactMap { reportState -> String? in
            guard let records = tally?.records[reportState], records > 0 else { return nil }
            return "\(records) \(reportState.rawValue)"
        }
        return "\(event): " + (counts.isEmpty ? "nothing yet" : counts.joined(separator: ", "))
    }

    static func json(
        user: String, scope: ServiceScope, resolution: PlanResolution, states: [UsageMeterState], tallies: [String: UsageReportTally]
    ) -> [String: Any] {
        [
            "user": user, "livemode": scope.livemode, "account": scope.account.isEmpty ? NSNull() : scope.account,
            "tier": resolution.tier.id, "plan": resolution.plan ?? NSNull(),
            "meters": states.map { state -> [String: Any] in
                var meter: [String: Any] = [
                    "meter": state.meter.id, "kind": state.meter.kind.rawValue, "used": state.used,
                    "limit": state.limitCount ?? NSNull(), "unlimited": state.isUnlimited, "remaining": state.remaining ?? NSNull(),
                    "overage": state.overage, "enforcement": state.meter.enforcement.rawValue,
                    "period_start": state.period?.start ?? NSNull(), "period_end": state.period?.end ?? NSNull(),
                    "stripe_meter": state.meter.stripeMeter ?? NSNull(),
                ]
                if state.meter.stripeMeter != nil {
                    let tally = tallies[state.meter.id]
                    meter["report"] = Dictionary(uniqueKeysWithValues: UsageReportState.allCases.map { reportState in
                        (reportState.rawValue, ["records": tally?.records[reportState] ?? 0, "quantity": tally?.quantities[reportState] ?? 0] as [String: Any])
                    })
                }
                return meter
            },
        ]
    }
}
