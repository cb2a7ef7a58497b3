import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation
import Logging
import StripeAPI

/// `billingd reconcile`: one run from cron or by hand.
struct Reconcile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare the ledger with Stripe's API, repair drift and recover missed events.",
        discussion: """
            Walks Stripe's /v1/events from the stored cursor and stores every event the inbox lacks (and applies it); re-fetches objects the applier marked as ambiguous; then lists customers, subscriptions (status=all), invoices, prices, products, and per customer the payment methods and active entitlements, compares each object with the ledger field by field, and repairs the ledger through the same version guard as webhooks: an object the ledger holds a newer snapshot of is never overwritten, a deleted one never comes back.

            With usage reported to Stripe Billing Meters, it also compares each customer's meter event summaries with the usage billingd reported, per meter and usage period (the current one and the one before, periods from BILLINGD_PLANS); usage drift is reported, never repaired: billingd does not invent or cancel meter events.

            Drift is reported by kind (missing locally, gone in Stripe, field differs, with the fields and examples). Exit status: 0 when the run completed, whether or not it found drift; 1 when it could not (bad key, Stripe unreachable past retries); 75 when another run (cron, or the scheduler in `serve`) holds the lease — try again later.

            When the App Store Server API is configured (APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY), `billingd appstore reconcile` runs after it for each environment (not with --account); its reports appear under "appstore" in the JSON, and the worst exit status wins.

            Needs STRIPE_API_KEY (a restricted key with read access to these resources is enough, plus write access to nothing) or the App Store Server API settings. Cron, daily at 04:17:
              17 4 * * *  billingd --config /etc/billingd/billingd.env reconcile --json >> /var/log/billingd-reconcile.jsonl
            """)

    @Flag(name: .long, help: "Compare and report only; change nothing (events are not stored, the cursor does not move).")
    var dryRun = false

    @Flag(name: .long, help: "Print the report as JSON on standard output.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Which lists to compare, comma-separated: \(ReconcileKind.allCases.map(\.rawValue).joined(separator: ",")). Default: all.", valueName: "kinds"))
    var kinds: String?

    @Option(name: .long, help: ArgumentHelp("Compare only objects created on or after this date (2026-11-01 or 2026-11-01T12:00:00Z). Skips gone-in-Stripe detection, which needs complete lists.", valueName: "date"))
    var since: String?

    @Option(name: .long, help: ArgumentHelp("A connected account to reconcile (Stripe-Account); default the platform account.", valueName: "acct_…"))
    var account: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let kinds { _ = try parsedKinds(kinds) }
        if let since, UTCTimestamp.parse(since) == nil {
            throw ValidationError("--since \(since) is not a date; use 2026-11-01 or 2026-11-01T12:00:00Z.")
        }
        if let account, !account.hasPrefix("acct_") || account.count < 8 {
            throw ValidationError("--account takes a connected account id such as acct_1Nv0FGQ9RKHgCVdK.")
        }
    }

    private func parsedKinds(_ text: String) throws -> [ReconcileKind] {
        do {
            let kinds = try ReconcileKind.parse(text)
            guard !kinds.isEmpty else { throw ValidationError("--kinds is empty; name at least one of \(ReconcileKind.allCases.map(\.rawValue).joined(separator: ", ")).") }
            return kinds
        } catch let error as ReconcileError {
            throw ValidationError("--kinds: \(error)")
        }
    }

    func run() async throws {
        let settings = try global.settings()
        let logger = global.logger("billingd.reconcile", settings: settings)
        let stripe = settings.stripe.client(logger: logger)
        // App Store reconcile rides along unless the run is about one connected account.
        let appStore = account == nil ? try settings.appStore.clients(logger: logger) : [:]
        guard stripe != nil || !appStore.isEmpty else { throw CommandFailure.configuration(ReconcileError.noAPIKey.description) }
        try await global.withStore(settings, announcing: true, creating: true) { store in

            var stripeReport: ReconcileReport?
            var exitCode: Int32?
            if let stripe {
                var options = Reconciler.Options()
                if let kinds { options.kinds = try parsedKinds(kinds) }
                options.dryRun = dryRun
                options.since = since.flatMap(UTCTimestamp.parse)
                options.account = account
                options.applyRecoveredEvents = true
                var catalog: PlanCatalog?
                if let path = settings.plans.catalogPath {
                    do {
                        catalog = try PlanCatalogLoader.load(path: path)
                    } catch {
                        throw CommandFailure.configuration("\(error)")  // the error names BILLINGD_PLANS and the file
                    }
                }
                let reconciler = Reconciler(
                    store: store, client: stripe, livemode: settings.stripe.apiKeyIsLive ?? false, logger: logger,
                    inbox: store.inbox,
                    applier: store.applier(.init(apiVersion: settings.stripe.apiVersion)), catalog: catalog)
                do {
                    stripeReport = try await reconciler.run(options) { progress in
                        Output.progress("reconcile: \(progress.phase) \(progress.listed) listed, \(progress.drift) drifted so far")
                    }
                    Output.endProgress()
                } catch let held as LeaseHeld {
                    Output.endProgress()
                    FileHandle.standardError.write(Data("billingd reconcile: \(held). Nothing was done.\n".utf8))
                    throw ExitCode(75)
                } catch let failure as Reconciler.Failure {
                    Output.endProgress()
                    stripeReport = failure.report
                    FileHandle.standardError.write(Data("billingd reconcile: \(failure.underlying)\n".utf8))
                    exitCode = 1
                }
            }

            var appStoreReports: [AppStoreReconcileReport] = []
            if !appStore.isEmpty {
                var options = AppStoreReconciler.Options()
                options.dryRun = dryRun
                options.since = since.flatMap(UTCTimestamp.parse)
                options.applyRecoveredEvents = true
                let clients = [AppStoreEnvironment.production, .sandbox].compactMap { appStore[$0] }
                let outcome = await AppStoreReconcile.run(clients, store: store, settings: settings, options: options, logger: logger)
                appStoreReports = outcome.reports
                if outcome.exitCode == 1 || exitCode == nil { exitCode = outcome.exitCode ?? exitCode }
            }

            if json {
                print(Self.encode(stripeReport, appStore: appStoreReports))
            } else {
                print(([stripeReport?.summary] + appStoreReports.map(\.summary)).compactMap { $0 }.joined(separator: "\n"))
            }
            if let exitCode { throw ExitCode(exitCode) }
        }
    }

    /// Stripe's report as before; with App Store runs, their reports under `appstore`.
    static func encode(_ report: ReconcileReport?, appStore: [AppStoreReconcileReport]) -> String {
        guard !appStore.isEmpty else { return report.map(encode) ?? "{}" }
        let encoder = JSONEncoder()
        var object: [String: Any] = [:]
        if let report, let data = try? encoder.encode(report), let decoded = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
            object = decoded
        }
        if let data = try? encoder.encode(appStore), let decoded = try? JSONSerialization.jsonObject(with: data) {
            object["appstore"] = decoded
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func encode(_ report: ReconcileReport) -> String {
        Output.json(encoding: report)
    }
}
