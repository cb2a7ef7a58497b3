import APITransport
import Foundation
import Logging
import StripeAPI
import Testing

@Suite("StripeClient: wire, retries and errors")
struct StripeClientTests {
    typealias Fixture = ClientFixture

    @Test("Every request carries the key, the pinned version, Accept and the User-Agent; GET parameters go in the query")
    func headersOnEveryRequest() async throws {
        let transport = ScriptedTransport([.json(), .json(), .json()])
        let client = Fixture.client(transport)
        _ = try await client.send(.get, "/v1/customers/cus_1", parameters: ["expand": ["default_source"]])
        _ = try await client.send(.post, "v1/customers", parameters: ["email": "a@b.c"], account: "acct_42")
        _ = try await client.send(.delete, "/v1/customers/cus_1?x=1", parameters: ["y": 2])

        let requests = transport.requests
        try #require(requests.count == 3)
        for request in requests {
            #expect(request.header("Authorization") == "Bearer \(Fixture.apiKey)")
            #expect(request.header("Stripe-Version") == Fixture.apiVersion)
            #expect(request.header("Accept") == "application/json")
            #expect(request.header("User-Agent") == "billingd/1 (+libcurl)")
            #expect(request.connectTimeout == .seconds(10))
            #expect(request.timeout == .seconds(80))
        }
        #expect(requests[0].method == .get)
        #expect(requests[0].url == "https://api.stripe.test/v1/customers/cus_1?expand%5B0%5D=default_source")
        #expect(requests[0].body.isEmpty)
        #expect(requests[0].header("Idempotency-Key") == nil)
        #expect(requests[0].header("Stripe-Account") == nil)
        #expect(requests[0].header("Content-Type") == nil)

        #expect(requests[1].method == .post)
        #expect(requests[1].url == "https://api.stripe.test/v1/customers")
        #expect(String(decoding: requests[1].body, as: UTF8.self) == "email=a%40b.c")
        #expect(requests[1].header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(requests[1].header("Stripe-Account") == "acct_42")

        #expect(requests[2].method == .delete)
        #expect(requests[2].url == "https://api.stripe.test/v1/customers/cus_1?x=1&y=2")
        #expect(requests[2].header("Idempotency-Key") == nil)
    }

    @Test("A base URL without a trailing slash gives the same URLs")
    func baseURLWithoutSlash() async throws {
        let transport = ScriptedTransport([.json()])
        let client = Fixture.client(transport, configuration: Fixture.configuration(baseURL: "http://127.0.0.1:12111"))
        _ = try await client.send(.get, "/v1/events")
        #expect(transport.requests.first?.url == "http://127.0.0.1:12111/v1/events")
    }

    @Test("Every POST has an Idempotency-Key, and all retries of one call send the same one")
    func idempotencyKeyReusedAcrossRetries() async throws {
        let transport = ScriptedTransport([
            .stripeError(500, requestID: "req_1"), .failure(.connectionLost("reset")), .json(requestID: "req_3"),
            .json(), .json(),
        ])
        let client = Fixture.client(transport)
        let response = try await client.send(.post, "/v1/customers", parameters: ["name": "Ada"])
        let requests = transport.requests
        try #require(requests.count == 3)
        let key = try #require(requests[0].header("Idempotency-Key"))
        #expect(UUID(uuidString: key) != nil, "a generated key is a UUID")
        #expect(requests.allSatisfy { $0.header("Idempotency-Key") == key })
        #expect(requests.allSatisfy { $0.body == requests[0].body })
        #expect(response.idempotencyKey == key)
        #expect(response.requestID == "req_3")

        _ = try await client.send(.post, "/v1/customers", parameters: ["name": "Bob"])
        #expect(transport.requests[3].header("Idempotency-Key") != key, "each call gets its own key")

        _ = try await client.send(.post, "/v1/customers", idempotencyKey: "billingd-create-u1")
        #expect(transport.requests[4].header("Idempotency-Key") == "billingd-create-u1")
    }

    @Test("429 with Retry-After waits exactly that long, capped at maxRetryDelay")
    func retryAfterHonoured() async throws {
        let transport = ScriptedTransport([
            .stripeError(429, type: "invalid_request_error", code: "rate_limit", headers: ["Retry-After": "7"]),
            .stripeError(429, type: "invalid_request_error", code: "rate_limit", headers: ["Retry-After": "120"]),
            .json(),
        ])
        let sleeper = SleepRecorder()
        let observer = RecordingObserver()
        let client = Fixture.client(transport, sleeper: sleeper, observer: observer)
        _ = try await client.send(.get, "/v1/customers")
        #expect(sleeper.delays == [.seconds(7), .seconds(30)])
        #expect(observer.retries.map(\.delay) == [.seconds(7), .seconds(30)])
        #expect(observer.retries.first?.reason.contains("429") == true)
    }

    @Test("5xx is retried with exponential backoff and full jitter, then succeeds")
    func serverErrorsRetried() async throws {
        let transport = ScriptedTransport([.stripeError(503), .stripeError(502), .stripeError(500), .json(#"{"id":"cus_1"}"#)])
        let sleeper = SleepRecorder()
        let observer = RecordingObserver()
        let client = Fixture.client(transport, sleeper: sleeper, observer: observer)
        let response = try await client.send(.get, "/v1/customers/cus_1")
        #expect(response.status == 200)
        #expect(transport.requests.count == 4)
        // jitter source fixed at 0.5: half of 0.5 s, 1 s, 2 s
        #expect(sleeper.delays == [.milliseconds(250), .milliseconds(500), .seconds(1)])
        #expect(observer.attempts.map(\.status) == [503, 502, 500, 200])
        #expect(observer.attempts.map(\.attempt) == [1, 2, 3, 4])
    }

    @Test("The backoff ceiling stops growing at maxRetryDelay")
    func backoffCapped() async throws {
        let transport = ScriptedTransport(Array(repeating: .stripeError(500), count: 8) + [.json()])
        let sleeper = SleepRecorder()
        let client = StripeClient(
            configuration: StripeClientConfiguration(
                apiKey: Fixture.apiKey, apiVersion: Fixture.apiVersion, maxRetries: 8, requestsPerSecond: 1e6,
                maxRetryDelay: .seconds(3)
            ),
            transport: transport, sleep: { try await sleeper.sleep($0) }, random: { 0.999_999 }
        )
        _ = try await client.send(.get, "/v1/events")
        #expect(sleeper.delays.count == 8)
        #expect(sleeper.delays.allSatisfy { $0 <= .seconds(3) })
        #expect(sleeper.delays.suffix(5).allSatisfy { $0 > .milliseconds(2990) })
    }

    @Test("Stripe-Should-Retry: false is final even for 500 and 429", arguments: [500, 429])
    func shouldRetryFalse(status: Int) async throws {
        let transport = ScriptedTransport([.stripeError(status, headers: ["Stripe-Should-Retry": "false"])])
        let client = Fixture.client(transport)
        let error = try await #require(throws: StripeError.self) { try await client.send(.post, "/v1/invoices/in_1/pay") }
        #expect(transport.requests.count == 1)
        #expect(error.attempts == 1)
        #expect(error.status == status)
        #expect(!error.isRetryable)
    }

    @Test("Stripe-Should-Retry: true retries even a 409")
    func shouldRetryTrueOn409() async throws {
        let transport = ScriptedTransport([
            .stripeError(409, type: "invalid_request_error", headers: ["Stripe-Should-Retry": "true"]), .json(),
        ])
        let client = Fixture.client(transport)
        _ = try await client.send(.post, "/v1/subscriptions/sub_1")
        #expect(transport.requests.count == 2)
    }

    @Test("409 lock and idempotency conflicts are retried; other 409s are not")
    func conflicts() async throws {
        let transport = ScriptedTransport([
            .stripeError(409, type: "invalid_request_error", code: "lock_timeout"),
            .stripeError(409, type: "idempotency_error", code: "idempotency_key_in_use"),
            .json(),
            .stripeError(409, type: "invalid_request_error", code: "resource_already_exists", requestID: "req_409"),
        ])
        let client = Fixture.client(transport)
        _ = try await client.send(.post, "/v1/customers/cus_1")
        #expect(transport.requests.count == 3)
        let error = try await #require(throws: StripeError.self) { try await client.send(.post, "/v1/customers") }
        #expect(transport.requests.count == 4)
        #expect(error.kind == .invalidRequest)
        #expect(error.code == "resource_already_exists")
        #expect(error.attempts == 1)
    }

    @Test("4xx answers are final and typed from Stripe's error body", arguments: [
        (400, "invalid_request_error", "parameter_unknown", StripeError.Kind.invalidRequest),
        (401, "invalid_request_error", nil, .authentication),
        (402, "card_error", "card_declined", .api),
        (403, "invalid_request_error", "secret_key_required", .permission),
        (404, "invalid_request_error", "resource_missing", .notFound),
        (400, "idempotency_error", nil, .idempotency),
    ] as [(Int, String, String?, StripeError.Kind)])
    func clientErrorsTyped(status: Int, type: String, code: String?, kind: StripeError.Kind) async throws {
        let transport = ScriptedTransport([
            .stripeError(status, type: type, code: code, message: "No such thing: 'x'", param: "customer", requestID: "req_4xx\(status)")
        ])
        let client = Fixture.client(transport)
        let error = try await #require(throws: StripeError.self) {
            try await client.send(.get, "/v1/customers/cus_404?expand[]=x")
        }
        #expect(transport.requests.count == 1)
        #expect(error.kind == kind)
        #expect(error.status == status)
        #expect(error.type == type)
        #expect(error.code == code)
        #expect(error.param == "customer")
        #expect(error.message == "No such thing: 'x'")
        #expect(error.requestID == "req_4xx\(status)")
        #expect(error.method == .get)
        #expect(error.path == "/v1/customers/cus_404")
        #expect(error.attempts == 1)
        #expect(!error.isRetryable)
        #expect(error.description.hasSuffix("(request req_4xx\(status))"))
        #expect(error.description.contains("No such thing"))
        #expect(error.description.contains("HTTP \(status)"))
    }

    @Test("A card error's decline code is kept and shown")
    func declineCode() async throws {
        let body = #"{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}}"#
        let transport = ScriptedTransport([.json(body, status: 402, requestID: "req_card")])
        let error = try await #require(throws: StripeError.self) {
            try await Fixture.client(transport).send(.post, "/v1/payment_intents/pi_1/confirm")
        }
        #expect(error.declineCode == "insufficient_funds")
        #expect(error.description.contains("decline: insufficient_funds"))
    }

    @Test("Transport timeouts, refused connects and dropped connections are retried; TLS failures are not")
    func transportFailures() async throws {
        let transport = ScriptedTransport([
            .failure(.timedOut("Operation timed out after 80000 milliseconds")), .failure(.couldNotConnect("refused")),
            .failure(.connectionLost("Empty reply from server")), .json(),
            .failure(.tls("SSL certificate problem: unable to get local issuer certificate")),
        ])
        let client = Fixture.client(transport)
        _ = try await client.send(.get, "/v1/events")
        #expect(transport.requests.count == 4)
        let error = try await #require(throws: StripeError.self) { try await client.send(.get, "/v1/events") }
        #expect(transport.requests.count == 5)
        #expect(error.kind == .transport)
        #expect(error.status == nil)
        #expect(error.message.contains("SSL certificate problem"))
    }

    @Test("When retries run out the last answer's details are thrown with the attempt count")
    func retriesExhausted() async throws {
        let transport = ScriptedTransport([
            .stripeError(500, message: "first", requestID: "req_a"), .stripeError(503, message: "second", requestID: "req_b"),
            .stripeError(502, message: "third", requestID: "req_c"),
        ])
        let sleeper = SleepRecorder()
        let client = Fixture.client(transport, maxRetries: 2, sleeper: sleeper)
        let error = try await #require(throws: StripeError.self) { try await client.send(.post, "/v1/customers") }
        #expect(transport.requests.count == 3)
        #expect(sleeper.delays.count == 2)
        #expect(error.kind == .server)
        #expect(error.attempts == 3)
        #expect(error.status == 502)
        #expect(error.message == "third")
        #expect(error.requestID == "req_c")
        #expect(error.isRetryable, "a server error may work later")
        #expect(error.description.contains("after 3 attempts"))
        #expect(error.description.hasSuffix("(request req_c)"))

        let timeouts = ScriptedTransport(Array(repeating: .failure(.timedOut("slow")), count: 5))
        let timeoutError = try await #require(throws: StripeError.self) {
            try await Fixture.client(timeouts).send(.get, "/v1/events")
        }
        #expect(timeoutError.kind == .transport)
        #expect(timeoutError.attempts == 5)
        #expect(timeouts.requests.count == 5)
    }

    @Test("An error body that is not JSON still gives a readable one-line message")
    func nonJSONErrorBody() async throws {
        let html = "<html>\r\n<head><title>502 Bad Gateway</title></head>\n\t<body>" + String(repeating: "x", count: 400) + "</body></html>"
        let transport = ScriptedTransport([
            .response(HTTPTransportResponse(status: 502, headers: ["Request-Id": "req_html"], body: Array(html.utf8))),
            .response(HTTPTransportResponse(status: 500, body: [])),
        ])
        let client = Fixture.client(transport, maxRetries: 0)
        let error = try await #require(throws: StripeError.self) { try await client.send(.get, "/v1/events") }
        #expect(error.kind == .server)
        #expect(error.message.hasPrefix("HTTP 502"))
        #expect(error.message.contains("<html> <head><title>502 Bad Gateway</title></head> <body>xxx"))
        #expect(!error.message.contains("\n") && !error.message.contains("\r") && !error.message.contains("\t"))
        #expect(error.message.count < 320)
        #expect(error.description.hasSuffix("(request req_html)"))

        let empty = try await #require(throws: StripeError.self) { try await client.send(.get, "/v1/events") }
        #expect(empty.message == "HTTP 500 with an empty body")
        #expect(!empty.description.contains("(request"))
    }

    @Test("The API key appears in no error description and in no log line, even when echoed back")
    func keyNeverLeaks() async throws {
        let lines = CapturingLogHandler.Lines()
        let logger = Logger(label: "billingd.stripe.test") { _ in CapturingLogHandler(lines: lines) }
        let transport = ScriptedTransport([
            .stripeError(401, type: "invalid_request_error", message: "Invalid API Key provided: \(Fixture.apiKey)", requestID: "req_401"),
            .failure(.other("proxy said no to Authorization: Bearer \(Fixture.apiKey)")),
            .failure(.timedOut("waited for \(Fixture.apiKey)")), .stripeError(500, message: "echo \(Fixture.apiKey) and sk_test_OtherKey123"),
        ])
        let client = Fixture.client(transport, maxRetries: 1, logger: logger)
        var errors: [StripeError] = []
        for _ in 0..<3 {
            do {
                _ = try await client.send(.post, "/v1/customers", parameters: ["description": "x"])
            } catch {
                errors.append(error)
            }
        }
        #expect(errors.map(\.kind) == [.authentication, .transport, .server])
        for error in errors {
            #expect(!error.description.contains(Fixture.apiKey))
            #expect(!error.message.contains(Fixture.apiKey))
            #expect(!"\(error)".contains("Bearer sk_"))
            #expect(!"\(error)".contains("sk_test_"))
        }
        #expect(errors[0].description.contains("[redacted key]"))
        #expect(lines.all.count >= 5, "one debug line per attempt and one per retry")
        for line in lines.all {
            #expect(!line.contains(Fixture.apiKey))
            #expect(!line.contains("Bearer sk_"))
            #expect(!line.contains("sk_test_"))
        }
    }

    @Test("One debug line per attempt with method, route template, status, duration and request id")
    func logLinePerAttempt() async throws {
        let lines = CapturingLogHandler.Lines()
        let logger = Logger(label: "billingd.stripe.test") { _ in CapturingLogHandler(lines: lines) }
        let transport = ScriptedTransport([.json(requestID: "req_line")])
        _ = try await Fixture.client(transport, logger: logger).send(.get, "/v1/customers/cus_N2xQ7/payment_methods", parameters: ["email": "private@example.com"])
        let requestLines = lines.all.filter { $0.contains("stripe request") }
        try #require(requestLines.count == 1)
        let line = requestLines[0]
        #expect(line.hasPrefix("debug"))
        #expect(line.contains("stripe.method=GET"))
        #expect(line.contains("stripe.route=/v1/customers/{id}/payment_methods"))
        #expect(line.contains("stripe.status=200"))
        #expect(line.contains("stripe.request_id=req_line"))
        #expect(line.contains("stripe.duration_ms="))
        #expect(!line.contains("private"), "the query is never logged")
    }

    @Test("The observer sees each attempt under a route template", arguments: [
        ("/v1/customers/cus_N2xQ7ab9/payment_methods", "/v1/customers/{id}/payment_methods"),
        ("/v1/customers/cus_abc", "/v1/customers/{id}"),
        ("/v1/events", "/v1/events"),
        ("/v1/events?limit=3", "/v1/events"),
        ("/v1/customers/search", "/v1/customers/search"),
        ("/v1/checkout/sessions/cs_test_a1B2/line_items", "/v1/checkout/sessions/{id}/line_items"),
        ("/v1/subscription_items/si_Q1/usage_records", "/v1/subscription_items/{id}/usage_records"),
        ("/v1/billing_portal/sessions", "/v1/billing_portal/sessions"),
        ("/v1/invoices/upcoming", "/v1/invoices/upcoming"),
        ("/v1/entitlements/active_entitlements", "/v1/entitlements/active_entitlements"),
    ])
    func routeTemplates(path: String, route: String) async throws {
        let observer = RecordingObserver()
        _ = try await Fixture.client(ScriptedTransport([.json()]), observer: observer).send(.get, path)
        #expect(observer.attempts == [.init(method: .get, route: route, status: 200, attempt: 1)])
    }

    @Test("The answer's Date header is read as Unix seconds, Stripe's clock", arguments: [
        ("Wed, 21 Oct 2015 07:28:00 GMT", Int64?.some(1_445_412_480)),
        ("Thu, 29 Feb 2024 23:59:59 GMT", 1_709_251_199),
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
        ("Wednesday, 21-Oct-15 07:28:00 GMT", nil),
        ("yesterday", nil),
        ("Wed, 32 Oct 2015 07:28:00 GMT", nil),
    ])
    func dateHeader(header: String, expected: Int64?) async throws {
        let transport = ScriptedTransport([.json(headers: ["Date": header])])
        let response = try await Fixture.client(transport).send(.get, "/v1/events")
        #expect(response.date == expected)
    }

    @Test("decode gives the typed object, or a .decoding error naming the member")
    func decode() async throws {
        struct Customer: Decodable { let id: String; let email: String? }
        let transport = ScriptedTransport([.json(#"{"id":"cus_1","email":"a@b.c"}"#), .json(#"{"email":"a@b.c"}"#, requestID: "req_bad")])
        let client = Fixture.client(transport)
        let customer = try await client.send(.get, "/v1/customers/cus_1").decode(Customer.self)
        #expect(customer.id == "cus_1")
        let response = try await client.send(.get, "/v1/customers/cus_2")
        let error = try #require(throws: StripeError.self) { try response.decode(Customer.self) }
        #expect(error.kind == .decoding)
        #expect(error.message.contains("id"))
        #expect(error.description.hasSuffix("(request req_bad)"))
    }

    @Test("Cancelling the calling task stops the wait between attempts and throws .cancelled")
    func cancellationDuringBackoff() async throws {
        let transport = ScriptedTransport([.stripeError(500)])
        // Every wait between attempts lasts an hour unless cancelled, so a loaded machine that
        // notices the first attempt late cannot see the retries run out first.
        let client = StripeClient(
            configuration: Fixture.configuration(), transport: transport, sleep: { _ in try await Task.sleep(for: .seconds(3600)) },
            random: { 1 }
        )
        let task = Task { () async throws(StripeError) -> StripeResponse in try await client.send(.get, "/v1/events") }
        await eventually("the first attempt") { transport.requests.count == 1 }
        task.cancel()
        let result = await task.result
        guard case .failure(let error as StripeError) = result else {
            Issue.record("expected .cancelled, got \(result)")
            return
        }
        #expect(error.kind == .cancelled)
        #expect(error.attempts == 1)
        #expect(transport.requests.count == 1)
    }

    @Test("Configuration defaults follow the key's mode")
    func configurationDefaults() {
        let test = StripeClientConfiguration(apiKey: "sk_test_x", apiVersion: "v")
        #expect(!test.isLiveKey)
        #expect(test.requestsPerSecond == 25)
        #expect(test.maxRetries == 4)
        #expect(test.connectTimeout == .seconds(10))
        #expect(test.requestTimeout == .seconds(80))
        #expect(test.maxRetryDelay == .seconds(30))
        #expect(test.baseURL == "https://api.stripe.com")
        let live = StripeClientConfiguration(apiKey: "rk_live_x", apiVersion: "v")
        #expect(live.isLiveKey)
        #expect(live.requestsPerSecond == 100)
        #expect(StripeClientConfiguration(apiKey: "sk_live_x", apiVersion: "v", requestsPerSecond: 7).requestsPerSecond == 7)
    }
}
