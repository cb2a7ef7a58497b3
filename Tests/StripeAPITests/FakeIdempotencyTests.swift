import StripeFake
import Testing

/// A POST repeated under one `Idempotency-Key` replays the first answer; different parameters are refused.
@Suite struct FakeIdempotencyTests {
    @Test func repeatedKeyReplaysTheFirstAnswerExactly() async throws {
        try await withFake { fake, client in
            let key = [("Idempotency-Key", "create-u1")]
            let form = [("email", "u1@example.com"), ("metadata[app_user_id]", "u1")]
            let first = try await client.post("/v1/customers", form, headers: key)
            let second = try await client.post("/v1/customers", form, headers: key)
            #expect(first.status == 200)
            #expect(second.status == 200)
            #expect(second.body == first.body)
            #expect(first.header("Idempotent-Replayed") == nil)
            #expect(second.header("Idempotent-Replayed") == "true")
            #expect(second.header("Original-Request") == first.header("Request-Id"))
            #expect(second.header("Request-Id") != first.header("Request-Id"))
            #expect(await fake.count(of: .customer) == 1)
            #expect(await fake.eventTypes() == ["customer.created"])

            let event = try #require(await fake.events().first)
            #expect(event[path: "request.idempotency_key"] == "create-u1")
            #expect(event[path: "request.id"] == .string(first.header("Request-Id") ?? ""))
        }
    }

    @Test func sameKeyWithOtherParametersIsAnIdempotencyError() async throws {
        try await withFake { fake, client in
            let key = [("Idempotency-Key", "k1")]
            _ = try await client.post("/v1/customers", [("email", "a@example.com")], headers: key)
            let conflict = try await client.post("/v1/customers", [("email", "b@example.com")], headers: key)
            #expect(conflict.status == 400)
            #expect(conflict.error?["type"] == "idempotency_error")
            #expect(await fake.count(of: .customer) == 1)

            // Keys belong to an account: the same key elsewhere is a new request.
            var connected = client
            connected.account = "acct_1Other"
            let elsewhere = try await connected.post("/v1/customers", [("email", "b@example.com")], headers: key)
            #expect(elsewhere.status == 200)
        }
    }

    @Test func failedRequestIsNotSavedUnderItsKey() async throws {
        try await withFake { fake, client in
            let key = [("Idempotency-Key", "retry-me")]
            let refused = try await client.post("/v1/subscriptions", [("customer", "cus_missing")], headers: key)
            #expect(refused.status == 400)
            let customer = await fake.createCustomer(email: "c@example.com")
            let catalog = try await FakeCatalog.make(in: fake)
            let form = [("customer", customer), ("items[0][price]", catalog.monthly)]
            let created = try await client.post("/v1/subscriptions", form, headers: [("Idempotency-Key", "retry-me-2")])
            #expect(created.status == 200)
        }
    }

    @Test func concurrentRequestsWithOneKeyExecuteOnce() async throws {
        try await withFake { fake, client in
            let answers = try await withThrowingTaskGroup(of: FakeAnswer.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await client.post(
                            "/v1/customers", [("email", "race@example.com")], headers: [("Idempotency-Key", "race")])
                    }
                }
                return try await group.reduce(into: [FakeAnswer]()) { $0.append($1) }
            }
            #expect(Set(answers.map(\.body)).count == 1)
            #expect(answers.filter { $0.header("Idempotent-Replayed") == nil }.count == 1)
            #expect(await fake.count(of: .customer) == 1)
        }
    }
}
