import BillingStore
import Foundation
import Logging
import PostgresNIO
import Testing

/// The PostgreSQL that scripts/test starts and names in BILLINGD_TEST_DATABASE_URL, and an empty
/// database on it for each test, so that tests running in parallel never see each other's rows.
public enum PostgresTestDatabase {
    public static let variable = "BILLINGD_TEST_DATABASE_URL"
    public static let logger = Logger(label: "billingd.tests.postgres")

    /// Set in CI when BILLINGD_TEST_DATABASE_URL is not: CI must prove the PostgreSQL store.
    public struct Missing: Error, CustomStringConvertible {
        public var description: String {
            "CI=true but BILLINGD_TEST_DATABASE_URL is not set: run the suite through scripts/test, which starts a throwaway PostgreSQL and sets it."
        }
    }

    /// The test server's settings. Outside CI a missing URL cancels the test, saying why; in CI it
    /// fails the test.
    public static func server() throws -> PostgresConfiguration {
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment[variable], !url.isEmpty else {
            if environment["CI"] == "true" { throw Missing() }
            try Test.cancel(
                "BILLINGD_TEST_DATABASE_URL is not set, so the PostgreSQL side is not run: scripts/test starts a throwaway PostgreSQL and sets it.")
        }
        return try PostgresConfiguration(url: url)
    }

    /// Creates an empty database and returns the settings that reach it.
    public static func create() async throws -> PostgresConfiguration {
        var configuration = try server()
        let name = "billingd_t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await withConnection(configuration) { connection in
            // A generated name, never input: identifiers cannot be bound.
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        configuration.database = name
        return configuration
    }

    /// Drops a database made by ``create()``, cutting off any session left on it.
    public static func drop(_ configuration: PostgresConfiguration) async throws {
        let server = try server()
        try await withConnection(server) { connection in
            try await connection.query(
                PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(configuration.database) WITH (FORCE)"), logger: logger)
        }
    }

    /// Runs `body` on a connection of its own to `configuration`'s database.
    public static func withConnection<Result: Sendable>(
        _ configuration: PostgresConfiguration, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let connection = try await PostgresConnection.connect(
            configuration: configuration.connectionConfiguration(), id: Int.random(in: 1...Int.max), logger: logger)
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Runs `body` with the settings of a fresh database, dropped afterwards whatever happened.
    public static func withFreshDatabase(_ body: (PostgresConfiguration) async throws -> Void) async throws {
        let configuration = try await create()
        do {
            try await body(configuration)
        } catch {
            try? await drop(configuration)
            throw error
        }
        try await drop(configuration)
    }

    /// Opens a store on a fresh database, runs `body`, then closes the store and drops the database.
    public static func withStore(_ body: (PostgresLedgerStore) async throws -> Void) async throws {
        try await withFreshDatabase { configuration in
            let store = try await PostgresLedgerStore.open(configuration, maximumConnections: 4, logger: logger)
            do {
                try await body(store)
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }
}

extension PostgresTestDatabase {
    /// The URL of a database made by ``create()``, for a `billingd` child process: the test
    /// server's URL with the database's name in place of its own.
    public static func url(of configuration: PostgresConfiguration) throws -> String {
        let serverURL = ProcessInfo.processInfo.environment[variable] ?? ""
        let serverDatabase = try server().database
        for suffix in ["?", ""] {
            let path = "/" + serverDatabase + suffix
            if let range = serverURL.range(of: path), suffix == "?" || serverURL.hasSuffix(path) {
                return serverURL.replacingCharacters(in: range, with: "/" + configuration.database + suffix)
            }
        }
        throw UnexpectedURL(url: serverURL)
    }

    /// BILLINGD_TEST_DATABASE_URL does not name its database where a URL does.
    public struct UnexpectedURL: Error, CustomStringConvertible {
        let url: String
        public var description: String { "BILLINGD_TEST_DATABASE_URL does not end its path with the database's name: \(url)" }
    }
}
