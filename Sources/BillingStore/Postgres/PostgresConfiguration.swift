import Foundation

/// Where and how to reach the PostgreSQL ledger, parsed from a libpq connection URI
/// (`postgres://user[:password]@host:port/db?sslmode=…`) with libpq's meaning for each part, and
/// the password taken from a variable or a file in preference to one in the URL.
public struct PostgresConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// Where the server listens.
    public enum Endpoint: Sendable, Equatable {
        case tcp(host: String, port: Int)
        /// A Unix socket directory, as libpq takes it: the socket is `directory/.s.PGSQL.port`.
        case unixSocket(directory: String, port: Int)

        /// The socket file of a Unix socket endpoint.
        public var socketPath: String? {
            guard case .unixSocket(let directory, let port) = self else { return nil }
            return (directory.hasSuffix("/") ? directory : directory + "/") + ".s.PGSQL.\(port)"
        }
    }

    /// libpq's `sslmode`, over TCP; a Unix socket never uses TLS, as in libpq.
    public enum SSLMode: String, Sendable, CaseIterable {
        /// No TLS.
        case disable
        /// TLS when the server offers it, without checking its certificate (libpq's default).
        case prefer
        /// TLS or no connection; the certificate is not checked.
        case require
        /// TLS with a certificate signed by a trusted root; the host name is not checked.
        case verifyCA = "verify-ca"
        /// TLS with a trusted certificate issued to the host connected to.
        case verifyFull = "verify-full"
    }

    /// Where the password came from (it is never shown).
    public enum PasswordSource: Sendable, Equatable {
        case none
        case url
        /// The separate variable (`BILLINGD_DATABASE_PASSWORD`).
        case variable
        /// A file holding the password (`BILLINGD_DATABASE_PASSWORD_FILE`), at this path.
        case file(String)
    }

    public var endpoint: Endpoint
    public var user: String
    public var database: String
    public var sslMode: SSLMode
    /// The roots `verify-ca` and `verify-full` trust (`sslrootcert`, a PEM file); nil for the
    /// system's trust store.
    public var sslRootCertificate: String?
    /// Shown in `pg_stat_activity` (`application_name`).
    public var applicationName: String
    public var password: PostgresPassword?
    public var passwordSource: PasswordSource

    /// Where libpq on Debian looks for a socket when a URL names no host.
    public static let defaultSocketDirectory = "/var/run/postgresql"
    public static let defaultPort = 5432

    /// Parses `url`, taking the password from `password` (the variable's value) or the file at
    /// `passwordFile` when either is set, else from the URL. Empty values count as unset.
    public init(url: String, password: String? = nil, passwordFile: String? = nil) throws(PostgresConfigurationError) {
        let parsed = try PostgresURL(url)
        // The endpoint first: a password misplaced without its @ reads as a port, and that is the
        // message that helps.
        self.endpoint = try Self.endpoint(host: parsed.host, port: parsed.port)
        guard let user = parsed.user, !user.isEmpty else { throw .missingUser }
        self.user = user
        self.database = parsed.database.flatMap { $0.isEmpty ? nil : $0 } ?? user
        self.sslMode = try Self.sslMode(parsed.sslMode)
        self.sslRootCertificate = parsed.sslRootCertificate.flatMap { $0.isEmpty || $0 == "system" ? nil : $0 }
        self.applicationName = parsed.applicationName ?? "billingd"

        let variable = password.flatMap { $0.isEmpty ? nil : $0 }
        let file = passwordFile.flatMap { $0.isEmpty ? nil : $0 }
        switch (variable, file) {
        case (.some, .some):
            throw .passwordTwice
        case (.some(let value), nil):
            self.password = PostgresPassword(value)
            self.passwordSource = .variable
        case (nil, .some(let path)):
            self.password = PostgresPassword(try Self.readPasswordFile(path))
            self.passwordSource = .file(path)
        case (nil, nil):
            self.password = parsed.password.map(PostgresPassword.init)
            self.passwordSource = parsed.password == nil ? .none : .url
        }

        if sslMode == .verifyFull, case .tcp(let host, _) = endpoint, Self.isIPAddress(host) {
            throw .verifyFullNeedsHostName
        }
    }

    public var description: String { redacted }

    /// The settings as a URL without the password, for messages and logs.
    public var redacted: String {
        var text = "postgres://" + Self.encode(user)
        switch passwordSource {
        case .url: text += ":***"
        case .none, .variable, .file: break
        }
        switch endpoint {
        case .tcp(let host, let port):
            text += "@" + (host.contains(":") ? "[\(host)]" : host) + ":\(port)/" + Self.encode(database)
            text += "?sslmode=\(sslMode.rawValue)"
        case .unixSocket(let directory, let port):
            text += "@:\(port)/" + Self.encode(database) + "?host=" + directory
        }
        return text
    }

    private static func endpoint(host: String?, port: String?) throws(PostgresConfigurationError) -> Endpoint {
        var portNumber = defaultPort
        if let port, !port.isEmpty {
            guard let number = Int(port), (1...65535).contains(number) else { throw .invalidPort }
            portNumber = number
        }
        guard let host, !host.isEmpty else { return .unixSocket(directory: defaultSocketDirectory, port: portNumber) }
        if host.contains(",") { throw .severalHosts }
        if host.hasPrefix("/") { return .unixSocket(directory: host, port: portNumber) }
        guard !host.contains("/"), !host.contains(where: \.isWhitespace) else { throw .invalidHost }
        return .tcp(host: host, port: portNumber)
    }

    private static func sslMode(_ text: String?) throws(PostgresConfigurationError) -> SSLMode {
        guard let text, !text.isEmpty else { return .prefer }
        if let mode = SSLMode(rawValue: text) { return mode }
        if text == "allow" { throw .sslModeAllowUnsupported }
        throw .unknownSSLMode(text)
    }

    private static func readPasswordFile(_ path: String) throws(PostgresConfigurationError) -> String {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "this user cannot read it" : "there is no such file"
            throw .passwordFileUnreadable(path: path, reason: reason)
        }
        guard var text = String(data: data, encoding: .utf8) else { throw .passwordFileUnreadable(path: path, reason: "it is not UTF-8 text") }
        // One trailing line break, as editors and `echo` leave it; any other character is the password's.
        if text.hasSuffix("\r\n") { text.removeLast(2) } else if text.hasSuffix("\n") { text.removeLast() }
        guard !text.isEmpty else { throw .passwordFileEmpty(path: path) }
        return text
    }

    private static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || host.split(separator: ".").count == 4 && host.allSatisfy { $0 == "." || $0.isNumber }
    }

    private static func encode(_ part: String) -> String {
        part.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed.subtracting(CharacterSet(charactersIn: ":@/?#"))) ?? part
    }
}

/// A password that never shows itself in a description, a dump or a log.
public struct PostgresPassword: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let value: String

    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "***" }
    public var debugDescription: String { "***" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// What is wrong with a PostgreSQL URL or its password; no message repeats the password, nor the
/// parts of the URL around it where a misplaced one could stand.
public enum PostgresConfigurationError: Error, Equatable, CustomStringConvertible {
    case notAPostgresURL
    case invalidPercentEncoding(part: String)
    case missingUser
    case invalidPort
    case invalidHost
    case severalHosts
    case invalidIPv6Host
    case unknownSSLMode(String)
    case sslModeAllowUnsupported
    case verifyFullNeedsHostName
    case unknownParameter(String)
    case malformedParameter
    case passwordTwice
    case passwordFileUnreadable(path: String, reason: String)
    case passwordFileEmpty(path: String)

    public var description: String {
        switch self {
        case .notAPostgresURL:
            "BILLINGD_DATABASE_URL must be a PostgreSQL URL: postgres://USER@HOST:PORT/DATABASE?sslmode=require."
        case .invalidPercentEncoding(let part):
            "The \(part) in BILLINGD_DATABASE_URL has a % that does not start a valid escape: write % as %25."
        case .missingUser:
            "BILLINGD_DATABASE_URL names no user: postgres://USER@HOST:PORT/DATABASE."
        case .invalidPort:
            "The port in BILLINGD_DATABASE_URL is not a number from 1 to 65535 (a password belongs after USER: and before @, or in BILLINGD_DATABASE_PASSWORD)."
        case .invalidHost:
            "The host in BILLINGD_DATABASE_URL is not a host name, an IP address or a socket directory (an absolute path, percent-encoded or as ?host=/path)."
        case .severalHosts:
            "BILLINGD_DATABASE_URL names several hosts; billingd connects to one (put a proxy or a DNS name in front of a cluster)."
        case .invalidIPv6Host:
            "The IPv6 address in BILLINGD_DATABASE_URL lacks its closing ]: postgres://USER@[::1]:5432/DATABASE."
        case .unknownSSLMode(let mode):
            "sslmode=\(mode) is not one of disable, prefer, require, verify-ca, verify-full."
        case .sslModeAllowUnsupported:
            "sslmode=allow (TLS only when the server insists) is not supported: use disable, prefer, require, verify-ca or verify-full."
        case .verifyFullNeedsHostName:
            "sslmode=verify-full checks the certificate's name against the host: connect by host name, not by IP address (or use verify-ca)."
        case .unknownParameter(let name):
            "BILLINGD_DATABASE_URL has the parameter \(name), which billingd does not know: it takes host, port, user, password, dbname, sslmode, sslrootcert and application_name."
        case .malformedParameter:
            "The query of BILLINGD_DATABASE_URL is not a list of NAME=VALUE pairs joined by &."
        case .passwordTwice:
            "Both BILLINGD_DATABASE_PASSWORD and BILLINGD_DATABASE_PASSWORD_FILE are set: set one."
        case .passwordFileUnreadable(let path, let reason):
            "Cannot read the database password file \(path) (BILLINGD_DATABASE_PASSWORD_FILE): \(reason)."
        case .passwordFileEmpty(let path):
            "The database password file \(path) (BILLINGD_DATABASE_PASSWORD_FILE) is empty."
        }
    }
}

/// The parts of a libpq connection URI, percent-decoded; query parameters override the parts
/// before them, as in libpq.
struct PostgresURL {
    var user: String?
    var password: String?
    var host: String?
    var port: String?
    var database: String?
    var sslMode: String?
    var sslRootCertificate: String?
    var applicationName: String?

    init(_ text: String) throws(PostgresConfigurationError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let schemeEnd = trimmed.range(of: "://"),
              ["postgres", "postgresql"].contains(trimmed[..<schemeEnd.lowerBound].lowercased())
        else { throw .notAPostgresURL }
        var rest = Substring(trimmed[schemeEnd.upperBound...])

        var query: Substring?
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var authority = rest
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            database = try Self.decode(rest[rest.index(after: slash)...], part: "database name")
        }
        var hostPort = authority
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPort = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                user = try Self.decode(userInfo[..<colon], part: "user name")
                password = try Self.decode(userInfo[userInfo.index(after: colon)...], part: "password")
            } else {
                user = try Self.decode(userInfo, part: "user name")
            }
        }
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw .invalidIPv6Host }
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let after = hostPort[hostPort.index(after: close)...]
            if after.hasPrefix(":") { port = String(after.dropFirst()) } else if !after.isEmpty { throw .invalidHost }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = try Self.decode(hostPort[..<colon], part: "host")
            port = String(hostPort[hostPort.index(after: colon)...])
        } else {
            host = try Self.decode(hostPort, part: "host")
        }

        guard let query, !query.isEmpty else { return }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            guard let equals = pair.firstIndex(of: "=") else { throw .malformedParameter }
            let name = try Self.decode(pair[..<equals], part: "query")
            let value = try Self.decode(pair[pair.index(after: equals)...], part: "query")
            switch name {
            case "host": host = value
            case "port": port = value
            case "user": user = value
            case "password": password = value
            case "dbname": database = value
            case "sslmode": sslMode = value
            case "sslrootcert": sslRootCertificate = value
            case "application_name": applicationName = value
            default: throw .unknownParameter(name)
            }
        }
    }

    private static func decode(_ text: Substring, part: String) throws(PostgresConfigurationError) -> String {
        guard text.contains("%") else { return String(text) }
        guard let decoded = String(text).removingPercentEncoding else { throw .invalidPercentEncoding(part: part) }
        return decoded
    }
}
