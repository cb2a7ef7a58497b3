import NIOSSL
import PostgresNIO

extension PostgresConfiguration {
    /// The pool's settings: these endpoints, credentials and TLS, at most `maximumConnections`.
    func clientConfiguration(maximumConnections: Int) throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            let tls: PostgresClient.Configuration.TLS =
                switch sslMode {
                case .disable: .disable
                case .prefer: .prefer(try tlsConfiguration())
                case .require, .verifyCA, .verifyFull: .require(try tlsConfiguration())
                }
            configuration = .init(host: host, port: port, username: user, password: password?.value, database: database, tls: tls)
        case .unixSocket:
            configuration = .init(unixSocketPath: endpoint.socketPath!, username: user, password: password?.value, database: database)
        }
        configuration.options.maximumConnections = maximumConnections
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    /// One connection's settings, for the checks and migrations run before the pool starts.
    package func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS =
                switch sslMode {
                case .disable: .disable
                case .prefer: .prefer(try NIOSSLContext(configuration: tlsConfiguration()))
                case .require, .verifyCA, .verifyFull: .require(try NIOSSLContext(configuration: tlsConfiguration()))
                }
            configuration = .init(host: host, port: port, username: user, password: password?.value, database: database, tls: tls)
        case .unixSocket:
            configuration = .init(unixSocketPath: endpoint.socketPath!, username: user, password: password?.value, database: database)
        }
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    /// Only what PgBouncer passes on in every pooling mode: application_name.
    private var startupParameters: [(String, String)] { [("application_name", applicationName)] }

    /// libpq's checks per mode: `prefer` and `require` encrypt without checking the certificate,
    /// `verify-ca` checks its chain, `verify-full` its chain and its name.
    private func tlsConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case .disable, .prefer, .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let sslRootCertificate, sslMode == .verifyCA || sslMode == .verifyFull {
            tls.trustRoots = .file(sslRootCertificate)
        }
        return tls
    }
}
