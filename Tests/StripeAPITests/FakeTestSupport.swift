import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StripeFake
import Testing

/// An answer from the fake over HTTP, its JSON body parsed.
struct FakeAnswer {
    let status: Int
    let headers: HTTPHeaders
    let body: [UInt8]

    var json: JSONValue { (try? JSONValue(parsing: body)) ?? .null }

    /// `error` of an error answer.
    var error: JSONValue? { json["error"] }

    func header(_ name: String) -> String? { headers.first(name: name) }

    /// The ids in `data` of a list answer, in order.
    var dataIDs: [String] { (json["data"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue } }
}

/// A plain HTTP client for the fake, so that its tests do not depend on billingd's StripeClient.
struct FakeClient {
    let baseURL: String
    var apiKey: String? = "sk_test_fake_0123456789"
    /// Sent as `Stripe-Account` when set.
    var account: String?

    func get(
        _ path: String, _ query: [(String, String)] = [], headers: [(String, String)] = []
    ) async throws -> FakeAnswer {
        try await send(.GET, path, query: query, headers: headers)
    }

    func post(
        _ path: String, _ form: [(String, String)] = [], headers: [(String, String)] = [],
        contentType: String? = "application/x-www-form-urlencoded"
    ) async throws -> FakeAnswer {
        try await send(.POST, path, body: Self.encode(form), contentType: contentType, headers: headers)
    }

    func delete(_ path: String, headers: [(String, String)] = []) async throws -> FakeAnswer {
        try await send(.DELETE, path, headers: headers)
    }

    func send(
        _ method: HTTPMethod, _ path: String, query: [(String, String)] = [], body: String? = nil,
        contentType: String? = nil, headers: [(String, String)] = []
    ) async throws -> FakeAnswer {
        var url = baseURL + path
        if !query.isEmpty { url += "?" + Self.encode(query) }
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let apiKey { request.headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
        if let account { request.headers.add(name: "Stripe-Account", value: account) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body, !body.isEmpty {
            if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 64 << 20)
        return FakeAnswer(status: Int(response.status.code), headers: response.headers, body: Array(buffer: bytes))
    }

    /// Form encoding as Stripe's libraries do it: brackets escaped, spaces as `%20`.
    static func encode(_ pairs: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return pairs.map { name, value in
            "\(name.addingPercentEncoding(withAllowedCharacters: allowed)!)=\(value.addingPercentEncoding(withAllowedCharacters: allowed)!)"
        }.joined(separator: "&")
    }
}

/// Runs `body` against a fresh fake, stopped afterwards.
func withFake(
    _ configuration: StripeFake.Configuration = .init(),
    _ body: (StripeFake, FakeClient) async throws -> Void
) async throws {
    let fake = try await StripeFake.start(configuration)
    do {
        try await body(fake, FakeClient(baseURL: fake.baseURL))
    } catch {
        await fake.stop()
        throw error
    }
    await fake.stop()
}

/// A product with a monthly and a yearly price, as billingd's plan catalog expects.
struct FakeCatalog {
    let product: String
    let monthly: String
    let yearly: String

    static func make(in fake: StripeFake, account: String? = nil) async throws -> FakeCatalog {
        let product = await fake.createProduct(name: "Pro", metadata: ["tier": "pro"], account: account)
        let monthly = try await fake.createPrice(
            product: product, unitAmount: 2000, interval: "month", lookupKey: "pro_monthly", account: account)
        let yearly = try await fake.createPrice(
            product: product, unitAmount: 20000, interval: "year", lookupKey: "pro_yearly", account: account)
        return FakeCatalog(product: product, monthly: monthly, yearly: yearly)
    }
}
