import APITransport
import AppStoreAPI
import BillingCore
import Crypto
import Logging
import StripeAPI

extension Settings.Stripe {
    /// The process's Stripe client; nil when STRIPE_API_KEY is not set.
    public func client(logger: Logger, observer: (any StripeClientObserver)? = nil) -> StripeClient? {
        guard let apiKey else { return nil }
        var configuration = StripeClientConfiguration(apiKey: apiKey, baseURL: apiBase, apiVersion: apiVersion)
        configuration.connectTimeout = connectTimeout
        configuration.requestTimeout = timeout
        configuration.maxRetries = maxRetries
        if let rateLimit { configuration.requestsPerSecond = rateLimit }
        return StripeClient(configuration: configuration, logger: logger, observer: observer)
    }
}

extension Settings.AppStore {
    /// The process's App Store Server API clients, one per environment billingd accepts
    /// (Production, Sandbox), sharing one transport and one token bucket. Empty when the API
    /// settings are not set; throws when the key file is unsafe or not a key.
    public func clients(logger: Logger) throws -> [AppStoreEnvironment: AppStoreClient] {
        guard let issuerID, let keyID, let path = privateKeyPath, let bundleID,
            let verifier = try AppStoreSupport.verifier(self, localRoot: nil)
        else { return [:] }
        let key: P256.Signing.PrivateKey
        do {
            key = try AppStoreSigningKey.load(path: path)
        } catch {
            throw SettingsError.invalid("APPSTORE_PRIVATE_KEY", nil, error.message)
        }
        let transport = CurlTransport(maxConnections: 8)
        let limiter = RequestRateLimiter(requestsPerSecond: rateLimit)
        var clients: [AppStoreEnvironment: AppStoreClient] = [:]
        for environment in [AppStoreEnvironment.production, .sandbox] where environments.contains(environment) {
            let configuration = AppStoreClientConfiguration(
                issuerID: issuerID, keyID: keyID, privateKey: key, bundleID: bundleID, environment: environment,
                baseURL: apiBase, requestsPerSecond: rateLimit)
            clients[environment] = AppStoreClient(
                configuration: configuration, verifier: verifier, transport: transport, logger: logger, rateLimiter: limiter)
        }
        return clients
    }
}

extension Settings.AppStore {
    /// What signs promotional offers and introductory-offer eligibility: `APPSTORE_OFFER_KEY_ID`
    /// and `APPSTORE_OFFER_PRIVATE_KEY` (PEM text or a `.p8` path), else the App Store Server
    /// API's key; the issuer is `APPSTORE_ISSUER_ID`. Nil without a bundle id or a key (the offer
    /// endpoints then answer 503 `offer_signing_not_configured`); throws when the key is unsafe
    /// or not a key. The key's text never reaches a message.
    public func offerSigner(bundleID fallbackBundleID: String? = nil) throws -> AppStoreOfferSigner? {
        guard let bundleID = self.bundleID ?? fallbackBundleID else { return nil }
        let setting = offerKeyID == nil ? "APPSTORE_PRIVATE_KEY" : "APPSTORE_OFFER_PRIVATE_KEY"
        guard let keyID = offerKeyID ?? self.keyID, let source = offerPrivateKey ?? privateKeyPath else { return nil }
        let key: P256.Signing.PrivateKey
        do {
            if source.contains("-----BEGIN") {
                key = try AppStoreSigningKey.parse(pem: source, origin: "its PEM text")
            } else {
                key = try AppStoreSigningKey.load(path: source)
            }
        } catch {
            throw SettingsError.unusable("\(setting): \(error.message)")
        }
        return AppStoreOfferSigner(keyID: keyID, issuerID: issuerID, bundleID: bundleID, key: key)
    }
}
