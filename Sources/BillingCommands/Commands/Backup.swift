import ArgumentParser
import BillingServer
import BillingStore
import Foundation

/// `billingd backup`: a consistent copy of the live ledger.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the ledger database to a file, safely, while billingd runs.",
        discussion: """
            Uses SQLite's online backup, so the copy is consistent even while `serve` keeps writing. The copy is integrity-checked and fsynced under a temporary name and renamed into place only when complete.

            Restore: stop billingd, copy the backup over BILLINGD_DATABASE (remove the -wal and -shm files beside it), start billingd. Stripe redelivers what it could not deliver meanwhile for up to three days.

            A PostgreSQL ledger (BILLINGD_DATABASE_URL) is backed up with pg_dump or the provider's snapshots: backup says so and exits 78.
            """)

    @Argument(help: ArgumentHelp("The file to write, e.g. /var/backups/billingd-2026-11-21.sqlite3.", valueName: "file"))
    var file: String

    @Flag(name: .long, help: "Replace the file if it exists.")
    var force = false

    @Flag(name: .long, help: "Print the result as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let settings = try global.settings()
        if let postgres = settings.database.postgres {
            // A file copy of a PostgreSQL ledger is pg_dump's job: the store's own answer, without connecting.
            throw CommandFailure.configuration(PostgresStoreError.backupIsPgDump(database: postgres.database).description)
        }
        try await global.withStore(settings) { store in
            let target = URL(fileURLWithPath: file).standardizedFileURL.path
            if target == URL(fileURLWithPath: settings.database.sqlitePath).standardizedFileURL.path {
                throw ValidationError("The backup file is the live database itself (\(settings.database.sqlitePath)); choose another path.")
            }
            let result: LedgerBackup
            do {
                result = try await store.backup(to: target, overwrite: force)
            } catch let error as LedgerDatabaseError {
                if case .backupCorrupt = error { throw CommandFailure(.ioError, error.description) }
                throw CommandFailure.cannotCreate(error.description)
            }
            if json {
                print(Output.json(["path": result.path, "bytes": result.bytes, "events": result.events]))
            } else {
                print("Backed up \(result.events) events to \(result.path) (\(result.bytes / 1024) KiB).")
            }
        }
    }
}
