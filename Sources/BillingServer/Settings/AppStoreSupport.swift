import BillingCore
import BillingStore
import Foundation

/// App Store set-up shared by `serve` and `appstore trigger`: the verifier from the settings and
/// trust anchors from files (BillingLocal adds local mode's generated PKI).
public enum AppStoreSupport {
    /// The bundle id local mode uses when `APPSTORE_BUNDLE_ID` is not set.
    public static let localBundleID = "local.billingd.app"

    /// The verifier `serve` uses; nil when App Store support is off. In local mode it also trusts
    /// the local PKI's root (and, without `APPSTORE_BUNDLE_ID`, accepts the local bundle id).
    public static func verifier(_ settings: Settings.AppStore, localRoot: [UInt8]?) throws -> AppStoreVerifier? {
        var roots = try settings.rootCertificates.map { try loadCertificate(path: $0) }
        if roots.isEmpty { roots = [AppleRootCertificates.g3] }
        guard let bundleID = settings.bundleID ?? (localRoot == nil ? nil : localBundleID) else { return nil }
        if let localRoot { roots.append(localRoot) }
        do {
            return try AppStoreVerifier(.init(
                bundleID: bundleID, appAppleID: settings.appAppleID, environments: settings.environments,
                rootCertificates: roots))
        } catch {
            throw SettingsError.invalid("APPSTORE_ROOT_CERTIFICATES", nil, "X.509 certificates (DER or PEM): \(error.message)")
        }
    }

    /// The verifier of StoreKit 1 receipts `serve` uses: the configured receipt roots, else Apple
    /// Inc. Root; in local mode also the local PKI's root, which signs local sample receipts.
    public static func receiptVerifier(_ settings: Settings.AppStore, localRoot: [UInt8]?) throws -> AppStoreReceiptVerifier {
        let setting = "APPSTORE_RECEIPT_ROOT_CERTIFICATES"
        var roots = try settings.receiptRootCertificates.map { try loadCertificate(path: $0, setting: setting) }
        if roots.isEmpty { roots = [AppleRootCertificates.appleIncRoot] }
        if let localRoot { roots.append(localRoot) }
        do {
            return try AppStoreReceiptVerifier(rootCertificates: roots)
        } catch {
            throw SettingsError.invalid(setting, nil, "X.509 certificates (DER or PEM): \(error.message)")
        }
    }

    /// A certificate file as DER: DER as it is, PEM decoded from its first CERTIFICATE block.
    public static func loadCertificate(path: String, setting: String = "APPSTORE_ROOT_CERTIFICATES") throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SettingsError.invalid(setting, path, "paths of readable certificate files (DER or PEM)")
        }
        let bytes = Array(data)
        guard let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") else { return bytes }
        let body = text.components(separatedBy: "-----BEGIN CERTIFICATE-----")[1].components(separatedBy: "-----END CERTIFICATE-----")[0]
        guard let der = Data(base64Encoded: body.filter { !$0.isWhitespace }) else {
            throw SettingsError.invalid(setting, path, "a PEM certificate whose base64 body decodes")
        }
        return Array(der)
    }
}
