import BillingStore
import Foundation
import Testing

@Suite("PostgreSQL connection settings")
struct PostgresConfigurationTests {
    typealias Endpoint = PostgresConfiguration.Endpoint

    struct Accepted: Sendable, CustomTestStringConvertible {
        let url: String
        let endpoint: Endpoint
        let user: String
        let database: String
        let sslMode: PostgresConfiguration.SSLMode
        var testDescription: String { url }
    }

    static let accepted: [Accepted] = [
        .init(url: "postgres://billingd@db.internal:6432/ledger?sslmode=require", endpoint: .tcp(host: "db.internal", port: 6432),
              user: "billingd", database: "ledger", sslMode: .require),
        .init(url: "postgresql://billingd@localhost/ledger", endpoint: .tcp(host: "localhost", port: 5432),
              user: "billingd", database: "ledger", sslMode: .prefer),
        .init(url: "POSTGRES://billingd@10.0.0.5/ledger?sslmode=disable", endpoint: .tcp(host: "10.0.0.5", port: 5432),
              user: "billingd", database: "ledger", sslMode: .disable),
        .init(url: "postgres://billingd@[::1]:5433/ledger?sslmode=verify-ca", endpoint: .tcp(host: "::1", port: 5433),
              user: "billingd", database: "ledger", sslMode: .verifyCA),
        .init(url: "postgres://billingd@db.internal", endpoint: .tcp(host: "db.internal", port: 5432),
              user: "billingd", database: "billingd", sslMode: .prefer),
        .init(url: "postgres://billingd@%2Fvar%2Frun%2Fpostgresql/ledger", endpoint: .unixSocket(directory: "/var/run/postgresql", port: 5432),
              user: "billingd", database: "ledger", sslMode: .prefer),
        .init(url: "postgres://billingd@/ledger?host=/tmp/pg&port=5433", endpoint: .unixSocket(directory: "/tmp/pg", port: 5433),
              user: "billingd", database: "ledger", sslMode: .prefer),
        .init(url: "postgres:///?user=billingd&dbname=ledger&host=db.internal&sslmode=verify-full",
              endpoint: .tcp(host: "db.internal", port: 5432), user: "billingd", database: "ledger", sslMode: .verifyFull),
        .init(url: "postgres://billingd@/ledger", endpoint: .unixSocket(directory: "/var/run/postgresql", port: 5432),
              user: "billingd", database: "ledger", sslMode: .prefer),
        .init(url: "postgres://bill%40ing@db.internal/led%2Fger", endpoint: .tcp(host: "db.internal", port: 5432),
              user: "bill@ing", database: "led/ger", sslMode: .prefer),
    ]

    @Test("A libpq URL gives its endpoint, user, database and sslmode", arguments: accepted)
    func parses(_ case_: Accepted) throws {
        let configuration = try PostgresConfiguration(url: case_.url)
        #expect(configuration.endpoint == case_.endpoint)
        #expect(configuration.user == case_.user)
        #expect(configuration.database == case_.database)
        #expect(configuration.sslMode == case_.sslMode)
        #expect(configuration.password == nil && configuration.passwordSource == .none)
    }

    @Test("A Unix socket is the socket file in the directory, named by port as libpq names it")
    func socketPath() throws {
        let configuration = try PostgresConfiguration(url: "postgres://billingd@/ledger?host=/tmp/pg/&port=5433")
        #expect(configuration.endpoint.socketPath == "/tmp/pg/.s.PGSQL.5433")
        #expect(Endpoint.tcp(host: "h", port: 1).socketPath == nil)
    }

    @Test("sslrootcert and application_name are taken; sslrootcert=system means the system's roots")
    func tlsParameters() throws {
        let custom = try PostgresConfiguration(
            url: "postgres://billingd@db.internal/ledger?sslmode=verify-full&sslrootcert=/etc/billingd/ca.pem&application_name=billingd-a")
        #expect(custom.sslRootCertificate == "/etc/billingd/ca.pem")
        #expect(custom.applicationName == "billingd-a")
        let system = try PostgresConfiguration(url: "postgres://billingd@db.internal/ledger?sslmode=verify-full&sslrootcert=system")
        #expect(system.sslRootCertificate == nil)
        #expect(system.applicationName == "billingd")
    }

    @Test("The password comes from the variable or the file before the URL, percent-decoded in the URL")
    func passwordSources() throws {
        let inURL = try PostgresConfiguration(url: "postgres://billingd:p%40ss:word@db.internal/ledger")
        #expect(inURL.password?.value == "p@ss:word")
        #expect(inURL.passwordSource == .url)

        let variable = try PostgresConfiguration(url: "postgres://billingd:old@db.internal/ledger", password: "from-variable")
        #expect(variable.password?.value == "from-variable")
        #expect(variable.passwordSource == .variable)

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-pgpass-\(UUID().uuidString)").path
        try "from file \n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try PostgresConfiguration(url: "postgres://billingd:old@db.internal/ledger", passwordFile: path)
        #expect(file.password?.value == "from file ", "one trailing line break is dropped, nothing else")
        #expect(file.passwordSource == .file(path))

        let emptyVariable = try PostgresConfiguration(url: "postgres://billingd:url@db.internal/ledger", password: "", passwordFile: "")
        #expect(emptyVariable.passwordSource == .url, "empty variables count as unset")

        #expect(throws: PostgresConfigurationError.passwordTwice) {
            try PostgresConfiguration(url: "postgres://billingd@db.internal/ledger", password: "a", passwordFile: path)
        }
    }

    @Test("A password file that is missing or empty is named, and what is wrong with it said")
    func passwordFileErrors() throws {
        let missing = "/nonexistent-\(UUID().uuidString)/password"
        #expect(throws: PostgresConfigurationError.passwordFileUnreadable(path: missing, reason: "there is no such file")) {
            try PostgresConfiguration(url: "postgres://billingd@db.internal/ledger", passwordFile: missing)
        }
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-pgpass-\(UUID().uuidString)").path
        try "\n".write(toFile: empty, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        #expect(throws: PostgresConfigurationError.passwordFileEmpty(path: empty)) {
            try PostgresConfiguration(url: "postgres://billingd@db.internal/ledger", passwordFile: empty)
        }
    }

    struct Rejected: Sendable, CustomTestStringConvertible {
        let url: String
        let error: PostgresConfigurationError
        var testDescription: String { url }
    }

    /// Each holds the password "hunter2" where it can, to prove no message repeats it.
    static let rejected: [Rejected] = [
        .init(url: "mysql://billingd:hunter2@db/ledger", error: .notAPostgresURL),
        .init(url: "db.internal:5432/ledger", error: .notAPostgresURL),
        .init(url: "postgres://db.internal/ledger", error: .missingUser),
        .init(url: "postgres://billingd:hunter2/ledger", error: .invalidPort),
        .init(url: "postgres://billingd:hunter2@db.internal:99999/ledger", error: .invalidPort),
        .init(url: "postgres://billingd:hunter2@db1,db2/ledger", error: .severalHosts),
        .init(url: "postgres://billingd:hunter2@[::1/ledger", error: .invalidIPv6Host),
        .init(url: "postgres://billingd:hunter2@db.internal/ledger?sslmode=maybe", error: .unknownSSLMode("maybe")),
        .init(url: "postgres://billingd:hunter2@db.internal/ledger?sslmode=allow", error: .sslModeAllowUnsupported),
        .init(url: "postgres://billingd:hunter2@10.0.0.5/ledger?sslmode=verify-full", error: .verifyFullNeedsHostName),
        .init(url: "postgres://billingd:hunter2@db.internal/ledger?pool=3", error: .unknownParameter("pool")),
        .init(url: "postgres://billingd:hunter2@db.internal/ledger?sslmode", error: .malformedParameter),
        .init(url: "postgres://billingd:hunter2@db.internal/led%zzger", error: .invalidPercentEncoding(part: "database name")),
        .init(url: "postgres://billingd:hunter2@db internal/ledger", error: .invalidHost),
    ]

    @Test("A wrong URL is refused with a message that names the problem and never the password", arguments: rejected)
    func refuses(_ case_: Rejected) {
        #expect(throws: case_.error) { try PostgresConfiguration(url: case_.url) }
        #expect(!case_.error.description.contains("hunter2"))
        #expect(!case_.error.description.isEmpty)
    }

    @Test("Descriptions, dumps and the redacted URL never show the password")
    func neverShowsThePassword() throws {
        let configuration = try PostgresConfiguration(url: "postgres://billingd:hunter2@db.internal:6432/ledger?sslmode=require")
        #expect(configuration.redacted == "postgres://billingd:***@db.internal:6432/ledger?sslmode=require")
        #expect(!String(describing: configuration).contains("hunter2"))
        #expect(!String(reflecting: configuration).contains("hunter2"))
        var dumped = ""
        dump(configuration, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(String(describing: configuration.password) == "Optional(***)")

        let socket = try PostgresConfiguration(url: "postgres://billingd@/ledger?host=/tmp/pg", password: "hunter2")
        #expect(socket.redacted == "postgres://billingd@:5432/ledger?host=/tmp/pg")
    }
}
