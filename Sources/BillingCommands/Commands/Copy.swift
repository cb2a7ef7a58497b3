import ArgumentParser
import BillingServer
import BillingStore
import Foundation

/// `billingd copy`: moves an existing SQLite ledger into an empty PostgreSQL one.
struct Copy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a SQLite ledger into an empty PostgreSQL ledger, and verify the row counts.",
        discussion: """
            Migrates the target, refuses it unless every ledger table is empty (exit 73), then copies table by table, a batch of rows at a time, in one PostgreSQL transaction: a copy that fails leaves the target empty. Inbox positions and run ids are kept. Every table's rows are then counted on both sides; exit 1 if any differ. Stop serve on the SQLite ledger first: a delivery stored during the copy would be missing from it, and the counts would say so.

            The password comes from the URL, BILLINGD_DATABASE_PASSWORD or BILLINGD_DATABASE_PASSWORD_FILE. Without --to, BILLINGD_DATABASE_URL is the target; without --from, BILLINGD_DATABASE is the source.
            """)

    @Option(name: .long, help: ArgumentHelp("The SQLite ledger to copy (default: BILLINGD_DATABASE).", valueName: "path.sqlite3"))
    var from: String?

    @Option(name: .long, help: ArgumentHelp("The empty PostgreSQL ledger to fill (default: BILLINGD_DATABASE_URL).", valueName: "postgres://…"))
    var to: String?

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
        guard let target = settings.databaseURL else {
            throw ValidationError("Name the PostgreSQL ledger to fill: --to postgres://USER@HOST:PORT/DATABASE (or set BILLINGD_DATABASE_URL).")
        }
        let sourcePath = from ?? settings.databasePath
        guard FileManager.default.fileExists(atPath: sourcePath) else {
            throw CommandFailure.notFound("No SQLite ledger at \(sourcePath): name it with --from PATH.sqlite3.")
        }
        let source: LedgerDatabase
        do {
            source = try LedgerDatabase.open(path: sourcePath)
        } catch let error as LedgerDatabaseError {
            throw CommandFailure.configuration(error.description)
        }
        defer { try? source.close() }
        let store = try await global.openPostgres(target, settings: settings)
        let report: PostgresLedgerCopy.Report
        do {
            report = try await PostgresLedgerCopy.copy(from: source, to: store) { table, rows in
                Output.progress("copy: \(table) \(rows) rows")
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
        if json {
            print(Output.json([
                "source": sourcePath, "target": target.redacted, "rows": report.rows, "verified": report.isVerified,
                "tables": report.tables.map { ["table": $0.table, "source": $0.source, "target": $0.target] as [String: Any] },
            ] as [String: Any]))
        } else {
            for count in report.tables {
                print("\(count.table.padding(toLength: 22, withPad: " ", startingAt: 0)) \(count.source) → \(count.target)\(count.source == count.target ? "" : "  DIFFERS")")
            }
            print(report.isVerified
                ? "Copied \(report.rows) rows in \(report.tables.count) tables from \(sourcePath) to \(target.redacted); every table's row count matches."
                : "The copy's row counts DIFFER (was serve writing to \(sourcePath)?): see the tables marked above.")
        }
        if !report.isVerified { throw ExitCode(1) }
    }
}
