import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation
import Logging

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("A file of KEY=VALUE settings (same names as the environment variables); the environment wins over it.", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Log lines as readable text or as JSON lines.", valueName: "text|json"))
    var logFormat: LineLogHandler.Format = .text

    /// The settings from the environment and the config file.
    func settings() throws -> Settings {
        do {
            return try Settings.load(environment: ProcessInfo.processInfo.environment, configFile: config)
        } catch let error as SettingsError {
            throw CommandFailure.configuration(error.description)
        }
    }

    /// A logger writing to standard error in the chosen format, at the settings' level, masking
    /// the settings' secrets.
    func logger(_ label: String, settings: Settings) -> Logger {
        let (format, level, secrets) = (logFormat, settings.logging.level, settings.secretValues)
        return Logger(label: label) { label in LineLogHandler(label: label, level: level, format: format, secrets: secrets) }
    }

    /// Opens the SQLite ledger BILLINGD_DATABASE names, with an error that says what to do.
    /// - Parameter creating: whether a missing file is created (a new ledger); commands that
    ///   only read or work on what a ledger holds say no, so that a mistyped path is an error
    ///   instead of an empty ledger left behind and an answer of nothing.
    func openSQLite(_ settings: Settings, creating: Bool = true) throws -> SQLiteLedgerStore {
        if !creating, !FileManager.default.fileExists(atPath: settings.database.sqlitePath) {
            throw CommandFailure.configuration(
                "BILLINGD_DATABASE names \(settings.database.sqlitePath), which does not exist: check the path (or BILLINGD_DATABASE_URL for PostgreSQL). A new SQLite ledger is created by `billingd serve`.")
        }
        do {
            return SQLiteLedgerStore(database: try SQLiteDatabase.open(path: settings.database.sqlitePath))
        } catch let error as LedgerDatabaseError {
            // BILLINGD_DATABASE names a directory that is missing or a file billingd may not open.
            throw CommandFailure.configuration(error.description)
        }
    }

    /// Opens the ledger the settings name: the PostgreSQL one with BILLINGD_DATABASE_URL set
    /// (never falling back to SQLite then), else the SQLite file.
    /// - Parameter connections: the PostgreSQL pool's size; a command needs few.
    /// - Parameter creating: whether a missing SQLite file is created (see ``openSQLite(_:creating:)``).
    /// - Parameter commits: the group commits it runs at once (``PostgresLedgerStore/open(_:maximumConnections:concurrentCommits:logger:)``).
    func openStore(_ settings: Settings, connections: Int = 2, commits: Int = 1, creating: Bool = true) async throws -> any LedgerStore {
        if let postgres = settings.database.postgres {
            return try await openPostgres(postgres, settings: settings, connections: connections, commits: commits)
        }
        return try openSQLite(settings, creating: creating)
    }

    /// Runs `body` with the ledger the settings name, and closes it afterwards whatever `body`
    /// does. With `announcing`, the ledger's changes (reconcile's repairs, App Store repairs)
    /// queue outbound events for the app as serve's do, under the plan catalog. A SQLite ledger
    /// must exist unless `creating` (commands that fill a ledger from Stripe or Apple).
    func withStore<Value>(
        _ settings: Settings, announcing: Bool = false, creating: Bool = false, _ body: (any LedgerStore) async throws -> Value
    ) async throws -> Value {
        let policy = announcing ? try Self.announcingPolicy(settings) : nil
        var store = try await openStore(settings, creating: creating)
        if let policy { store = store.announcing(policy) }
        let value: Value
        do {
            value = try await body(store)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
        return value
    }

    /// How a command's ledger changes are announced: serve's policy, under the plan catalog.
    static func announcingPolicy(_ settings: Settings) throws -> OutboxPolicy {
        var catalog = PlanCatalog.freeOnly
        if let path = settings.plans.catalogPath {
            do { catalog = try PlanCatalogLoader.load(path: path) } catch {
                throw CommandFailure.configuration("\(error)")  // the error names BILLINGD_PLANS and the file
            }
        }
        return .serviceViews(catalog: catalog, endpoints: settings.outbox.webhookURLs)
    }

    /// Opens (and so migrates) the PostgreSQL ledger `configuration` names; failures exit with
    /// the status that says why (69 unreachable, 78 a setting, 1 a failed migration).
    func openPostgres(
        _ configuration: PostgresConfiguration, settings: Settings, connections: Int = 2, commits: Int = 1
    ) async throws -> PostgresLedgerStore {
        do {
            return try await PostgresLedgerStore.open(
                configuration, maximumConnections: connections, concurrentCommits: commits, logger: logger("billingd.postgres", settings: settings))
        } catch let error as PostgresStoreError {
            switch error {
            case .cannotConnect: throw CommandFailure(.unavailable, error.description)
            case .synchronousCommitOff: throw CommandFailure.configuration(error.description)
            case .migrationFailed, .backupIsPgDump: throw CommandFailure(.failed, error.description)
            }
        }
    }
}

extension LineLogHandler.Format: ExpressibleByArgument {}
