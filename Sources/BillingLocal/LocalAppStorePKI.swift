import BillingSamples
import BillingServer
import BillingStore

extension AppStoreSupport {
    /// Where the ledger's `meta` table keeps local mode's App Store PKI.
    public static let localPKIKey = "local_appstore_pki"

    /// Local mode's App Store PKI, generated once and kept in the ledger like the local webhook
    /// secret; trusted only by `serve --local`.
    public static func localPKI(in store: any LedgerStore, creating: Bool) async throws -> AppStoreTestPKI? {
        if let stored = try await store.metaValue(localPKIKey) {
            return try AppStoreTestPKI(serialized: stored)
        }
        guard creating else { return nil }
        let pki = try AppStoreTestPKI()
        try await store.setMetaValue(localPKIKey, pki.serialized())
        return pki
    }
}
