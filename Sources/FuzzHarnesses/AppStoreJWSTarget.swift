import BillingCore
import Foundation

/// App Store signed data: the input is a compact JWS, verified as a notification, a transaction
/// and renewal info by a verifier that trusts Apple's root and the fuzz test PKI's (so that the
/// seeds signed with it reach the chain, the signature and the claims), then decoded as the
/// webhook and the service API decode what verified. The stored-body readers, which decode
/// without verifying, read the same bytes.
enum AppStoreJWSTarget {
    static let bundleID = "com.example.radar"
    static let appAppleID: Int64 = 1_234_567_890

    /// The root certificate (DER) of the fuzz test PKI that signed the seeds
    /// (`Fixtures/appstore/fuzz-test-pki.pem`, whose key stays with the tests that sign).
    static let testRoot: [UInt8] = PackageResources.appstore_test_root_der

    static func run(_ input: [UInt8]) async -> FuzzVerdict {
        // A new verifier per input: its cache of verified chains must not carry one input's
        // state into the next, so that every finding replays alone.
        let verifier: AppStoreVerifier
        do {
            verifier = try AppStoreVerifier(
                .init(
                    bundleID: bundleID, appAppleID: appAppleID, environments: [.production, .sandbox, .xcode, .localTesting],
                    rootCertificates: [AppleRootCertificates.g3, testRoot]))
        } catch {
            return .violated("the verifier refuses its roots: \(error.message)")
        }
        let text = String(decoding: input, as: UTF8.self)
        var accepted = false
        if let notification = try? await verifier.verifyNotification(text) {
            accepted = true
            _ = try? AppStoreNotification(
                json: notification.payload, transaction: notification.transaction?.payload, renewalInfo: notification.renewalInfo?.payload)
        }
        if let transaction = try? await verifier.verifyTransaction(text) {
            accepted = true
            _ = try? AppStoreTransaction(json: transaction.payload)
        }
        if let renewalInfo = try? await verifier.verifyRenewalInfo(text) {
            accepted = true
            _ = try? AppStoreRenewalInfo(json: renewalInfo.payload)
        }
        _ = try? AppStoreJWS.payload(of: text)
        _ = try? AppStoreNotification(storedBody: input)
        _ = try? AppStoreAppTransaction(body: input)
        _ = try? AppStoreServerSnapshot(body: input)
        return accepted ? .accepted : .rejected
    }
}
