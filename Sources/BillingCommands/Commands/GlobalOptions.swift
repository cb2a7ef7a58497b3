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
        let (format, level, secrets) = (logFormat, settings.logLevel, settings.secretValues)
        return Logger(label: label) { label in LineLogHandler(label: label, level: level, format: format, secrets: secrets) }
    }

    /// Opens the ledger named by the settings, with an error that says what to do. With
    /// BILLINGD_DATABASE_URL set it refuses (exit 78) rather than fall back to SQLite: the
    /// PostgreSQL store does not implement every role yet.
    func openDatabase(_ settings: Settings) throws -> SQLiteLedgerStore {
        if settings.databaseURL != nil {
            throw CommandFailure.configuration(PostgresStoreError.incomplete(missing: PostgresLedgerStore.missingRoles).description)
        }
        do {
            return SQLiteLedgerStore(database: try LedgerDatabase.open(path: settings.databasePath))
        } catch let error as LedgerDatabaseError {
            // BILLINGD_DATABASE names a directory that is missing or a file billingd may not open.
            throw CommandFailure.configuration(error.description)
        }
    }

    /// Opens (and so migrates) the PostgreSQL ledger `configuration` names, for the commands
    /// that already work on it (`migrate`, `copy`); failures exit with the status that says why.
    func openPostgres(_ configuration: PostgresConfiguration, settings: Settings) async throws -> PostgresLedgerStore {
        do {
            return try await PostgresLedgerStore.open(
                configuration, maximumConnections: 2, logger: logger("billingd.postgres", settings: settings))
        } catch let error as PostgresStoreError {
            switch error {
            case .cannotConnect: throw CommandFailure(.unavailable, error.description)
            case .synchronousCommitOff: throw CommandFailure.configuration(error.description)
            case .migrationFailed, .backupIsPgDump, .incomplete: throw CommandFailure(.failed, error.description)
            }
        }
    }
}

extension GlobalOptions {
    /// The ledger for a command that changes it (reconcile's repairs, App Store repairs): its
    /// transactions queue outbound events for the app as serve's do, under the plan catalog.
    func openAnnouncingDatabase(_ settings: Settings) throws -> SQLiteLedgerStore {
        var catalog = PlanCatalog.freeOnly
        if let path = settings.plansPath {
            do { catalog = try PlanCatalogLoader.load(path: path) } catch {
                throw CommandFailure.configuration("\(error)")  // the error names BILLINGD_PLANS and the file
            }
        }
        let store = try openDatabase(settings)
        return SQLiteLedgerStore(
            database: store.database.announcing(.serviceViews(catalog: catalog, endpoints: settings.appWebhookURLs)))
    }
}

extension LineLogHandler.Format: ExpressibleByArgument {}
