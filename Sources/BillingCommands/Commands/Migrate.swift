import ArgumentParser
import BillingServer
import BillingStore

/// `billingd migrate`: brings a PostgreSQL ledger's schema up to this billingd's.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the PostgreSQL ledger's schema migrations and say which were applied.",
        discussion: """
            With BILLINGD_DATABASE_URL set, connects to the PostgreSQL ledger and applies the migrations it lacks, in one transaction under a transaction-scoped advisory lock: replicas and a migrate run starting together queue on it, and the second finds the work done. serve also migrates at start the same way; run migrate first to see a rolling deploy's migration succeed before any replica starts. Exit 69 when the database cannot be reached, 78 for a setting, 1 when a migration fails (it is rolled back).

            A SQLite ledger (BILLINGD_DATABASE) migrates itself whenever billingd opens it: migrate says so and changes nothing.
            """)

    @Flag(name: .long, help: "Print the result as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let settings = try global.settings()
        guard let postgres = settings.database.postgres else {
            let message = "The SQLite ledger \(settings.database.sqlitePath) migrates itself whenever billingd opens it; nothing to do. (migrate applies a PostgreSQL ledger's migrations: set BILLINGD_DATABASE_URL.)"
            print(json ? Output.json(["database": "sqlite", "path": settings.database.sqlitePath, "applied": [String]()]) : message)
            return
        }
        let store = try await global.openPostgres(postgres, settings: settings)
        await store.close()
        if json {
            print(Output.json(["database": "postgresql", "target": postgres.redacted, "applied": store.appliedMigrations]))
        } else if store.appliedMigrations.isEmpty {
            print("The PostgreSQL ledger \(postgres.redacted) is up to date; no migration applied.")
        } else {
            print("Applied \(store.appliedMigrations.count) migration(s) to \(postgres.redacted): \(store.appliedMigrations.joined(separator: ", ")).")
        }
    }
}
