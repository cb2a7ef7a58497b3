import APITransport
import AppStoreAPI
import BillingCore
import BillingSamples
import Crypto
import Foundation
import Synchronization
import Testing

/// An `HTTPTransport` that records every request and answers from a script, in order.
final class ScriptedAppleTransport: HTTPTransport {
    private let state: Mutex<(answers: [Result<HTTPTransportResponse, HTTPTransportError>], requests: [HTTPTransportRequest])>

    init(_ answers: [Result<HTTPTransportResponse, HTTPTransportError>]) {
        state = Mutex((answers, []))
    }

    var requests: [HTTPTransportRequest] { state.withLock { $0.requests } }

    func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse {
        let answer = state.withLock { state in
            state.requests.append(request)
            return state.answers.isEmpty ? nil : state.answers.removeFirst()
        }
        guard let answer else {
            Issue.record("the script has no answer left for \(request.method.rawValue) \(request.url)")
            throw .other("no scripted answer")
        }
        return try answer.get()
    }
}

/// A client on a scripted transport with a test PKI Apple's shape, a fixed clock and recorded sleeps.
final class AppleClientFixture: Sendable {
    static let bundleID = "com.example.app"
    let pki: AppStoreTestPKI
    let key = P256.Signing.PrivateKey()
    let transport: ScriptedAppleTransport
    let client: AppStoreClient
    let sleeps = Locked<[Duration]>([])
    let clock = Locked<Int64>(1_790_000_000)

    init(environment: AppStoreEnvironment = .sandbox, answers: [Result<HTTPTransportResponse, HTTPTransportError>], pki: AppStoreTestPKI? = nil) throws {
        let pki = try pki ?? AppStoreTestPKI()
        self.pki = pki
        transport = ScriptedAppleTransport(answers)
        let clock = self.clock
        let sleeps = self.sleeps
        let verifier = try AppStoreVerifier(.init(
            bundleID: Self.bundleID, appAppleID: 1_234_567_890, environments: [.sandbox, .production], rootCertificates: [pki.rootDER]))
        client = AppStoreClient(
            configuration: AppStoreClientConfiguration(
                issuerID: "57246542-96fe-1a63-e053-0824d011072a", keyID: "2X9R4HXF34", privateKey: key, bundleID: Self.bundleID,
                environment: environment, baseURL: "https://apple.test"),
            verifier: verifier, transport: transport, now: { clock.withLock { $0 } },
            sleep: { duration in sleeps.withLock { $0.append(duration) } }, random: { 0.5 })
    }

    /// A signed transaction of this fixture's app.
    func signedTransaction(id: String = "2000000000000001", original: String = "2000000000000001", environment: String = "Sandbox", expires: Int64 = 1_800_000_000_000, signedDate: Int64 = 1_790_000_000_000) -> String {
        let payload: [String: Any] = [
            "transactionId": id, "originalTransactionId": original, "bundleId": Self.bundleID, "productId": "com.example.pro.monthly",
            "type": "Auto-Renewable Subscription", "purchaseDate": expires - 2_592_000_000, "expiresDate": expires,
            "signedDate": signedDate, "environment": environment, "inAppOwnershipType": "PURCHASED",
        ]
        return pki.sign(payload: Array(try! JSONSerialization.data(withJSONObject: payload)))
    }

    /// A signed notification of this fixture's app.
    func signedNotification(uuid: String, environment: AppStoreEnvironment = .sandbox) -> String {
        let sample = AppStoreSampleNotification(
            type: "DID_RENEW", subtype: nil, productID: "com.example.pro.monthly", originalTransactionID: "2000000000000001",
            bundleID: Self.bundleID, environment: environment, now: 1_790_000_000_000)
        var copy = sample
        copy.notificationUUID = uuid
        copy.appAppleID = 1_234_567_890
        return copy.signedPayload(pki.sign(payload:))
    }
}

func answer(_ status: Int, _ body: String = "{}", headers: [String: String] = [:]) -> Result<HTTPTransportResponse, HTTPTransportError> {
    .success(HTTPTransportResponse(status: status, headers: headers.merging(["Content-Type": "application/json"]) { a, _ in a }, body: Array(body.utf8)))
}

/// The decoded JSON of one base64url JWT segment.
func jwtSegment(_ token: String, _ index: Int) -> [String: Any] {
    var text = String(token.split(separator: ".")[index]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while text.count % 4 != 0 { text += "=" }
    return (try? JSONSerialization.jsonObject(with: Data(base64Encoded: text) ?? Data())) as? [String: Any] ?? [:]
}

extension HTTPTransportRequest {
    var bearer: String? { header("Authorization").map { String($0.dropFirst("Bearer ".count)) } }
}

/// A value behind a lock that closures can share.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
}
