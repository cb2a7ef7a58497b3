import ArgumentParser
import BillingServer
import BillingStore
import Foundation

/// `billingd copy`: moves an existing SQLite ledger into an empty PostgreSQL one.
struct Copy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a SQLite ledger into an empty PostgreSQL ledger, and verify it by row counts, row contents and a replay.",
        discussion: """
            Migrates the target, refuses it unless every ledger table is empty (exit 73), then copies table by table, a batch of rows at a time, in one PostgreSQL transaction: a copy that fails leaves the target empty. Inbox positions and run ids are kept. Then it verifies: every table's rows are counted on both sides; the ledger's rows are compared with the source's, row for row; and the copied inbox is replayed on PostgreSQL, its rebuilt ledger compared with the source's (announcing nothing to the app). Exit 1 if anything differs. Rows that reconcile repaired from Stripe's lists have no event behind them, so a replay cannot rebuild them: when the replay differs, the ledger is copied over it again, and the target is left as copied. --no-replay skips the replay, which on PostgreSQL takes about as long as applying the events took. Stop serve on the SQLite ledger first: a delivery stored during the copy would be missing from it, and the counts would say so.

            The password comes from the URL, BILLINGD_DATABASE_PASSWORD or BILLINGD_DATABASE_PASSWORD_FILE. Without --to, BILLINGD_DATABASE_URL is the target; without --from, BILLINGD_DATABASE is the source.
            """)

    @Option(name: .long, help: ArgumentHelp("The SQLite ledger to copy (default: BILLINGD_DATABASE).", valueName: "path.sqlite3"))
    var from: String?

    @Option(name: .long, help: ArgumentHelp("The empty PostgreSQL ledger to fill (default: BILLINGD_DATABASE_URL).", valueName: "postgres://…"))
    var to: String?

    @Flag(inversion: .prefixedNo, help: "Replay the copied inbox on PostgreSQL and compare the ledger it rebuilds with the source's.")
    var replay = true

    @Flag(name: .long, help: "Print the result as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        var environment = ProcessInfo.processInfo.environment
        // --to wins over the settings' URL, so that a copy can name its target explicitly.
        if let to { environment["BILLINGD_DATABASE_URL"] = to }
        let settings: Settings
        do {
            settings = try Settings.load(environment: environment, configFile: global.config)
        } catch let error as SettingsError {
            throw CommandFailure.configuration(error.description)
        }
        guard let target = settings.database.postgres else {
            throw ValidationError("Name the PostgreSQL ledger to fill: --to postgres://USER@HOST:PORT/DATABASE (or set BILLINGD_DATABASE_URL).")
        }
        let sourcePath = from ?? settings.database.sqlitePath
        guard FileManager.default.fileExists(atPath: sourcePath) else {
            throw CommandFailure.notFound("No SQLite ledger at \(sourcePath): name it with --from PATH.sqlite3.")
        }
        let source: SQLiteDatabase
        do {
            source = try SQLiteDatabase.open(path: sourcePath)
        } catch let error as LedgerDatabaseError {
            throw CommandFailure.configuration(error.description)
        }
        defer { try? source.close() }
        let store = try await global.openPostgres(target, settings: settings)
        let report: PostgresLedgerCopy.Report
        let comparison: PostgresLedgerCopy.Comparison
        do {
            report = try await PostgresLedgerCopy.copy(from: source, to: store) { table, rows in
                Output.progress("copy: \(table) \(rows) rows")
            }
            Output.endProgress()
            let events = replay ? try await store.inbox.count() : 0
            comparison = try await PostgresLedgerCopy.compare(
                source, with: store, replaying: replay ? .init(batchSize: 1000, apiVersion: settings.stripe.apiVersion) : nil
            ) { done in
                Output.progress("copy: replaying \(done) / \(events) events")
            }
            Output.endProgress()
        } catch let failure as PostgresLedgerCopy.Failure {
            Output.endProgress()
            await store.close()
            switch failure {
            case .targetNotEmpty: throw CommandFailure.cannotCreate(failure.description)
            case .sourceNotCovered: throw CommandFailure(.failed, failure.description)
            }
        } catch {
            Output.endProgress()
            await store.close()
            throw CommandFailure(.failed, "The copy failed and was rolled back, so \(target.redacted) is as it was: \(PostgresStoreError.reason(error))")
        }
        await store.close()
        let verified = report.isVerified && comparison.isIdentical
        if json {
            var result: [String: Any] = [
                "source": sourcePath, "target": target.redacted, "rows": report.rows, "verified": verified,
                "tables": report.tables.map { ["table": $0.table, "source": $0.source, "target": $0.target] as [String: Any] },
                "ledger_identical": comparison.firstDifference == nil,
            ]
            if let difference = comparison.firstDifference { result["ledger_first_difference"] = difference }
            if let replayed = comparison.replay {
                var summary: [String: Any] = [
                    "processed": replayed.pass.processed, "applied": replayed.pass.applied, "stale": replayed.pass.stale,
                    "ignored": replayed.pass.ignored, "failed": replayed.pass.failed + replayed.pass.dead,
                    "identical": replayed.firstDifference == nil,
                ]
                if let difference = replayed.firstDifference { summary["first_difference"] = difference }
                result["replay"] = summary
            }
            print(Output.json(result))
        } else {
            // As wide as the longest name: padding(toLength:) would cut a longer one short.
            let width = report.tables.map(\.table.count).max() ?? 0
            for count in report.tables {
                print("\(count.table.padding(toLength: width, withPad: " ", startingAt: 0)) \(count.source) → \(count.target)\(count.source == count.target ? "" : "  DIFFERS")")
            }
            print(report.isVerified
                ? "Copied \(report.rows) rows in \(report.tables.count) tables from \(sourcePath) to \(target.redacted); every table's row count matches."
                : "The copy's row counts DIFFER (was serve writing to \(sourcePath)?): see the tables marked above.")
            print(comparison.firstDifference.map { "The copied ledger DIFFERS from the source's, first in the table \($0)." }
                ?? "Every ledger row matches the source's.")
            if let replayed = comparison.replay {
                let pass = replayed.pass
                let done = "Replayed \(pass.processed) copied events on PostgreSQL (\(pass.applied) applied, \(pass.stale) older than the ledger's state, \(pass.ignored) ignored, \(pass.failed + pass.dead) failed)"
                if let difference = replayed.firstDifference {
                    print("""
                        \(done): the rebuilt ledger DIFFERS from the source's, first in the table \(difference). The ledger was copied \
                        over it again, so \(target.redacted) holds the source's rows. If reconcile repaired that table from Stripe's \
                        lists, those rows have no event behind them and a replay cannot rebuild them; otherwise, report it.
                        """)
                } else {
                    print("\(done): the rebuilt ledger is identical to the source's.")
                }
            }
        }
        if !verified { throw ExitCode(1) }
    }
}
