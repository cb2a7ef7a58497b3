import AsyncHTTPClient
import StripeFake
import Testing

/// Injected faults fire for the matching requests, the given number of times, and are observable.
@Suite struct FakeFaultTests {
    @Test func rateLimitWithRetryAfterFiresTheGivenNumberOfTimes() async throws {
        try await withFake { fake, client in
            await fake.inject(.status(429, retryAfter: 1), times: 2, matching: .path("/v1/customers"))
            let first = try await client.get("/v1/customers")
            let second = try await client.get("/v1/customers/cus_any")
            let third = try await client.get("/v1/customers")
            #expect(first.status == 429)
            #expect(first.header("Retry-After") == "1")
            #expect(first.error?["code"] == "rate_limit")
            #expect(first.header("Request-Id") != nil)
            #expect(second.status == 429)
            #expect(third.status == 200)

            let recorded = await fake.requests(matching: .path("/v1/customers"))
            #expect(recorded.map(\.fault) == ["status(429, retryAfter: 1)", "status(429, retryAfter: 1)", nil])
        }
    }

    @Test func serverErrorsSayWhetherToRetry() async throws {
        try await withFake { fake, client in
            await fake.inject(.status(500), matching: .path("/v1/invoices"))
            await fake.inject(.status(500, shouldRetry: false), matching: .path("/v1/invoices"))
            let retryable = try await client.get("/v1/invoices")
            #expect(retryable.status == 500)
            #expect(retryable.error?["type"] == "api_error")
            #expect(retryable.header("Stripe-Should-Retry") == nil)
            let final = try await client.get("/v1/invoices")
            #expect(final.status == 500)
            #expect(final.header("Stripe-Should-Retry") == "false")
            #expect(try await client.get("/v1/invoices").status == 200)
        }
    }

    @Test func faultsMatchByMethod() async throws {
        try await withFake { fake, client in
            await fake.inject(.status(503), matching: .path("/v1/customers", method: "POST"))
            let listed = try await client.get("/v1/customers")
            let created = try await client.post("/v1/customers", [("email", "a@example.com")])
            #expect(listed.status == 200)
            #expect(created.status == 503)
            #expect(await fake.count(of: .customer) == 0)
        }
    }

    @Test func delayHoldsTheAnswer() async throws {
        try await withFake { fake, client in
            await fake.inject(.delay(.milliseconds(400)), matching: .path("/v1/prices"))
            let started = ContinuousClock.now
            let answer = try await client.get("/v1/prices")
            #expect(answer.status == 200)
            #expect(ContinuousClock.now - started >= .milliseconds(400))
        }
    }

    @Test func droppedConnectionIsATransportError() async throws {
        try await withFake { fake, client in
            await fake.inject(.dropConnection, matching: .path("/v1/customers", method: "POST"))
            await #expect(throws: (any Error).self) {
                _ = try await client.post("/v1/customers", [("email", "lost@example.com")])
            }
            #expect(await fake.count(of: .customer) == 0)
            let kept = try await client.post("/v1/customers", [("email", "kept@example.com")])
            #expect(kept.status == 200)
            #expect(await fake.requests.first?.fault == "dropConnection")
        }
    }

    @Test func expiredKeyIsAnAuthenticationError() async throws {
        try await withFake { fake, client in
            await fake.inject(.expiredKey)
            let answer = try await client.get("/v1/events")
            #expect(answer.status == 401)
            #expect(answer.error?["code"] == "api_key_expired")
            #expect(answer.error?["message"] == "Expired API Key provided: sk_test_****6789")
            #expect(try await client.get("/v1/events").status == 200)
            #expect(await fake.requestCount() == 2)
            await fake.resetRequests()
            #expect(await fake.requests.isEmpty)
        }
    }
}
