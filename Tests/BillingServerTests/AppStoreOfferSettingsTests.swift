import BillingCore
import BillingServer
import Crypto
import Foundation
import Testing

@Suite("APPSTORE_OFFER_KEY_ID and APPSTORE_OFFER_PRIVATE_KEY")
struct AppStoreOfferSettingsTests {
    static let pem = P256.Signing.PrivateKey().pemRepresentation

    func keyFile(mode: Int) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-offer-\(UUID()).p8").path
        try Self.pem.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    @Test("The offer key is read from PEM text or a private file; it signs for the bundle with the API's issuer")
    func offerKey() throws {
        let inline = try Settings.load(
            environment: ["APPSTORE_BUNDLE_ID": "com.example.app", "APPSTORE_OFFER_KEY_ID": "ABCDE12345", "APPSTORE_OFFER_PRIVATE_KEY": Self.pem],
            configFile: nil)
        let signer = try #require(try inline.appStore.offerSigner())
        #expect(signer.keyID == "ABCDE12345")
        #expect(signer.bundleID == "com.example.app")
        #expect(signer.issuerID == nil, "no APPSTORE_ISSUER_ID: the legacy form only")
        let path = try keyFile(mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try Settings.load(
            environment: ["APPSTORE_BUNDLE_ID": "com.example.app", "APPSTORE_OFFER_KEY_ID": "ABCDE12345", "APPSTORE_OFFER_PRIVATE_KEY": path],
            configFile: nil)
        #expect(try file.appStore.offerSigner()?.keyID == "ABCDE12345")
    }

    @Test("Without offer settings the App Store Server API's key signs; without any key, or without a bundle id, nothing does")
    func fallback() throws {
        let path = try keyFile(mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let api = try Settings.load(
            environment: [
                "APPSTORE_BUNDLE_ID": "com.example.app", "APPSTORE_ISSUER_ID": "57246542-96fe-1a63-e053-0824d011072a",
                "APPSTORE_KEY_ID": "ZYXWV54321", "APPSTORE_PRIVATE_KEY": path,
            ], configFile: nil)
        let signer = try #require(try api.appStore.offerSigner())
        #expect(signer.keyID == "ZYXWV54321")
        #expect(signer.issuerID == "57246542-96fe-1a63-e053-0824d011072a")
        #expect(try Settings.load(environment: ["APPSTORE_BUNDLE_ID": "com.example.app"], configFile: nil).appStore.offerSigner() == nil)
        let noBundle = try Settings.load(environment: ["APPSTORE_OFFER_KEY_ID": "ABCDE12345", "APPSTORE_OFFER_PRIVATE_KEY": Self.pem], configFile: nil)
        #expect(try noBundle.appStore.offerSigner() == nil)
    }

    @Test("Half a pair, a bad key id, a key others can read and text that is no key are refused, never echoing the key", arguments: [
        ["APPSTORE_OFFER_KEY_ID": "ABCDE12345"], ["APPSTORE_OFFER_PRIVATE_KEY": pem], ["APPSTORE_OFFER_KEY_ID": "abc", "APPSTORE_OFFER_PRIVATE_KEY": pem],
        ["APPSTORE_OFFER_KEY_ID": "ABCDE12345", "APPSTORE_OFFER_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----"],
        ["APPSTORE_OFFER_KEY_ID": "ABCDE12345", "APPSTORE_OFFER_PRIVATE_KEY": "WORLD_READABLE"],
    ])
    func refused(_ given: [String: String]) throws {
        var environment = given.merging(["APPSTORE_BUNDLE_ID": "com.example.app"]) { first, _ in first }
        var cleanup: String?
        if environment["APPSTORE_OFFER_PRIVATE_KEY"] == "WORLD_READABLE" {
            let path = try keyFile(mode: 0o644)
            environment["APPSTORE_OFFER_PRIVATE_KEY"] = path
            cleanup = path
        }
        defer { cleanup.map { try? FileManager.default.removeItem(atPath: $0) } }
        do {
            _ = try Settings.load(environment: environment, configFile: nil).appStore.offerSigner()
            Issue.record("accepted \(given.keys.sorted())")
        } catch let error as SettingsError {
            #expect(error.description.contains("APPSTORE_OFFER_"), "\(error)")
            #expect(!error.description.contains("PRIVATE KEY-----"), "the message echoes the key")
            #expect(!error.description.contains(String(Self.pem.dropFirst(30).prefix(40))), "the message echoes the key")
        }
    }
}

@Suite("An offer key given as PEM text is a secret the logs mask")
struct AppStoreOfferSecretTests {
    @Test("The PEM and each of its base64 lines are among the secret values; a path is not")
    func masked() throws {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        let settings = try Settings.load(
            environment: ["APPSTORE_BUNDLE_ID": "com.example.app", "APPSTORE_OFFER_KEY_ID": "ABCDE12345", "APPSTORE_OFFER_PRIVATE_KEY": pem],
            configFile: nil)
        #expect(settings.secretValues.contains(pem))
        for line in pem.split(separator: "\n") where !line.hasPrefix("-----") {
            #expect(settings.secretValues.contains(String(line)))
        }
        let path = try Settings.load(
            environment: ["APPSTORE_BUNDLE_ID": "com.example.app", "APPSTORE_OFFER_KEY_ID": "ABCDE12345", "APPSTORE_OFFER_PRIVATE_KEY": "/etc/billingd/offer.p8"],
            configFile: nil)
        #expect(!path.secretValues.contains("/etc/billingd/offer.p8"))
    }
}
