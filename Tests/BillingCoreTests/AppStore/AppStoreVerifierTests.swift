@testable import BillingCore
import BillingSamples
import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@Suite("App Store signed data")
struct AppStoreVerifierTests {
    typealias F = AppStoreFixtures
    let pki: AppStoreTestPKI

    init() throws {
        pki = try AppStoreTestPKI()
    }

    // MARK: - Trust anchor

    @Test("Apple's root G3 is compiled in, parses as X.509, has its published fingerprint, and is the default root")
    func appleRootG3() throws {
        let der = AppleRootCertificates.g3
        let certificate = try Certificate(derEncoded: der)
        #expect(certificate.subject.description.contains("Apple Root CA - G3"))
        let fingerprint = SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined()
        #expect(fingerprint == "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179")
        #expect(AppStoreVerifier.Configuration(bundleID: F.bundleID).rootCertificates == [der])
        #expect(AppStoreVerifier.Configuration(bundleID: F.bundleID).environments == [.production, .sandbox])
    }

    @Test("A configured root that is not DER X.509 is refused when the verifier is made")
    func invalidConfiguredRoot() throws {
        for roots in [[Array("-----BEGIN CERTIFICATE-----".utf8)], [], [pki.rootDER, [0x30, 0x03, 0x02, 0x01, 0x01]]] {
            let error = #expect(throws: AppStoreVerificationError.self) {
                try AppStoreVerifier(.init(bundleID: F.bundleID, rootCertificates: roots))
            }
            #expect(error?.code == .invalidCertificate)
        }
    }

    // MARK: - Apple's own chain

    /// A Sandbox transaction signed by the App Store in February 2025 (published in a public test
    /// suite): Apple's real leaf (expired October 2025), WWDR G6 intermediate and Root CA - G3.
    static func appleSignedJWS() throws -> String {
        String(decoding: try Fixtures.data("appstore/apple_sandbox_transaction.jws"), as: UTF8.self)
    }

    @Test("A transaction Apple signed verifies to the embedded G3 root, though its leaf has since expired")
    func appleSignedTransaction() async throws {
        let jws = try Self.appleSignedJWS()
        let verifier = try AppStoreVerifier(.init(bundleID: "com.goodheartapp"))
        let verified = try await verifier.verifyTransaction(jws)
        #expect(verified.environment == .sandbox)
        #expect(verified.signedDate == 1_739_161_772_561)
        #expect(verified.payload == (try AppStoreJWS.payload(of: jws)))
        // Twice: the second answer comes from the chain cache.
        #expect(try await verifier.verifyTransaction(jws) == verified)
    }

    @Test("Apple's signed transaction is refused once its payload is changed", arguments: [
        ("price", 1, AppStoreVerificationError.Code.signatureMismatch),
        ("signedDate", 1_767_225_601_000, .certificateExpiredAtSignedDate),
        ("signedDate", 1_600_000_000_000, .certificateExpiredAtSignedDate),
    ] as [(String, Int64, AppStoreVerificationError.Code)])
    func appleSignedTransactionChanged(member: String, value: Int64, code: AppStoreVerificationError.Code) async throws {
        let jws = try Self.appleSignedJWS()
        var object = try #require(JSONSerialization.jsonObject(with: Data(AppStoreJWS.payload(of: jws))) as? [String: Any])
        object[member] = value
        let changed = F.replacingPayload(of: jws, with: Array(try JSONSerialization.data(withJSONObject: object)))
        let verifier = try AppStoreVerifier(.init(bundleID: "com.goodheartapp"))
        let error = await #expect(throws: AppStoreVerificationError.self) { try await verifier.verifyTransaction(changed) }
        #expect(error?.code == code)
    }

    @Test("Apple's signed transaction is refused for another bundle, outside the accepted environments, or under another root")
    func appleSignedTransactionMisaddressed() async throws {
        let jws = try Self.appleSignedJWS()
        let cases: [(AppStoreVerifier.Configuration, AppStoreVerificationError.Code)] = [
            (.init(bundleID: F.bundleID), .wrongBundleID),
            (.init(bundleID: "com.goodheartapp", environments: [.production]), .wrongEnvironment),
            (.init(bundleID: "com.goodheartapp", rootCertificates: [pki.rootDER]), .untrustedChain),
        ]
        for (configuration, code) in cases {
            let verifier = try AppStoreVerifier(configuration)
            let error = await #expect(throws: AppStoreVerificationError.self) { try await verifier.verifyTransaction(jws) }
            #expect(error?.code == code)
        }
    }

    // MARK: - Accepted

    @Test("A genuine transaction is accepted with the payload bytes exactly as signed")
    func genuineTransaction() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let payload = try F.payload("transaction")
        let verified = try await verifier.verifyTransaction(pki.sign(payload: payload))
        #expect(verified == VerifiedSignedData(payload: payload, environment: .sandbox, signedDate: F.fixturesSignedDate))
    }

    @Test("Genuine renewal info is accepted: it names no bundle id, only its environment is checked")
    func genuineRenewalInfo() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let payload = try F.payload("renewal_info")
        let verified = try await verifier.verifyRenewalInfo(pki.sign(payload: payload))
        #expect(verified.payload == payload)
        #expect(verified.environment == .sandbox)
        #expect(verified.signedDate == F.fixturesSignedDate)
    }

    @Test("A genuine notification is accepted with the transaction and renewal info inside it verified")
    func genuineNotification() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let signedPayload = try F.notification(pki)
        let verified = try await verifier.verifyNotification(signedPayload)
        #expect(verified.payload == (try AppStoreJWS.payload(of: signedPayload)))
        #expect(verified.notificationUUID == "002e14d5-51f5-4503-b5a8-c3a1af68eb20")
        #expect(verified.notificationType == .subscribed)
        #expect(verified.subtype == .initialBuy)
        #expect(verified.environment == .sandbox)
        #expect(verified.signedDate == 1_767_225_602_000)
        let transaction = try #require(verified.transaction)
        #expect(transaction.payload == (try F.payload("transaction")))
        let renewalInfo = try #require(verified.renewalInfo)
        #expect(renewalInfo.payload == (try F.payload("renewal_info")))
    }

    @Test("A Production notification for the configured app Apple ID is accepted and is live")
    func productionNotification() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let signedPayload = try F.notification(
            pki, ["data.environment": "Production"], transaction: ["environment": "Production"],
            renewalInfo: ["environment": "Production"])
        let verified = try await verifier.verifyNotification(signedPayload)
        #expect(verified.environment == .production)
        #expect(verified.environment.isLive)
        #expect(verified.transaction?.environment == .production)
    }

    @Test("Notifications without data take the app and environment from summary or externalPurchaseToken")
    func notificationsWithoutData() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let summary = try await verifier.verifyNotification(pki.sign(payload: F.payload("notification_summary")))
        #expect(summary.environment == .sandbox)
        #expect(summary.notificationType == .renewalExtension)
        #expect(summary.transaction == nil && summary.renewalInfo == nil)

        let token = try await verifier.verifyNotification(pki.sign(payload: F.payload("notification_external_purchase_token")))
        #expect(token.environment == .sandbox)
        // Without the SANDBOX prefix, the token is Production (as in Apple's library).
        let live = try await verifier.verifyNotification(
            pki.sign(payload: F.payload("notification_external_purchase_token", ["externalPurchaseToken.externalPurchaseId": "b2158121"])))
        #expect(live.environment == .production)
    }

    @Test("A notification type without data, summary or token is refused: it names no app")
    func notificationNamingNoApp() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let payload = try F.payload("notification", removing: ["data"])
        let error = await #expect(throws: AppStoreVerificationError.self) {
            try await verifier.verifyNotification(pki.sign(payload: payload))
        }
        #expect(error?.code == .wrongBundleID)
    }

    @Test("Unknown fields, types and enum values in a genuine payload are accepted")
    func tolerantDecoding() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let payload = try F.payload(
            "transaction", ["type": "Some Future Type", "price": "not a number", "newField": ["nested": [1, 2, 3]], "quantity": NSNull()])
        let verified = try await verifier.verifyTransaction(pki.sign(payload: payload))
        #expect(verified.payload == payload)
    }

    @Test("Xcode and LocalTesting data is accepted without a chain only when that environment is configured")
    func localEnvironments() async throws {
        for environment in [AppStoreEnvironment.xcode, .localTesting] {
            let jws = AppStoreFixtures.unchained(try F.payload("transaction", ["environment": environment.rawValue]))
            let refusing = try AppStoreVerifier(F.configuration(pki))
            let error = await #expect(throws: AppStoreVerificationError.self) { try await refusing.verifyTransaction(jws) }
            #expect(error?.code == .wrongEnvironment)

            let accepting = try AppStoreVerifier(F.configuration(pki, environments: [.sandbox, environment]))
            let verified = try await accepting.verifyTransaction(jws)
            #expect(verified.environment == environment)
            #expect(!verified.environment.isLive && !verified.environment.isChainSigned)
            // The claims are still checked.
            let otherBundle = AppStoreFixtures.unchained(
                try F.payload("transaction", ["environment": environment.rawValue, "bundleId": "com.example.other"]))
            let bundleError = await #expect(throws: AppStoreVerificationError.self) { try await accepting.verifyTransaction(otherBundle) }
            #expect(bundleError?.code == .wrongBundleID)
        }
    }

    // MARK: - Time

    @Test("Data signed while the leaf was valid stays valid after the leaf expired: there is no now")
    func validityAtSignedDate() async throws {
        let pki = try AppStoreTestPKI(options: .init(leafNotValidBefore: F.start2024, leafNotValidAfter: F.start2025))
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let old = try F.payload("transaction", ["signedDate": F.mid2024])
        #expect(try await verifier.verifyTransaction(pki.sign(payload: old)).signedDate == F.mid2024)
        // The boundaries are inclusive, to the millisecond.
        for signedDate in [F.start2024, F.start2025] {
            let payload = try F.payload("transaction", ["signedDate": signedDate])
            #expect(try await verifier.verifyTransaction(pki.sign(payload: payload)).signedDate == signedDate)
        }
        for signedDate in [F.start2024 - 1, F.start2025 + 1] {
            let payload = try F.payload("transaction", ["signedDate": signedDate])
            let error = await #expect(throws: AppStoreVerificationError.self) {
                try await verifier.verifyTransaction(pki.sign(payload: payload))
            }
            #expect(error?.code == .certificateExpiredAtSignedDate)
        }
    }

    @Test("The chain cache gives the same answers: valid, then expired at signedDate, then valid again")
    func cacheKeepsAnswers() async throws {
        let pki = try AppStoreTestPKI(options: .init(leafNotValidBefore: F.start2024, leafNotValidAfter: F.start2025))
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let valid = pki.sign(payload: try F.payload("transaction", ["signedDate": F.mid2024]))
        let expired = pki.sign(payload: try F.payload("transaction"))
        let tampered = F.replacingPayload(of: valid, with: try F.payload("transaction", ["signedDate": F.mid2024, "price": 1]))
        for _ in 0..<3 {
            #expect(try await verifier.verifyTransaction(valid).signedDate == F.mid2024)
            let expiredError = await #expect(throws: AppStoreVerificationError.self) { try await verifier.verifyTransaction(expired) }
            #expect(expiredError?.code == .certificateExpiredAtSignedDate)
            let tamperedError = await #expect(throws: AppStoreVerificationError.self) { try await verifier.verifyTransaction(tampered) }
            #expect(tamperedError?.code == .signatureMismatch)
        }
        // A verifier with other roots does not share the cache: the same chain is refused there.
        let other = try AppStoreVerifier(F.configuration(try AppStoreTestPKI()))
        let error = await #expect(throws: AppStoreVerificationError.self) { try await other.verifyTransaction(valid) }
        #expect(error?.code == .untrustedChain)
    }

    // MARK: - Refused

    @Test("Forged, foreign or misaddressed data is refused with exactly its code", arguments: Rejection.allCases)
    func refused(_ rejection: Rejection) async throws {
        let scenario = try rejection.scenario(pki: pki)
        let verifier = try AppStoreVerifier(scenario.configuration)
        let error = await #expect(throws: AppStoreVerificationError.self) {
            try await scenario.kind.verify(scenario.jws, with: verifier)
        }
        let refusal = try #require(error)
        #expect(refusal.code == rejection.expected, "\(refusal)")
        if let place = scenario.messagePrefix {
            #expect(refusal.message.hasPrefix(place), "\(refusal)")
        }
    }

    @Test("Messages quote at most a short excerpt of the input, without control characters")
    func messagesAreBounded() async throws {
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let hostile = "com.evil\u{1b}[2J\r\nFAKE LOG LINE " + String(repeating: "A", count: 10_000)
        let error = await #expect(throws: AppStoreVerificationError.self) {
            try await verifier.verifyTransaction(pki.sign(payload: F.payload("transaction", ["bundleId": hostile])))
        }
        let message = try #require(error).message
        #expect(message.count < 400)
        #expect(!message.unicodeScalars.contains { $0.properties.generalCategory == .control })
        #expect(!message.contains("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"))
        #expect(error?.description.hasPrefix("wrong_bundle_id: ") == true)

        let garbage = await #expect(throws: AppStoreVerificationError.self) {
            try await verifier.verifyTransaction("a.b\u{7}\u{0}" + String(repeating: "%", count: 5000) + ".c")
        }
        #expect((garbage?.message.count ?? 0) < 300)
        #expect(garbage?.message.unicodeScalars.contains { $0.properties.generalCategory == .control } == false)
    }

    // MARK: - Decoding without verifying

    @Test("AppStoreJWS.payload returns the payload bytes exactly as signed, whitespace and escapes included")
    func payloadWithoutVerifying() throws {
        let payload = Array(#"{ "bundleId" : "com.example.radar",  "note":"caf\u00e9 ✓", "signedDate":1767225601000 }"#.utf8)
        #expect(try AppStoreJWS.payload(of: pki.sign(payload: payload)) == payload)
        for malformed in ["", "a.b", "a.b.c.d", "e30.e30!.c2ln", "e30 .e30.c2ln"] {
            let error = #expect(throws: AppStoreVerificationError.self) { try AppStoreJWS.payload(of: malformed) }
            #expect(error?.code == .invalidJWS)
        }
    }
}

/// One way data must be refused, with the code it must be refused with.
enum Rejection: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case foreignRoot = "signed by another PKI than the configured root"
    case ownRootWithAppleG3Configured = "the payload brings its own root while Apple's G3 is configured"
    case configuredRootNamedInX5C = "x5c names the configured root above an attacker's leaf and intermediate"
    case leafWithoutAppleOID = "the leaf lacks the receipt-signing OID"
    case intermediateWithoutAppleOID = "the intermediate lacks the WWDR OID"
    case twoCertificates = "x5c holds two certificates"
    case fourCertificates = "x5c holds four certificates"
    case noX5C = "the header has no x5c"
    case certificateNotBase64 = "an x5c entry is not standard base64"
    case certificateNotDER = "an x5c entry is base64 but not a certificate"
    case leafExpiredAtSignedDate = "the leaf had expired at signedDate"
    case leafNotYetValidAtSignedDate = "the leaf was not yet valid at signedDate"
    case tamperedPayload = "the payload was changed after signing"
    case tamperedSignature = "one bit of the signature was flipped"
    case signatureOfWrongLength = "the signature is 72 bytes (DER form), not 64"
    case algNone = "alg is none with an empty signature"
    case algHS256KeyConfusion = "alg is HS256, HMAC keyed with the leaf's public key"
    case algRS256 = "alg is RS256"
    case noAlg = "the header has no alg"
    case malformedBase64 = "a segment has a character outside base64url"
    case standardBase64Segment = "a segment uses standard base64's + and /"
    case twoSegments = "the JWS has two segments"
    case fourSegments = "the JWS has four segments"
    case headerNotJSON = "the header is not JSON"
    case payloadNotJSON = "the payload is not JSON"
    case payloadIsArray = "the payload is a JSON array"
    case noSignedDate = "the payload has no signedDate"
    case wrongBundle = "the transaction is for another bundle"
    case noBundle = "the transaction names no bundle"
    case productionWrongAppAppleID = "a Production notification is for another app Apple ID"
    case productionNotificationWithoutAppAppleID = "a Production notification arrives with no app Apple ID configured"
    case productionTransactionWithoutAppAppleID = "a Production transaction arrives with no app Apple ID configured"
    case productionRenewalInfoWithoutAppAppleID = "Production renewal info arrives with no app Apple ID configured"
    case sandboxNotAccepted = "Sandbox data reaches a Production-only verifier"
    case renewalInfoEnvironmentNotAccepted = "Sandbox renewal info reaches a Production-only verifier"
    case noEnvironment = "the transaction names no environment"
    case xcodeNotConfigured = "Xcode data reaches a verifier without Xcode"
    case productionWithoutChain = "data claiming Production comes without a chain while Xcode is configured"
    case unknownEnvironmentWithoutChain = "data from an unknown environment comes without a chain"
    case innerTransactionTampered = "the transaction inside a genuine notification was changed"
    case innerRenewalInfoForeign = "the renewal info inside a genuine notification is signed by another PKI"
    case innerTransactionWrongBundle = "the transaction inside a genuine notification is for another bundle"
    case innerTransactionOtherEnvironment = "the transaction inside a Sandbox notification is from Production"
    case notificationWithoutUUID = "the notification has no notificationUUID"

    var testDescription: String { rawValue }

    var expected: AppStoreVerificationError.Code {
        switch self {
        case .foreignRoot, .ownRootWithAppleG3Configured, .configuredRootNamedInX5C, .innerRenewalInfoForeign: .untrustedChain
        case .leafWithoutAppleOID, .intermediateWithoutAppleOID: .missingAppleOID
        case .twoCertificates, .fourCertificates, .noX5C, .productionWithoutChain, .unknownEnvironmentWithoutChain:
            .invalidChainLength
        case .certificateNotBase64, .certificateNotDER: .invalidCertificate
        case .leafExpiredAtSignedDate, .leafNotYetValidAtSignedDate: .certificateExpiredAtSignedDate
        case .tamperedPayload, .tamperedSignature, .signatureOfWrongLength, .innerTransactionTampered: .signatureMismatch
        case .algNone, .algHS256KeyConfusion, .algRS256, .noAlg: .unsupportedAlgorithm
        case .malformedBase64, .standardBase64Segment, .twoSegments, .fourSegments, .headerNotJSON: .invalidJWS
        case .payloadNotJSON, .payloadIsArray, .noSignedDate, .notificationWithoutUUID: .invalidPayload
        case .wrongBundle, .noBundle, .innerTransactionWrongBundle: .wrongBundleID
        case .productionWrongAppAppleID, .productionNotificationWithoutAppAppleID, .productionTransactionWithoutAppAppleID,
            .productionRenewalInfoWithoutAppAppleID:
            .wrongAppAppleID
        case .sandboxNotAccepted, .renewalInfoEnvironmentNotAccepted, .noEnvironment, .xcodeNotConfigured,
            .innerTransactionOtherEnvironment:
            .wrongEnvironment
        }
    }

    struct Scenario {
        var kind: AppStoreDataKind = .transaction
        var jws: String
        var configuration: AppStoreVerifier.Configuration
        /// Where the message must say the problem was found, for data inside a notification.
        var messagePrefix: String?
    }

    func scenario(pki: AppStoreTestPKI) throws -> Scenario {
        typealias F = AppStoreFixtures
        let configuration = F.configuration(pki)
        let transaction = try F.payload("transaction")
        let genuine = pki.sign(payload: transaction)
        switch self {
        case .foreignRoot:
            return Scenario(jws: try AppStoreTestPKI(options: .init(name: "Attacker")).sign(payload: transaction), configuration: configuration)
        case .ownRootWithAppleG3Configured:
            return Scenario(jws: genuine, configuration: .init(bundleID: F.bundleID, appAppleID: F.appAppleID))
        case .configuredRootNamedInX5C:
            let attacker = try AppStoreTestPKI(options: .init(name: "Attacker"))
            let x5c = [attacker.leafDER, attacker.intermediateDER, pki.rootDER]
            return Scenario(jws: attacker.sign(payload: transaction, header: attacker.header(x5c: x5c)), configuration: configuration)
        case .leafWithoutAppleOID, .intermediateWithoutAppleOID:
            let faulty = try AppStoreTestPKI(
                options: .init(leafHasAppleOID: self != .leafWithoutAppleOID, intermediateHasAppleOID: self != .intermediateWithoutAppleOID))
            return Scenario(jws: faulty.sign(payload: transaction), configuration: F.configuration(faulty))
        case .twoCertificates:
            return Scenario(
                jws: pki.sign(payload: transaction, header: pki.header(x5c: [pki.leafDER, pki.intermediateDER])), configuration: configuration)
        case .fourCertificates:
            return Scenario(
                jws: pki.sign(payload: transaction, header: pki.header(x5c: pki.chainDER + [pki.rootDER])), configuration: configuration)
        case .noX5C:
            return Scenario(jws: pki.sign(payload: transaction, header: ["alg": "ES256"]), configuration: configuration)
        case .certificateNotBase64:
            var header = pki.header()
            header["x5c"] = ["not base64!", "x", "y"]
            return Scenario(jws: pki.sign(payload: transaction, header: header), configuration: configuration)
        case .certificateNotDER:
            return Scenario(
                jws: pki.sign(payload: transaction, header: pki.header(x5c: [pki.leafDER, Array("hello".utf8), pki.rootDER])),
                configuration: configuration)
        case .leafExpiredAtSignedDate, .leafNotYetValidAtSignedDate:
            let window: (Int64, Int64) =
                self == .leafExpiredAtSignedDate ? (F.start2024, F.start2025) : (F.fixturesSignedDate + 60_000, AppStoreTestPKI.defaultNotValidAfter)
            let dated = try AppStoreTestPKI(options: .init(leafNotValidBefore: window.0, leafNotValidAfter: window.1))
            return Scenario(jws: dated.sign(payload: transaction), configuration: F.configuration(dated))
        case .tamperedPayload:
            return Scenario(
                jws: F.replacingPayload(of: genuine, with: try F.payload("transaction", ["productId": "com.example.radar.enterprise.yearly"])),
                configuration: configuration)
        case .tamperedSignature:
            return Scenario(jws: try F.flippingSignatureBit(of: genuine), configuration: configuration)
        case .signatureOfWrongLength:
            return Scenario(
                jws: pki.sign(payload: transaction, header: pki.header(), signature: .raw([UInt8](repeating: 0x30, count: 72))),
                configuration: configuration)
        case .algNone:
            return Scenario(jws: pki.sign(payload: transaction, header: pki.header(alg: "none"), signature: .raw([])), configuration: configuration)
        case .algHS256KeyConfusion:
            let key = Array(pki.leafPublicKey.x963Representation)
            return Scenario(
                jws: pki.sign(payload: transaction, header: pki.header(alg: "HS256"), signature: .hmacSHA256(key: key)),
                configuration: configuration)
        case .algRS256:
            return Scenario(jws: pki.sign(payload: transaction, header: pki.header(alg: "RS256")), configuration: configuration)
        case .noAlg:
            var header = pki.header()
            header["alg"] = nil
            return Scenario(jws: pki.sign(payload: transaction, header: header), configuration: configuration)
        case .malformedBase64:
            var parts = F.segments(genuine)
            parts[1].insert("*", at: parts[1].index(parts[1].startIndex, offsetBy: 8))
            return Scenario(jws: parts.joined(separator: "."), configuration: configuration)
        case .standardBase64Segment:
            var parts = F.segments(genuine)
            parts[2] = JWSBase64.encode([0xfb, 0xff, 0xbf] + [UInt8](repeating: 0, count: 61), alphabet: .standard)
            return Scenario(jws: parts.joined(separator: "."), configuration: configuration)
        case .twoSegments:
            return Scenario(jws: F.segments(genuine).prefix(2).joined(separator: "."), configuration: configuration)
        case .fourSegments:
            return Scenario(jws: genuine + "." + F.segments(genuine)[2], configuration: configuration)
        case .headerNotJSON:
            var parts = F.segments(genuine)
            parts[0] = JWSBase64.encode(Array("alg=ES256".utf8), alphabet: .url)
            return Scenario(jws: parts.joined(separator: "."), configuration: configuration)
        case .payloadNotJSON:
            return Scenario(jws: pki.sign(payload: Array("signedDate=1767225601000".utf8)), configuration: configuration)
        case .payloadIsArray:
            return Scenario(jws: pki.sign(payload: Array("[1767225601000]".utf8)), configuration: configuration)
        case .noSignedDate:
            return Scenario(jws: pki.sign(payload: try F.payload("transaction", removing: ["signedDate"])), configuration: configuration)
        case .wrongBundle:
            return Scenario(
                jws: pki.sign(payload: try F.payload("transaction", ["bundleId": "com.example.other"])), configuration: configuration)
        case .noBundle:
            return Scenario(jws: pki.sign(payload: try F.payload("transaction", removing: ["bundleId"])), configuration: configuration)
        case .productionWrongAppAppleID:
            return Scenario(
                kind: .notification,
                jws: try F.notification(
                    pki, ["data.environment": "Production", "data.appAppleId": 987_654_321], transaction: ["environment": "Production"],
                    renewalInfo: ["environment": "Production"]),
                configuration: configuration)
        case .productionNotificationWithoutAppAppleID:
            return Scenario(
                kind: .notification,
                jws: try F.notification(
                    pki, ["data.environment": "Production"], transaction: ["environment": "Production"],
                    renewalInfo: ["environment": "Production"]),
                configuration: F.configuration(pki, appAppleID: nil))
        case .productionTransactionWithoutAppAppleID:
            return Scenario(
                jws: pki.sign(payload: try F.payload("transaction", ["environment": "Production"])),
                configuration: F.configuration(pki, appAppleID: nil))
        case .productionRenewalInfoWithoutAppAppleID:
            return Scenario(
                kind: .renewalInfo, jws: pki.sign(payload: try F.payload("renewal_info", ["environment": "Production"])),
                configuration: F.configuration(pki, appAppleID: nil))
        case .sandboxNotAccepted:
            return Scenario(jws: genuine, configuration: F.configuration(pki, environments: [.production]))
        case .renewalInfoEnvironmentNotAccepted:
            return Scenario(
                kind: .renewalInfo, jws: pki.sign(payload: try F.payload("renewal_info")),
                configuration: F.configuration(pki, environments: [.production]))
        case .noEnvironment:
            return Scenario(jws: pki.sign(payload: try F.payload("transaction", removing: ["environment"])), configuration: configuration)
        case .xcodeNotConfigured:
            return Scenario(jws: F.unchained(try F.payload("transaction", ["environment": "Xcode"])), configuration: configuration)
        case .productionWithoutChain:
            return Scenario(
                jws: F.unchained(try F.payload("transaction", ["environment": "Production"])),
                configuration: F.configuration(pki, environments: [.production, .sandbox, .xcode]))
        case .unknownEnvironmentWithoutChain:
            return Scenario(
                jws: F.unchained(try F.payload("transaction", ["environment": "Staging"])),
                configuration: F.configuration(pki, environments: [.sandbox, AppStoreEnvironment(rawValue: "Staging")]))
        case .innerTransactionTampered:
            let inner = F.replacingPayload(of: genuine, with: try F.payload("transaction", ["expiresDate": 4_070_908_800_000]))
            return Scenario(
                kind: .notification, jws: try F.notification(pki, ["data.signedTransactionInfo": inner]),
                configuration: configuration, messagePrefix: "In the notification's data.signedTransactionInfo: ")
        case .innerRenewalInfoForeign:
            let foreign = try AppStoreTestPKI(options: .init(name: "Attacker")).sign(payload: try F.payload("renewal_info"))
            return Scenario(
                kind: .notification, jws: try F.notification(pki, ["data.signedRenewalInfo": foreign]),
                configuration: configuration, messagePrefix: "In the notification's data.signedRenewalInfo: ")
        case .innerTransactionWrongBundle:
            return Scenario(
                kind: .notification, jws: try F.notification(pki, transaction: ["bundleId": "com.example.other"]),
                configuration: configuration, messagePrefix: "In the notification's data.signedTransactionInfo: ")
        case .innerTransactionOtherEnvironment:
            return Scenario(
                kind: .notification, jws: try F.notification(pki, transaction: ["environment": "Production"]),
                configuration: configuration, messagePrefix: "In the notification's data.signedTransactionInfo: ")
        case .notificationWithoutUUID:
            return Scenario(
                kind: .notification, jws: pki.sign(payload: try F.payload("notification", removing: ["notificationUUID"])),
                configuration: configuration)
        }
    }
}
