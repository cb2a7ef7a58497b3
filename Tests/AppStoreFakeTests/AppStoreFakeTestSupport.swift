import AppStoreFake
import AsyncHTTPClient
import BillingCore
import BillingSamples
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// What billingd holds: an App Store Connect API key (`.p8`) and the ids that go with it.
struct APIKey {
    let privateKey = P256.Signing.PrivateKey()
    var issuerID = "57246542-96fe-1a63-e053-0824d011072a"
    var keyID = "2X9R4HXF34"
    var bundleID = "com.example.billingd"

    /// Claims and header as billingd sends them, each changeable to make a bad token.
    struct Token {
        var alg: String? = "ES256"
        var kid: String?
        var typ: String? = "JWT"
        var iss: String?
        var aud: String? = "appstoreconnect-v1"
        var bid: String?
        var iat: Int64
        var exp: Int64
    }

    /// A token that the fake should accept: issued now, valid 20 minutes.
    func token(now: Int64 = Int64(Date().timeIntervalSince1970)) -> Token {
        Token(kid: keyID, iss: issuerID, bid: bundleID, iat: now, exp: now + 1200)
    }

    /// The compact JWS of `token`, signed ES256 (raw r‖s) with this key, or `signature` as given.
    func sign(_ token: Token, signature: [UInt8]? = nil) -> String {
        var header: [String: Any] = [:]
        header["alg"] = token.alg
        header["kid"] = token.kid
        header["typ"] = token.typ
        var claims: [String: Any] = ["iat": token.iat, "exp": token.exp]
        claims["iss"] = token.iss
        claims["aud"] = token.aud
        claims["bid"] = token.bid
        let input = Self.base64URL(Self.json(header)) + "." + Self.base64URL(Self.json(claims))
        let bytes = signature ?? Array((try! privateKey.signature(for: Array(input.utf8))).rawRepresentation)
        return input + "." + Self.base64URL(bytes)
    }

    /// A good bearer token, as billingd's client makes one.
    var bearer: String { sign(token()) }

    static func json(_ object: [String: Any]) -> [UInt8] {
        Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func decodeBase64URL(_ text: some StringProtocol) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }
}

/// An answer from the fake over HTTP.
struct Answer {
    let status: Int
    let headers: HTTPHeaders
    let body: [UInt8]

    /// The body as a JSON object.
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }

    func header(_ name: String) -> String? { headers.first(name: name) }

    var errorCode: Int? { json["errorCode"] as? Int }
}

/// A plain HTTP client for the fake, so that its tests do not depend on billingd's App Store client.
struct APIClient {
    let baseURL: String
    let key: APIKey
    /// Overrides the `Authorization` header; nil sends a fresh good token.
    var authorization: String?

    func get(_ path: String, _ query: [(String, String)] = []) async throws -> Answer {
        try await send(.GET, path, query: query)
    }

    func post(_ path: String, json: [String: Any]? = nil, _ query: [(String, String)] = []) async throws -> Answer {
        try await send(.POST, path, query: query, body: json.map(APIKey.json))
    }

    func send(
        _ method: HTTPMethod, _ path: String, query: [(String, String)] = [], body: [UInt8]? = nil
    ) async throws -> Answer {
        var url = baseURL + path
        if !query.isEmpty {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            url += "?" + query.map { "\($0)=\($1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }
                .joined(separator: "&")
        }
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: authorization ?? "Bearer \(key.bearer)")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        return Answer(status: Int(response.status.code), headers: response.headers, body: Array(buffer: bytes))
    }
}

/// Runs `body` against a fresh fake (Sandbox, clock fixed at 2026-11-01), stopped afterwards.
func withFake(
    key: APIKey = APIKey(), notificationURL: String? = nil, environment: AppStoreEnvironment = .sandbox,
    configure: (inout AppStoreFake.Configuration) -> Void = { _ in },
    _ body: (AppStoreFake, APIClient) async throws -> Void
) async throws {
    var configuration = AppStoreFake.Configuration(
        issuerID: key.issuerID, keyID: key.keyID, bundleID: key.bundleID, publicKey: key.privateKey.publicKey,
        environment: environment, appAppleID: 1_234_567_890, notificationURL: notificationURL,
        clock: .init(fixedAt: startOfTest), catchUpInterval: nil)
    configure(&configuration)
    let fake = try await AppStoreFake.start(configuration)
    do {
        try await body(fake, APIClient(baseURL: fake.baseURL, key: key))
    } catch {
        await fake.stop()
        throw error
    }
    await fake.stop()
}

/// 2026-11-01T00:00:00Z, the fixed clock's start.
let startOfTest: Int64 = 1_793_491_200_000

/// billingd's verifier, trusting the fake's root instead of Apple's.
func verifier(for fake: AppStoreFake, key: APIKey = APIKey()) throws -> AppStoreVerifier {
    try AppStoreVerifier(
        .init(
            bundleID: fake.configuration.bundleID, appAppleID: fake.configuration.appAppleID,
            environments: [fake.configuration.environment], rootCertificates: [fake.pki.rootDER]))
}

/// The payload of a compact JWS as a JSON object, unverified.
func payload(of jws: String) -> [String: Any] {
    let parts = jws.split(separator: ".")
    guard parts.count == 3, let bytes = APIKey.decodeBase64URL(parts[1]) else { return [:] }
    return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
}

/// A tiny notification endpoint that keeps what it receives and answers with a chosen status.
final class NotificationReceiver: Sendable {
    /// What the endpoint's route shares with the test.
    final class State: Sendable {
        let received = Mutex<[String]>([])
        let status = Mutex<HTTPResponse.Status>(.ok)
    }

    let url: String
    private let state: State
    private let server: Task<Void, any Error>

    private init(url: String, state: State, server: Task<Void, any Error>) {
        self.url = url
        self.state = state
        self.server = server
    }

    /// The `signedPayload` of every POST received, in order.
    var signedPayloads: [String] { state.received.withLock { $0 } }

    /// `notificationType` of every POST received, in order.
    var types: [String] { signedPayloads.map { payload(of: $0)["notificationType"] as? String ?? "?" } }

    func answer(with status: HTTPResponse.Status) { state.status.withLock { $0 = status } }

    func stop() { server.cancel() }

    static func start() async throws -> NotificationReceiver {
        let state = State()
        let router = Router()
        router.post("/notifications/appstore") { request, _ -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 1 << 20)
            let json = (try? JSONSerialization.jsonObject(with: Data(Array(buffer: body)))) as? [String: Any]
            if let signed = json?["signedPayload"] as? String { state.received.withLock { $0.append(signed) } }
            return Response(status: state.status.withLock { $0 })
        }
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "receiver")
        logger.logLevel = .critical
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: logger)
        // Cancelled by `stop()`.
        let server = Task { try await application.run() }
        var iterator = ports.makeAsyncIterator()
        let port = await iterator.next() ?? 0
        return NotificationReceiver(
            url: "http://127.0.0.1:\(port)/notifications/appstore", state: state, server: server)
    }
}

/// `count` minutes; five are a month in Apple's Sandbox.
func minutes(_ count: Int64) -> Duration { .seconds(60 * count) }
