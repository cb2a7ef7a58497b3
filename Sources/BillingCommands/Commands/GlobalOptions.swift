import ArgumentParser
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

    /// Opens the ledger named by the settings, with an error that says what to do.
    func openDatabase(_ settings: Settings) throws -> SQLiteLedgerStore {
        do {
            return SQLiteLedgerStore(database: try LedgerDatabase.open(path: settings.databasePath))
        } catch let error as LedgerDatabaseError {
            // BILLINGD_DATABASE names a directory that is missing or a file billingd may not open.
            throw CommandFailure.configuration(error.description)
        }
    }
}

extension LineLogHandler.Format: ExpressibleByArgument {}
