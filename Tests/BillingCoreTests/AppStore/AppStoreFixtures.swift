@testable import BillingCore
import BillingSamples
import Foundation
import Testing

/// Apple-shaped payloads from `Fixtures/appstore/`, signed with a test PKI, and the ways to take
/// a compact JWS apart that the App Store tests forge with.
enum AppStoreFixtures {
    static let bundleID = "com.example.radar"
    static let appAppleID: Int64 = 1_234_567_890

    /// 2024-01-01, 2024-06-01, 2025-01-01 and 2026-01-01 (the fixtures' signedDate) in Unix ms.
    static let start2024: Int64 = 1_704_067_200_000
    static let mid2024: Int64 = 1_717_200_000_000
    static let start2025: Int64 = 1_735_689_600_000
    static let fixturesSignedDate: Int64 = 1_767_225_601_000

    /// `Fixtures/appstore/<name>.json` with members set: keys are paths such as `data.environment`;
    /// `removing` deletes members the same way.
    static func payload(_ name: String, _ changes: [String: Any] = [:], removing: [String] = []) throws -> [UInt8] {
        var object = try #require(
            JSONSerialization.jsonObject(with: Fixtures.data("appstore/\(name).json")) as? [String: Any])
        for (path, value) in changes { set(&object, path.split(separator: ".").map(String.init), value) }
        for path in removing { set(&object, path.split(separator: ".").map(String.init), nil) }
        return Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
    }

    private static func set(_ object: inout [String: Any], _ path: [String], _ value: Any?) {
        guard let first = path.first else { return }
        if path.count == 1 {
            object[first] = value
            return
        }
        var child = object[first] as? [String: Any] ?? [:]
        set(&child, Array(path.dropFirst()), value)
        object[first] = child
    }

    /// A configuration for `pki`'s root, the fixtures' bundle and app, Production and Sandbox.
    static func configuration(
        _ pki: AppStoreTestPKI, appAppleID: Int64? = appAppleID,
        environments: Set<AppStoreEnvironment> = [.production, .sandbox]
    ) -> AppStoreVerifier.Configuration {
        .init(bundleID: bundleID, appAppleID: appAppleID, environments: environments, rootCertificates: [pki.rootDER])
    }

    /// A genuine notification from the fixture, with a transaction and renewal info signed inside.
    static func notification(
        _ pki: AppStoreTestPKI, _ changes: [String: Any] = [:], transaction: [String: Any] = [:],
        renewalInfo: [String: Any] = [:]
    ) throws -> String {
        var changes = changes
        if changes["data.signedTransactionInfo"] == nil {
            changes["data.signedTransactionInfo"] = pki.sign(payload: try payload("transaction", transaction))
        }
        if changes["data.signedRenewalInfo"] == nil {
            changes["data.signedRenewalInfo"] = pki.sign(payload: try payload("renewal_info", renewalInfo))
        }
        return pki.sign(payload: try payload("notification", changes))
    }

    // MARK: - Taking a JWS apart

    static func segments(_ jws: String) -> [String] {
        jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    /// `jws` with its payload segment replaced by `payload` (the signature left as it was).
    static func replacingPayload(of jws: String, with payload: [UInt8]) -> String {
        var parts = segments(jws)
        parts[1] = JWSBase64.encode(payload, alphabet: .url)
        return parts.joined(separator: ".")
    }

    /// `jws` with one bit of its signature flipped.
    static func flippingSignatureBit(of jws: String) throws -> String {
        var parts = segments(jws)
        var signature = try #require(JWSBase64.decode(parts[2], alphabet: .url))
        signature[17] ^= 0x01
        parts[2] = JWSBase64.encode(signature, alphabet: .url)
        return parts.joined(separator: ".")
    }

    /// An Xcode-style JWS: ES256 header without Apple's chain, a signature no one checks.
    static func unchained(_ payload: [UInt8]) -> String {
        let header = JWSBase64.encode(Array(#"{"alg":"ES256","kid":"Apple_Xcode_Key"}"#.utf8), alphabet: .url)
        return header + "." + JWSBase64.encode(payload, alphabet: .url) + "." + JWSBase64.encode([UInt8](repeating: 7, count: 64), alphabet: .url)
    }
}

/// Which of the verifier's methods a JWS is for.
enum AppStoreDataKind: Sendable {
    case transaction, renewalInfo, notification

    func verify(_ jws: String, with verifier: AppStoreVerifier) async throws(AppStoreVerificationError) {
        switch self {
        case .transaction: _ = try await verifier.verifyTransaction(jws)
        case .renewalInfo: _ = try await verifier.verifyRenewalInfo(jws)
        case .notification: _ = try await verifier.verifyNotification(jws)
        }
    }
}
