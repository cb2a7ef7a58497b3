import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation
import UnixSignals

/// `billingd export`: ledger data for finance.
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export ledger data for finance.",
        subcommands: [Invoices.self])

    /// `billingd export invoices`.
    struct Invoices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Export invoice history as CSV or JSON Lines, exact to the cent, streamed.",
            discussion: """
                Rows are ordered by creation time, then invoice id; the same ledger always gives byte-identical output. Amounts are given twice: as an exact decimal string in the currency's exponent (JPY 0, KWD 3, USD 2 …) and as integer minor units. The column schema is versioned (schema_version, see docs/export.md). The range is on the invoice's creation time, UTC, from inclusive and to exclusive: --from 2026-01 --to 2026-02 is January 2026.

                --output is written to a temporary file beside it and moved into place only when complete, so it never holds half an export; an existing file is replaced only with --force, and only a regular file is ever written (a FIFO, device or symbolic link is refused: to feed one, write to standard output). A per-currency totals summary goes to standard error (or to --summary-json FILE), to tie out against Stripe's dashboard.

                Examples:
                  billingd export invoices --from 2026-01 --to 2026-02 --output january.csv
                  billingd export invoices --status paid --currency eur -o paid-eur.jsonl
                  billingd export invoices --lines --user user_42 --test --output lines.csv
                """)

        @Option(help: ArgumentHelp(
            "Only invoices created at or after this instant (UTC): 2026, 2026-01, 2026-01-31, 2026-01-31T12:00:00Z or Unix seconds.",
            valueName: "instant"))
        var from: String?

        @Option(help: ArgumentHelp("Only invoices created before this instant (exclusive); same forms as --from.", valueName: "instant"))
        var to: String?

        @Option(help: ArgumentHelp(
            "Only invoices in this status (repeatable, or comma-separated).", valueName: "draft|open|paid|uncollectible|void"))
        var status: [String] = []

        @Option(help: ArgumentHelp("Only invoices of this Stripe customer.", valueName: "cus_…"))
        var customer: String?

        @Option(help: ArgumentHelp(
            "Only invoices of customers tied to this app user (customer.metadata.app_user_id or a Checkout client_reference_id).",
            valueName: "app-user-id"))
        var user: String?

        @Option(help: ArgumentHelp("Only invoices in this currency.", valueName: "code"))
        var currency: String?

        @Option(help: ArgumentHelp("Only invoices of this connected account; \"platform\" for the platform account's own.", valueName: "acct_…"))
        var account: String?

        @Flag(exclusivity: .exclusive)
        var mode: StripeMode = .livemode

        @Option(help: ArgumentHelp("Output format; default csv, or jsonl when --output ends in .jsonl or .ndjson.", valueName: "csv|jsonl"))
        var format: InvoiceExportRequest.Format?

        @Flag(help: "One row per invoice line instead of per invoice; the invoice's columns repeat on each line.")
        var lines = false

        @Option(name: [.customShort("o"), .long], help: ArgumentHelp(
            "Write to this file, atomically (default: standard output).", valueName: "file"))
        var output: String?

        @Option(name: .customLong("summary-json"), help: ArgumentHelp(
            "Write the per-currency totals summary as JSON to this file instead of standard error.", valueName: "file"))
        var summaryJSON: String?

        @Flag(help: "Replace --output and --summary-json files that exist (regular files only; a FIFO, device or symbolic link is always refused: write to standard output to feed one).")
        var force = false

        @Flag(help: "Start the CSV with a UTF-8 byte order mark, so that Excel reads names and descriptions correctly.")
        var bom = false

        @Flag(help: "First recover missed events and reconcile the invoices created in the range with Stripe's API (needs STRIPE_API_KEY of the exported mode), so the export reflects Stripe even after a webhook outage. Exits 1 without exporting when the reconcile cannot complete.")
        var reconcileFirst = false

        @OptionGroup var global: GlobalOptions

        func validate() throws {
            _ = try request()
        }

        /// The export request the options describe, or a message that names the bad option.
        func request() throws -> InvoiceExportRequest {
            func instant(_ option: String, _ text: String?) throws -> Int64? {
                guard let text else { return nil }
                guard let seconds = UTCTimestamp.parse(text) else {
                    throw ValidationError(
                        "--\(option) \"\(text)\" is not an instant: use 2026, 2026-01, 2026-01-31, 2026-01-31T12:00:00Z (UTC unless an offset is given) or Unix seconds.")
                }
                return seconds
            }
            var resolvedFormat = format ?? .csv
            if format == nil, let output, [".jsonl", ".ndjson"].contains(where: { output.lowercased().hasSuffix($0) }) {
                resolvedFormat = .jsonl
            }
            let statuses = status.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                .filter { !$0.isEmpty }
            let request = InvoiceExportRequest(
                format: resolvedFormat, layout: lines ? .lines : .invoices,
                createdFrom: try instant("from", from), createdBefore: try instant("to", to),
                statuses: statuses, customer: customer, appUser: user, currency: currency?.lowercased(),
                livemode: mode == .livemode, account: account.map { $0 == "platform" ? "" : $0 }, byteOrderMark: bom)
            do {
                try request.validate()
            } catch {
                throw ValidationError(error.description)
            }
            func resolved(_ path: String?) -> String? {
                path.map { URL(fileURLWithPath: $0).standardizedFileURL.resolvingSymlinksInPath().path }
            }
            if summaryJSON != nil, resolved(summaryJSON) == resolved(output) {
                throw ValidationError("--summary-json and --output name the same file.")
            }
            return request
        }

        func run() async throws {
            let request = try request()
            for status in request.statuses where !InvoiceExportRequest.knownStatuses.contains(status) {
                Self.standardError("warning: \"\(status)\" is not an invoice status Stripe documents (\(InvoiceExportRequest.knownStatuses.joined(separator: ", "))); exporting the invoices that have it, if any.")
            }
            // Before anything is read or reconciled: an output that will be refused is said at once.
            for path in [output, summaryJSON].compactMap({ $0 }) where path != "-" {
                do {
                    _ = try AtomicExportFile.checkTarget(path, overwrite: force)
                } catch {
                    throw CommandFailure.cannotCreate(error.description)
                }
            }
            let settings = try global.settings()
            try await global.withStore(settings) { store in
                if reconcileFirst {
                    try await reconcile(request, settings: settings, store: store)
                }

                // SIGINT, SIGTERM and SIGHUP stop the export cleanly: the temporary file is removed.
                let cancellation = ExportCancellation()
                let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm, .sighup)
                let watcher = Task { () -> UnixSignal? in
                    for await signal in signals {
                        cancellation.cancel()
                        return signal
                    }
                    return nil
                }
                defer { watcher.cancel() }

                var file: AtomicExportFile?
                if let output, output != "-" {
                    do {
                        file = try AtomicExportFile.create(path: output, overwrite: force)
                    } catch {
                        throw CommandFailure.cannotCreate(String(describing: error))
                    }
                }
                let destination: any ExportDestination = file?.writer ?? FileDescriptorWriter.standardOutput
                let summary: InvoiceExportSummary
                do {
                    summary = try await store.invoiceExports.export(
                        request, to: destination, cancellation: cancellation
                    ) { rows in
                        Output.progress("export: \(rows) rows")
                    }
                    try file?.commit()
                    Output.endProgress()
                } catch {
                    file?.discard()
                    Output.endProgress()
                    if case .interrupted = error as? InvoiceExportError {
                        let signal = await watcher.value
                        Self.standardError(InvoiceExportError.interrupted.description)
                        throw ExitCode(128 + (signal?.rawValue ?? 2))
                    }
                    if case .outputExists = error as? InvoiceExportError { throw CommandFailure.cannotCreate("\(error)") }
                    if let error = error as? InvoiceExportError { throw CommandFailure(.ioError, error.description) }
                    throw error
                }

                if let summaryJSON {
                    do {
                        try AtomicExportFile.write(Array(summary.json.utf8), to: summaryJSON, overwrite: force)
                    } catch {
                        throw CommandFailure.cannotCreate("The export was written, but not its summary: \(error)")
                    }
                } else {
                    Self.standardError(Self.describe(summary, output: file?.path ?? "standard output"))
                }
            }
        }

        /// `--reconcile-first`: missed events, then the range's invoices, compared and repaired.
        func reconcile(_ request: InvoiceExportRequest, settings: Settings, store: any LedgerStore) async throws {
            let logger = global.logger("billingd.reconcile", settings: settings)
            let client = try StripeClients.make(
                settings, logger: logger,
                purpose: "reconciles with Stripe before exporting (--reconcile-first): a restricted key (rk_…) needs read access to events and invoices")
            let keyIsLive = settings.stripe.apiKeyIsLive ?? false
            guard keyIsLive == request.livemode else {
                throw ValidationError(
                    "--reconcile-first reads Stripe with STRIPE_API_KEY, a \(keyIsLive ? "live" : "test")-mode key, but this export is of \(request.livemode ? "live" : "test") mode. Use a key of the exported mode\(request.livemode ? "" : ", or drop --test").")
            }
            var options = Reconciler.Options()
            options.kinds = [.events, .invoices]
            options.since = request.createdFrom
            options.until = request.createdBefore
            options.applyRecoveredEvents = true
            if let account = request.account, !account.isEmpty { options.account = account }
            let reconciler = Reconciler(
                store: store, client: client, livemode: keyIsLive, logger: logger, inbox: store.inbox,
                applier: store.applier(.init(apiVersion: settings.stripe.apiVersion)))
            do {
                let report = try await reconciler.run(options) { progress in
                    Output.progress("reconcile: \(progress.phase) \(progress.listed) listed, \(progress.drift) drifted so far")
                }
                Output.endProgress()
                Self.standardError(report.summary)
            } catch let held as LeaseHeld {
                Output.endProgress()
                Self.standardError("billingd export: --reconcile-first: \(held). Nothing was exported; try again when that run ends.")
                throw ExitCode(75)
            } catch let failure as Reconciler.Failure {
                Output.endProgress()
                Self.standardError("billingd export: --reconcile-first could not complete, so nothing was exported: \(failure.underlying)")
                throw ExitCode(1)
            }
        }

        /// The summary in words and a per-currency table, for standard error.
        static func describe(_ summary: InvoiceExportSummary, output: String) -> String {
            let request = summary.request
            let mode = request.livemode ? "live mode" : "test mode"
            if summary.invoices == 0 {
                let hint = request.livemode ? " Test-mode invoices are exported with --test." : ""
                return "No invoices matched (\(mode), \(request.rangeDescription)); \(output) has no rows.\(hint)"
            }
            let rows = request.layout == .lines ? " in \(summary.rows) line rows" : ""
            var text = "Exported \(summary.invoices) invoice\(summary.invoices == 1 ? "" : "s")\(rows) to \(output) (\(mode), \(request.rangeDescription), schema version \(InvoiceExportSchema.version))."
            var header = ["CURRENCY", "INVOICES"]
            if request.layout == .lines { header += ["LINES"] }
            header += ["SUBTOTAL", "DISCOUNT", "TAX", "TOTAL", "AMOUNT DUE", "AMOUNT PAID", "AMOUNT REMAINING"]
            if request.layout == .lines { header += ["LINE AMOUNT"] }
            let table = summary.currencies.map { totals in
                var cells = [totals.currency.code, String(totals.invoices)]
                if request.layout == .lines { cells.append(String(totals.lines)) }
                var amounts = totals.amounts.map(\.minorUnits)
                if request.layout == .lines { amounts.append(totals.lineAmount) }
                cells += amounts.map { DecimalAmount.string($0, exponent: totals.currency.exponent) }
                return cells
            }
            text += "\n" + Output.table(header, table)
            if summary.invoicesNeedingRefetch > 0 {
                text += "\nwarning: \(summary.invoicesNeedingRefetch) of these invoices are marked for re-fetch from Stripe (the ledger saw only part of them, or could not order two snapshots): reconcile them before closing the books."
            }
            return text
        }

        static func standardError(_ text: String) {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }
    }
}

/// `--livemode` (the default) or `--test`: which of Stripe's modes to export; never both.
enum StripeMode: String, EnumerableFlag {
    case livemode
    case test

    static func help(for value: StripeMode) -> ArgumentHelp? {
        switch value {
        case .livemode: "Export live-mode invoices."
        case .test: "Export test-mode invoices instead."
        }
    }
}

extension InvoiceExportRequest.Format: ExpressibleByArgument {}
