import BillingStore
import Foundation

/// The generated webhook secret of local mode, kept in the ledger's `meta` table so that
/// `serve --local` and `trigger` agree without the user copying it around.
public enum LocalMode {
    static let metaKey = "local_webhook_secret"

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
}
