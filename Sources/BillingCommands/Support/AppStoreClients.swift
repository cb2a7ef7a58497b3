import ArgumentParser
import AppStoreAPI
import BillingCore
import BillingLocal
import BillingServer
import BillingStore
import Logging

/// The App Store Server API clients of a command that cannot run without them.
enum AppStoreClients {
    /// The clients to use for `--environment` (all when nil), or a failure that says what to set.
    /// Without an In-App Purchase key, a ledger that `serve --local` runs on gives the Sandbox
    /// client of serve's App Store fake.
    static func select(_ settings: Settings, environment: String?, store: any LedgerStore, logger: Logger) async throws -> [AppStoreClient] {
        var clients = try settings.appStore.clients(logger: logger)
        if clients.isEmpty, let local = try await LocalAppStoreFake.client(settings: settings, store: store, logger: logger) {
            clients[.sandbox] = local
        }
        guard !clients.isEmpty else {
            throw CommandFailure.configuration(
                "The App Store Server API is not configured: set APPSTORE_BUNDLE_ID, APPSTORE_ISSUER_ID, APPSTORE_KEY_ID and APPSTORE_PRIVATE_KEY (the .p8 In-App Purchase key from App Store Connect → Users and Access → Integrations), or try it offline with `billingd serve --local`, which runs an App Store fake these commands use.")
        }
        guard let environment else { return [.production, .sandbox].compactMap { clients[$0] } }
        guard let client = clients.first(where: { $0.key.rawValue.lowercased() == environment.lowercased() })?.value else {
            throw ValidationError(
                "--environment \(environment): use one of \(clients.keys.map(\.rawValue).sorted().joined(separator: ", ")) (the environments in APPSTORE_ENVIRONMENTS that have an API).")
        }
        return [client]
    }
}
