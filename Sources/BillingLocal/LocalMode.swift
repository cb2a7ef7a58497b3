import AppStoreAPI
import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import Logging

/// Local mode, for trying billingd without a Stripe account or an App Store app: what
/// `billingd serve --local` hands the daemon (``LocalStandIns``), and the generated webhook secret,
/// kept in the ledger's `meta` table so that `serve --local` and `trigger` agree without the user
/// copying it around.
public struct LocalMode: LocalStandIns {
    static let metaKey = "local_webhook_secret"

    public init() {}

    /// The local secret; generated and kept when there is none and `creating`, else nil.
    public static func secret(in store: any LedgerStore, creating: Bool) async throws -> String? {
        if let existing = try await store.metaValue(metaKey) { return existing }
        guard creating else { return nil }
        var generator = SystemRandomNumberGenerator()
        let random = (0..<24).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        let secret = "whsec_local_\(random)"
        try await store.setMetaValue(metaKey, secret)
        return secret
    }

    public func webhookSecret(in store: any LedgerStore) async throws -> String {
        // Creating, so there is one.
        try await Self.secret(in: store, creating: true)!
    }

    public func consoleToken(in store: any LedgerStore) async throws -> String {
        if let existing = try await store.metaValue("local_console_token") { return existing }
        var generator = SystemRandomNumberGenerator()
        let random = (0..<20).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        let token = "con_local_\(random)"
        try await store.setMetaValue("local_console_token", token)
        return token
    }

    public func appStoreRoot(in store: any LedgerStore) async throws -> [UInt8] {
        try await AppStoreSupport.localPKI(in: store, creating: true)!.rootDER
    }

    public func appStoreOfferSigner(bundleID: String, in store: any LedgerStore) async throws -> AppStoreOfferSigner {
        // Creating, so there is one.
        let key = try await LocalAppStoreFake.key(in: store, creating: true)!
        return AppStoreOfferSigner(keyID: LocalAppStoreFake.keyID, issuerID: LocalAppStoreFake.issuerID, bundleID: bundleID, key: key)
    }

    public func startStripe(catalog: PlanCatalog, store: any LedgerStore, logger: Logger) async throws -> any LocalStripeStandIn {
        try await LocalStripe.start(catalog: catalog, store: store, logger: logger)
    }

    public func startAppStore(
        settings: Settings, verifier: AppStoreVerifier, catalog: PlanCatalog, store: any LedgerStore, logger: Logger
    ) async throws -> any LocalAppStoreStandIn {
        let pki = try await AppStoreSupport.localPKI(in: store, creating: true)!
        return try await LocalAppStore.start(settings: settings, pki: pki, verifier: verifier, catalog: catalog, store: store, logger: logger)
    }
}
