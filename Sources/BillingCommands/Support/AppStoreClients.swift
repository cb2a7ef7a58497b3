import ArgumentParser
import APITransport
import AppStoreAPI
import BillingCore
import Crypto
import Logging

/// The process's App Store Server API clients, one per environment billingd accepts (Production,
/// Sandbox), sharing one transport and one token bucket.
enum AppStoreClients {
    /// Empty when the API settings are not set. Throws when the key file is unsafe or not a key.
    static func make(_ settings: Settings, logger: Logger) throws -> [AppStoreEnvironment: AppStoreClient] {
        guard let issuerID = settings.appStoreIssuerID, let keyID = settings.appStoreKeyID, let path = settings.appStorePrivateKeyPath,
            let bundleID = settings.appStoreBundleID,
            let verifier = try AppStoreSupport.verifier(settings, localPKI: nil)
        else { return [:] }
        let key: P256.Signing.PrivateKey
        do {
            key = try AppStoreSigningKey.load(path: path)
        } catch {
            throw SettingsError.invalid("APPSTORE_PRIVATE_KEY", nil, error.message)
        }
        let transport = CurlTransport(maxConnections: 8)
        let limiter = RequestRateLimiter(requestsPerSecond: settings.appStoreRateLimit)
        var clients: [AppStoreEnvironment: AppStoreClient] = [:]
        for environment in [AppStoreEnvironment.production, .sandbox] where settings.appStoreEnvironments.contains(environment) {
            let configuration = AppStoreClientConfiguration(
                issuerID: issuerID, keyID: keyID, privateKey: key, bundleID: bundleID, environment: environment,
                baseURL: settings.appStoreAPIBase, requestsPerSecond: settings.appStoreRateLimit)
            clients[environment] = AppStoreClient(
                configuration: configuration, verifier: verifier, transport: transport, logger: logger, rateLimiter: limiter)
        }
        return clients
    }

    /// The clients to use for `--environment` (all when nil), or a ValidationError that says what to set.
    static func select(_ settings: Settings, environment: String?, logger: Logger) throws -> [AppStoreClient] {
        let clients = try make(settings, logger: logger)
        guard !clients.isEmpty else {
            throw ValidationError(
                "The App Store Server API is not configured: set APPSTORE_BUNDLE_ID, APPSTORE_ISSUER_ID, APPSTORE_KEY_ID and APPSTORE_PRIVATE_KEY (the .p8 In-App Purchase key from App Store Connect → Users and Access → Integrations).")
        }
        guard let environment else { return [.production, .sandbox].compactMap { clients[$0] } }
        guard let client = clients.first(where: { $0.key.rawValue.lowercased() == environment.lowercased() })?.value else {
            throw ValidationError(
                "--environment \(environment): use one of \(clients.keys.map(\.rawValue).sorted().joined(separator: ", ")) (the environments in APPSTORE_ENVIRONMENTS that have an API).")
        }
        return [client]
    }
}
