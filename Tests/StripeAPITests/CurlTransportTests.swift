import APITransport
import Foundation
import Logging
import StripeAPI
import Testing

@Suite("CurlTransport against real sockets on 127.0.0.1")
struct CurlTransportTests {
    static let headers: [(name: String, value: String)] = [
        ("Authorization", "Bearer sk_test_probe"), ("Stripe-Version", "2025-03-31.basil"), ("Accept", "application/json"),
        ("User-Agent", "billingd/1 (+libcurl)"),
    ]

    @Test("GET, POST and DELETE round trip with their headers and body")
    func roundTrip() async throws {
        let probe = ProbeServer()
        let transport = CurlTransport(maxConnections: 2)
        try await probe.run { base in
            let get = try await transport.perform(HTTPTransportRequest(
                method: .get, url: "\(base)/echo?limit=3&expand%5B0%5D=data.items", headers: Self.headers
            ))
            #expect(get.status == 200)
            #expect(String(decoding: get.body, as: UTF8.self) == #"{"object":"echo","ok":true}"#)
            #expect(get.headers["content-type"] == "application/json")
            #expect(get.headers["request-id"] == "req_probe")
            #expect(get.headers.keys.allSatisfy { $0 == $0.lowercased() })

            let form = Array("email=a%40b.c&metadata%5Bapp_user_id%5D=u%201".utf8)
            let post = try await transport.perform(HTTPTransportRequest(
                method: .post, url: "\(base)/echo",
                headers: Self.headers + [("Content-Type", "application/x-www-form-urlencoded"), ("Idempotency-Key", "key-1")],
                body: form
            ))
            #expect(post.status == 200)
            let delete = try await transport.perform(HTTPTransportRequest(method: .delete, url: "\(base)/echo", headers: Self.headers))
            #expect(delete.status == 200)

            let seen = probe.seen
            try #require(seen.count == 3)
            #expect(seen.map(\.method) == ["GET", "POST", "DELETE"])
            #expect(seen[0].path == "/echo")
            #expect(seen[0].query == "limit=3&expand%5B0%5D=data.items")
            for request in seen {
                #expect(request.headers["authorization"] == "Bearer sk_test_probe")
                #expect(request.headers["stripe-version"] == "2025-03-31.basil")
                #expect(request.headers["accept"] == "application/json")
                #expect(request.headers["user-agent"] == "billingd/1 (+libcurl)")
                #expect(request.headers["accept-encoding"]?.contains("gzip") == true)
                #expect(request.headers["expect"] == nil)
            }
            #expect(seen[0].body.isEmpty)
            #expect(seen[1].body == form)
            #expect(seen[1].headers["content-type"] == "application/x-www-form-urlencoded")
            #expect(seen[1].headers["idempotency-key"] == "key-1")
            #expect(seen[2].body.isEmpty)
        }
    }

    @Test("StripeClient over CurlTransport sends a real form body and reads the answer")
    func clientEndToEnd() async throws {
        let probe = ProbeServer()
        try await probe.run { base in
            let client = StripeClient(
                configuration: StripeClientConfiguration(apiKey: "sk_test_e2e", baseURL: base + "/", apiVersion: "2025-03-31.basil"),
                transport: CurlTransport(maxConnections: 1)
            )
            let response = try await client.send(.post, "/echo", parameters: ["metadata": ["app_user_id": "u 1"]], account: "acct_9")
            #expect(response.status == 200)
            #expect(response.requestID == "req_probe")
            #expect(response.date != nil, "Hummingbird sends a Date header")
            let seen = try #require(probe.seen.first)
            #expect(String(decoding: seen.body, as: UTF8.self) == "metadata%5Bapp_user_id%5D=u%201")
            #expect(seen.headers["stripe-account"] == "acct_9")
            #expect(seen.headers["idempotency-key"] == response.idempotencyKey)
            #expect(seen.headers["authorization"] == "Bearer sk_test_e2e")
        }
    }

    @Test("Sequential requests reuse one kept-alive connection")
    func keepAlive() async throws {
        let probe = ProbeServer()
        let transport = CurlTransport(maxConnections: 4)
        try await probe.run { base in
            for _ in 0..<8 {
                let response = try await transport.perform(HTTPTransportRequest(method: .get, url: "\(base)/echo"))
                #expect(response.status == 200)
            }
            #expect(probe.seen.count == 8)
            #expect(probe.connections.count == 1, "8 requests over \(probe.connections.count) connections")
        }
    }

    @Test("20 concurrent requests through 4 connections all succeed, never more than 4 at once")
    func concurrency() async throws {
        let probe = ProbeServer()
        let transport = CurlTransport(maxConnections: 4)
        try await probe.run { base in
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await transport.perform(HTTPTransportRequest(method: .get, url: "\(base)/work")).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 20))
            #expect(probe.maxInFlight <= 4)
            #expect(probe.maxInFlight >= 2, "transfers do run in parallel")
            #expect(probe.connections.count <= 4)
        }
    }

    @Test("Transfers block dedicated threads, not Swift's cooperative pool; cancelling one stops it")
    func dedicatedThreadsAndCancellation() async throws {
        let probe = ProbeServer()
        let transport = CurlTransport(maxConnections: 6)
        try await probe.run { base in
            let transfers = (0..<6).map { _ in
                Task { () async throws(HTTPTransportError) -> HTTPTransportResponse in
                    try await transport.perform(HTTPTransportRequest(method: .get, url: "\(base)/slow", timeout: .seconds(30)))
                }
            }
            await eventually("6 slow transfers in flight") { probe.inFlight == 6 }
            // With 6 blocked transfers on a machine whose cooperative pool has fewer threads, this
            // work could not run if the transfers held cooperative threads.
            let sum = await Task.detached { (1...1000).reduce(0, +) }.value
            #expect(sum == 500_500)
            #expect(probe.inFlight == 6, "the transfers were still running")
            for transfer in transfers { transfer.cancel() }
            for transfer in transfers {
                let result = await transfer.result
                guard case .failure(let error as HTTPTransportError) = result, case .other(let message) = error else {
                    Issue.record("expected a cancelled transfer, got \(result)")
                    continue
                }
                #expect(message.contains("cancelled"))
            }
        }
    }

    @Test("A slow answer hits the total time limit: .timedOut")
    func timeout() async throws {
        let probe = ProbeServer()
        try await probe.run { base in
            let error = try await #require(throws: HTTPTransportError.self) {
                try await CurlTransport().perform(HTTPTransportRequest(method: .get, url: "\(base)/slow", timeout: .milliseconds(300)))
            }
            guard case .timedOut = error else {
                Issue.record("expected .timedOut, got \(error)")
                return
            }
            #expect(error.isRetryable)
        }
    }

    @Test("A port nobody listens on: .couldNotConnect")
    func refused() async throws {
        let closed = try RawSocketServer(listening: false)
        let error = try await #require(throws: HTTPTransportError.self) {
            try await CurlTransport().perform(HTTPTransportRequest(method: .get, url: "\(closed.baseURL)/v1/events"))
        }
        withExtendedLifetime(closed) {}
        guard case .couldNotConnect(let message) = error else {
            Issue.record("expected .couldNotConnect, got \(error)")
            return
        }
        #expect(message.contains("\(closed.port)"))
    }

    @Test("A connection closed without an answer: .connectionLost")
    func connectionLost() async throws {
        let server = try RawSocketServer()
        server.serve(connections: 1, reply: nil)
        let error = try await #require(throws: HTTPTransportError.self) {
            try await CurlTransport().perform(HTTPTransportRequest(method: .post, url: "\(server.baseURL)/v1/customers", body: Array("a=1".utf8)))
        }
        withExtendedLifetime(server) {}
        guard case .connectionLost = error else {
            Issue.record("expected .connectionLost, got \(error)")
            return
        }
    }

    @Test("Only the final response's headers are kept, names lowercased, repeats joined; gzip is decoded")
    func finalHeadersAndGzip() async throws {
        let server = try RawSocketServer()
        let head = "HTTP/1.1 100 Continue\r\nX-Interim: yes\r\n\r\n"
            + "HTTP/1.1 402 Payment Required\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            + "Request-Id: req_raw\r\nX-Dup: a\r\nx-dup: b\r\nContent-Length: \(gzippedJSON.count)\r\nConnection: close\r\n\r\n"
        server.serve(connections: 1, reply: Array(head.utf8) + gzippedJSON)
        let response = try await CurlTransport().perform(HTTPTransportRequest(method: .get, url: "\(server.baseURL)/v1/x"))
        withExtendedLifetime(server) {}
        #expect(response.status == 402)
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"compressed":true,"id":"cus_gz"}"#)
        #expect(response.headers["request-id"] == "req_raw")
        #expect(response.headers["x-dup"] == "a, b")
        #expect(response.headers["x-interim"] == nil)
        #expect(response.headers["content-type"] == "application/json")
    }

    @Test("A header value with a line break is refused before anything is sent")
    func headerInjection() async throws {
        let closed = try RawSocketServer(listening: false)
        let error = try await #require(throws: HTTPTransportError.self) {
            try await CurlTransport().perform(HTTPTransportRequest(
                method: .get, url: "\(closed.baseURL)/v1/x", headers: [("Stripe-Account", "acct_1\r\nX-Evil: 1")]
            ))
        }
        withExtendedLifetime(closed) {}
        guard case .other(let message) = error else {
            Issue.record("expected .other, got \(error)")
            return
        }
        #expect(message.contains("line break"))
        #expect(!message.contains("Evil"))
    }
}
