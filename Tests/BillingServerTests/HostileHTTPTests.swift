import BillingCore
import BillingServer
import BillingStore
import BillingTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import StripeAPI
import Testing

/// A live billingd server on loopback (the real HTTP pipeline, not the router alone) for bytes
/// no HTTP client would send. The service API is on, with a Stripe client that is never reached.
struct LiveServer {
    static let token = "tok_hostile_0123456789abcdef"

    /// Runs `body` with the port of a server over a fresh ledger.
    static func run(
        limits: ConnectionLimits = .init(), logger: Logger? = nil,
        configure: (inout BillingServerDependencies) -> Void = { _ in },
        _ body: @Sendable (_ port: Int, _ ledger: TemporaryLedger) async throws -> Void
    ) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [token]
        var stripeLogger = Logger(label: "test.stripe")
        stripeLogger.logLevel = .critical
        dependencies.stripe = StripeClient(
            configuration: .init(apiKey: "sk_test_unreached_0123", baseURL: "http://127.0.0.1:1", apiVersion: StripeAPIVersion.pinned, maxRetries: 0),
            logger: stripeLogger)
        configure(&dependencies)
        var quiet = Logger(label: "test")
        quiet.logLevel = .critical
        let app = BillingApplication.application(dependencies, host: "127.0.0.1", port: 0, limits: limits, logger: logger ?? quiet)
        try await app.test(.live) { client in
            try await body(try #require(client.port), ledger)
        }
    }
}

/// The bytes of a request: a request line, header lines and a raw body, CRLF-joined.
func rawRequest(_ requestLine: String, _ headers: [String], body: String = "") -> [UInt8] {
    Array(([requestLine] + headers).joined(separator: "\r\n").utf8) + Array("\r\n\r\n\(body)".utf8)
}

@Suite("Hostile HTTP: framing the parser refuses, HEAD, media types, HTTP/1.0 (issue 18 items 1 and 10)")
struct HostileHTTPTests {
    /// Bodies whose framing is not HTTP, with the Transfer-Encoding they are sent under.
    static let brokenFramings: [(name: String, encoding: String, body: String)] = [
        ("a chunk size that is not hex", "chunked", "zz\r\nabc\r\n0\r\n\r\n"),
        ("a chunk size past 64 bits", "chunked", "ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
        ("a chunk shorter than its size", "chunked", "5\r\nabc\r\n0\r\n\r\n"),
        ("Transfer-Encoding: gzip", "gzip", "abc"),
    ]

    @Test(
        "Broken chunked framing or an unknown Transfer-Encoding is a JSON 400 malformed_request, on the webhook and on checkout, never a 500 or 413",
        arguments: 0..<4)
    func brokenFraming(index: Int) async throws {
        let framing = Self.brokenFramings[index]
        try await LiveServer.run { port, _ in
            let requests = [
                rawRequest(
                    "POST /webhooks/stripe HTTP/1.1",
                    ["Host: x", "Content-Type: application/json", "Stripe-Signature: t=1,v1=00", "Transfer-Encoding: \(framing.encoding)"],
                    body: framing.body),
                rawRequest(
                    "POST /v1/checkout-sessions HTTP/1.1",
                    ["Host: x", "Content-Type: application/json", "Authorization: Bearer \(LiveServer.token)", "Transfer-Encoding: \(framing.encoding)"],
                    body: framing.body),
            ]
            for request in requests {
                let (bytes, closed) = try await RawConnection.exchange(port: port, request)
                let response = try #require(RawHTTPResponse(bytes), "\(framing.name): no response")
                #expect(response.status == 400, "\(framing.name): \(String(decoding: bytes, as: UTF8.self))")
                #expect(response.headers["content-type"] == "application/json", "\(framing.name)")
                #expect(response.errorCode == "malformed_request", "\(framing.name): \(String(decoding: bytes, as: UTF8.self))")
                #expect(closed, "\(framing.name): the connection is closed after the answer")
            }
        }
    }

    @Test("A request answered before its body is read gets that one answer, even when the rest of its body turns out malformed")
    func oneAnswerPerRequest() async throws {
        try await LiveServer.run { port, _ in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            // No token: refused before the body is read.
            try await connection.send(
                "POST /v1/checkout-sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            #expect(await connection.readResponse(timeout: .seconds(10))?.status == 401)
            try await connection.send("zz\r\n")
            let (rest, closed) = await connection.readUntilClosed(timeout: .seconds(10))
            #expect(rest.isEmpty, "a second answer: \(String(decoding: rest, as: UTF8.self))")
            #expect(closed)
        }
    }

    @Test("A connection the server closes is closed for the client even while a test's child process runs (CI's hostile-HTTP failures)")
    func childProcessHoldsNoServerSocket() async throws {
        try await LiveServer.run { port, _ in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            // Answered on a kept-alive connection: the server has accepted it.
            try await connection.send(rawRequest("GET /healthz HTTP/1.1", ["Host: x"]))
            #expect(await connection.readResponse(timeout: .seconds(10))?.status == 200)
            // A child started now would hold the server's end of the connection, had it inherited it.
            let child = try ChildProcess.start("/bin/sleep", ["60"], environment: [:])
            defer {
                child.signal(SIGKILL)
                child.waitBlocking()
            }
            try await connection.send(rawRequest("POST /webhooks/stripe HTTP/1.1", ["Host: x", "Transfer-Encoding: chunked"], body: "zz\r\n"))
            let (bytes, closed) = await connection.readUntilClosed(timeout: .seconds(10))
            #expect(RawHTTPResponse(bytes)?.status == 400)
            #expect(closed, "the server's close reached the client while the child runs")
            #expect(child.isRunning)
        }
    }

    /// Request heads the HTTP parser refuses before any route runs.
    static let refusedHeads: [(name: String, request: [UInt8])] = [
        ("oversized headers", rawRequest("GET /healthz HTTP/1.1", ["Host: x", "X-Big: " + String(repeating: "a", count: 90_000)])),
        ("a NUL in a header value", rawRequest("GET /healthz HTTP/1.1", ["Host: x", "X-Nul: a\u{0}b"])),
        (
            "Content-Length beside Transfer-Encoding",
            rawRequest("POST /webhooks/stripe HTTP/1.1", ["Host: x", "Content-Length: 3", "Transfer-Encoding: chunked"], body: "3\r\nabc\r\n0\r\n\r\n")
        ),
    ]

    @Test("The HTTP parser's refusals (oversized headers, NUL in a header, Content-Length with Transfer-Encoding) are 400 with a JSON body", arguments: 0..<3)
    func parserRefusalsAreJSON(index: Int) async throws {
        let refused = Self.refusedHeads[index]
        try await LiveServer.run { port, _ in
            let (bytes, closed) = try await RawConnection.exchange(port: port, refused.request)
            let response = try #require(RawHTTPResponse(bytes), "\(refused.name): no response")
            #expect(response.status == 400, "\(refused.name)")
            #expect(response.headers["content-type"] == "application/json", "\(refused.name)")
            #expect(response.errorCode == "malformed_request", "\(refused.name): \(String(decoding: bytes, as: UTF8.self))")
            #expect(closed, "\(refused.name)")
        }
    }

    @Test("HEAD /healthz and HEAD /readyz answer 200 with the headers of GET and no body")
    func headOfHealth() async throws {
        try await LiveServer.run { port, _ in
            for path in ["/healthz", "/readyz"] {
                let connection = try await RawConnection.open(port: port)
                defer { connection.close() }
                try await connection.send(rawRequest("HEAD \(path) HTTP/1.1", ["Host: x"]))
                let response = try #require(await connection.readResponse(timeout: .seconds(10), head: true), "HEAD \(path)")
                #expect(response.status == 200, "HEAD \(path)")
                #expect(response.headers["content-type"] == "application/json", "HEAD \(path)")
                // Nothing follows the head: the same connection answers the next request at once.
                try await connection.send(rawRequest("GET \(path) HTTP/1.1", ["Host: x", "Connection: close"]))
                let (rest, _) = await connection.readUntilClosed(timeout: .seconds(10))
                #expect(String(decoding: rest, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "HEAD \(path) sent no body")
            }
        }
    }

    @Test("A checkout body without Content-Type is 415 unsupported_media_type, as the README says; cancel without a body needs none")
    func missingContentType() async throws {
        try await LiveServer.run { port, _ in
            let body = #"{"user":"user_1","plan":"pro","interval":"month","success_url":"https://a.example/ok","cancel_url":"https://a.example/no"}"#
            let (bytes, _) = try await RawConnection.exchange(
                port: port,
                rawRequest(
                    "POST /v1/checkout-sessions HTTP/1.1",
                    ["Host: x", "Authorization: Bearer \(LiveServer.token)", "Content-Length: \(body.utf8.count)", "Connection: close"], body: body))
            let response = try #require(RawHTTPResponse(bytes))
            #expect(response.status == 415, "\(String(decoding: bytes, as: UTF8.self))")
            #expect(response.errorCode == "unsupported_media_type")

            // No body, no Content-Type: cancel gets past the media type (to the missing subscription).
            let (cancel, _) = try await RawConnection.exchange(
                port: port,
                rawRequest(
                    "POST /v1/users/user_1/subscription/cancel HTTP/1.1",
                    ["Host: x", "Authorization: Bearer \(LiveServer.token)", "Content-Length: 0", "Connection: close"]))
            let cancelled = try #require(RawHTTPResponse(cancel))
            #expect(cancelled.errorCode != "unsupported_media_type", "\(String(decoding: cancel, as: UTF8.self))")
        }
    }

    @Test("An HTTP/1.0 request without keep-alive, or Connection: Close in any case, gets its answer and then the connection closes")
    func closesAfterOneShotRequests() async throws {
        try await LiveServer.run { port, _ in
            for request in [
                rawRequest("GET /healthz HTTP/1.0", []),
                rawRequest("GET /healthz HTTP/1.1", ["Host: x", "Connection: Close"]),
            ] {
                let (bytes, closed) = try await RawConnection.exchange(port: port, request, timeout: .seconds(10))
                #expect(RawHTTPResponse(bytes)?.status == 200, "\(String(decoding: bytes, as: UTF8.self))")
                #expect(closed, "the server closes: \(String(decoding: request, as: UTF8.self).prefix(30))")
            }
            // HTTP/1.1 keeps the connection open.
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send(rawRequest("GET /healthz HTTP/1.1", ["Host: x"]))
            #expect(await connection.readResponse(timeout: .seconds(10))?.status == 200)
            try await connection.send(rawRequest("GET /healthz HTTP/1.1", ["Host: x"]))
            #expect(await connection.readResponse(timeout: .seconds(10))?.status == 200, "a second request on the same connection")
        }
    }
}
