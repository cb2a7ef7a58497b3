import APITransport
import Foundation
import StripeAPI
import StripeFake
import Testing

/// The whole path — StripeClient, CurlTransport, libcurl, sockets — against the stateful fake.
@Suite("StripeClient against StripeFake over libcurl")
struct StripeClientFakeTests {
    struct Customer: Decodable {
        let id: String
        let email: String?
        let metadata: [String: String]
    }

    static func client(_ fake: StripeFake, sleeper: SleepRecorder = SleepRecorder()) -> StripeClient {
        StripeClient(
            configuration: StripeClientConfiguration(
                apiKey: fake.configuration.apiKey, baseURL: fake.baseURL, apiVersion: "2025-03-31.basil",
                requestTimeout: .seconds(120), requestsPerSecond: 1_000_000
            ),
            transport: CurlTransport(maxConnections: 4), sleep: { try await sleeper.sleep($0) }, random: { 0.5 }
        )
    }

    static func withFake(_ body: (StripeFake) async throws -> Void) async throws {
        let fake = try await StripeFake.start()
        do {
            try await body(fake)
        } catch {
            await fake.stop()
            throw error
        }
        await fake.stop()
    }

    @Test("Customers created with nested form parameters read back, and list across pages")
    func createFetchList() async throws {
        try await Self.withFake { fake in
            let client = Self.client(fake)
            var created: [String] = []
            for index in 1...5 {
                let response = try await client.send(
                    .post, "/v1/customers",
                    parameters: ["email": "u\(index)+tag@example.com", "metadata": ["app_user_id": "u \(index)"]]
                )
                created.append(try response.decode(Customer.self).id)
            }
            let fetched = try await client.send(.get, "/v1/customers/\(created[2])").decode(Customer.self)
            #expect(fetched.email == "u3+tag@example.com")
            #expect(fetched.metadata == ["app_user_id": "u 3"])

            var pages: [StripeListPage] = []
            for try await page in client.list("/v1/customers", parameters: ["limit": 2]) { pages.append(page) }
            #expect(pages.map(\.objects.count) == [2, 2, 1])
            #expect(pages.map(\.hasMore) == [true, true, false])
            #expect(Set(pages.flatMap { $0.objects.map(\.id) }) == Set(created))
            let decoded = try pages[0].objects[0].decode(Customer.self)
            #expect(decoded.id == pages[0].objects[0].id)
            let listRequests = await fake.requests(matching: .path("/v1/customers", method: "GET")).filter { $0.path == "/v1/customers" }
            #expect(listRequests.count == 3)
            #expect(listRequests.dropFirst().allSatisfy { $0.query?.contains("starting_after=") == true })
        }
    }

    @Test("A 429 with Retry-After and a dropped connection are retried under one idempotency key")
    func retriesAgainstFaults() async throws {
        try await Self.withFake { fake in
            let sleeper = SleepRecorder()
            let client = Self.client(fake, sleeper: sleeper)
            await fake.inject(.status(429, retryAfter: 2), times: 1, matching: .path("/v1/customers", method: "POST"))
            await fake.inject(.dropConnection, times: 1, matching: .path("/v1/customers", method: "POST"))
            let response = try await client.send(.post, "/v1/customers", parameters: ["email": "retry@example.com"])
            #expect(response.status == 200)
            #expect(sleeper.delays.first == .seconds(2))
            // A connection dropped after reuse is retried by libcurl itself on a fresh connection
            // (same bytes, same key); a fresh one that drops is retried by the client. Either way
            // the fake sees three POSTs.
            #expect((1...2).contains(sleeper.delays.count))
            let posts = await fake.requests(matching: .path("/v1/customers", method: "POST"))
            #expect(posts.count == 3)
            #expect(Set(posts.compactMap(\.idempotencyKey)) == [response.idempotencyKey])
            #expect(posts.allSatisfy { $0.stripeVersion == "2025-03-31.basil" })
            #expect(await fake.count(of: .customer) == 1)
        }
    }

    @Test("A rolled key is an authentication error that names the request")
    func expiredKey() async throws {
        try await Self.withFake { fake in
            await fake.inject(.expiredKey)
            let error = try await #require(throws: StripeError.self) {
                try await Self.client(fake).send(.get, "/v1/customers")
            }
            #expect(error.kind == .authentication)
            #expect(error.code == "api_key_expired")
            #expect(error.attempts == 1)
            let requestID = try #require(error.requestID)
            #expect(error.description.hasSuffix("(request \(requestID))"))
            #expect(!error.description.contains(fake.configuration.apiKey))
        }
    }

    @Test("A missing object is .notFound with Stripe's code and param")
    func notFound() async throws {
        try await Self.withFake { fake in
            let error = try await #require(throws: StripeError.self) {
                try await Self.client(fake).send(.get, "/v1/customers/cus_DoesNotExist1")
            }
            #expect(error.kind == .notFound)
            #expect(error.code == "resource_missing")
            #expect(error.requestID != nil)
        }
    }
}
