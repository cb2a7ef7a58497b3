import APITransport
import BillingCore
import BillingServer
import BillingStore
import BillingTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

/// A receiver that answers 200 with more than anyone should read: `/big`, 8 MiB; `/bomb`, a
/// gzip of 63 MiB of zeros sent as `Content-Encoding: gzip`.
final class FloodingReceiver: Sendable {
    static let bigBytes = 8 << 20
    let bomb: [UInt8]
    private let requests = Mutex(0)

    init() throws { bomb = try gzippedZeros(count: 63 << 20) }

    var requestCount: Int { requests.withLock { $0 } }

    func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.post("big") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 20)
            self.requests.withLock { $0 += 1 }
            let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 << 10)
            return Response(
                status: .ok, headers: [.contentType: "text/plain"],
                body: ResponseBody(contentLength: Self.bigBytes) { writer in
                    for _ in 0..<(Self.bigBytes / chunk.readableBytes) { try await writer.write(chunk) }
                    try await writer.finish(nil)
                })
        }
        let bomb: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            _ = try await request.body.collect(upTo: 1 << 20)
            self.requests.withLock { $0 += 1 }
            return Response(
                status: .ok, headers: [.contentType: "application/json", .contentEncoding: "gzip"],
                body: .init(byteBuffer: ByteBuffer(bytes: self.bomb)))
        }
        router.post("bomb", use: bomb)
        router.get("bomb", use: bomb)
        return router
    }

    /// Runs the receiver for the duration of `body`, which gets its base URL.
    func run(_ body: (String) async throws -> Void) async throws {
        try await withLoopbackServer(router(), label: "flooding-receiver") { port in try await body("http://127.0.0.1:\(port)") }
    }
}

/// A transport that passes requests on and keeps what each answer came to.
final class RecordingTransport: HTTPTransport {
    struct Kept: Sendable {
        let url: String
        let status: Int
        let bodyBytes: Int
        let truncated: Bool
        let head: [UInt8]
        let acceptsEncoding: Bool
    }

    private let base: any HTTPTransport
    private let kept = Mutex<[Kept]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    var answers: [Kept] { kept.withLock { $0 } }

    func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse {
        let response = try await base.perform(request)
        kept.withLock {
            $0.append(Kept(
                url: request.url, status: response.status, bodyBytes: response.body.count, truncated: response.bodyTruncated,
                head: Array(response.body.prefix(2)), acceptsEncoding: request.responseBody.decompresses))
        }
        return response
    }
}

@Suite("Outbound webhooks against hostile receivers (issue 39)", .serialized)
struct OutboxHostileReceiverTests {
    let secrets = [StandardWebhookSigner.generateSecret()]

    /// Events for `users` users, each of whom subscribes.
    static func subscriptions(_ users: Int) -> [(type: String, object: [String: Any])] {
        var events: [(type: String, object: [String: Any])] = []
        for user in 0..<users {
            events.append(("customer.created", UserFixtures.customer("cus_\(user)", user: "user_\(user)")))
            events.append(("customer.subscription.created", UserFixtures.subscription("sub_\(user)", customer: "cus_\(user)", status: "active")))
        }
        return events
    }

    @Test("A 200 with an 8 MiB body, or with a gzip bomb, counts as delivered: the sender reads 4 KiB of it at most, asks for no compression and decodes none")
    func largeAndCompressedReplies() async throws {
        let receiver = try FloodingReceiver()
        try await receiver.run { base in
            let transport = RecordingTransport(EndpointTransports(connectionsPerEndpoint: 4))
            var harness = try OutboxHarness(endpoints: ["\(base)/big", "\(base)/bomb"], secrets: secrets, transport: transport)
            defer { harness.ledger.remove() }
            try await harness.deliver(Self.subscriptions(3))
            try await harness.sendAll()
            let depth = try await harness.ledger.store.outbox.depth()
            let undelivered: [OutboxStatus] = [.pending, .failed, .dead]
            #expect(undelivered.allSatisfy { depth.counts[$0, default: 0] == 0 }, "\(depth.counts)")
            #expect(depth.counts[.delivered, default: 0] >= 6)
            let answers = transport.answers
            #expect(answers.count == receiver.requestCount)
            #expect(answers.contains { $0.url.hasSuffix("/big") } && answers.contains { $0.url.hasSuffix("/bomb") })
            for answer in answers {
                #expect(answer.status == 200)
                #expect(answer.bodyBytes <= 4096, "\(answer.url) kept \(answer.bodyBytes) bytes")
                #expect(answer.truncated)
                #expect(!answer.acceptsEncoding)
                if answer.url.hasSuffix("/bomb") { #expect(answer.head == [0x1f, 0x8b], "the gzip is kept as sent, not decoded") }
            }
        }
    }

    @Test("An API answer (Stripe's, the App Store's) that decompresses past 16 MiB fails the attempt instead of being kept whole")
    func apiAnswerBomb() async throws {
        let receiver = try FloodingReceiver()
        try await receiver.run { base in
            do {
                let response = try await CurlTransport().perform(HTTPTransportRequest(method: .get, url: "\(base)/bomb"))
                Issue.record("a bomb was kept: \(response.body.count) bytes")
            } catch let error as HTTPTransportError {
                #expect(error.message.contains("larger than \(16 << 20) bytes"), "\(error)")
            }
        }
    }

    @Test("An endpoint that accepts and never answers holds only its own lane: the healthy endpoint receives every event long before the hanging one's timeout")
    func hangingEndpoint() async throws {
        let hanging = try SilentListener()
        let receiver = AppWebhookReceiver(secrets: secrets)
        try await receiver.run { url in
            var harness = try OutboxHarness(endpoints: [hanging.url, url], secrets: secrets) { configuration in
                configuration.connectTimeout = .seconds(600)
                configuration.timeout = .seconds(600)
            }
            defer { harness.ledger.remove() }
            try await harness.deliver(Self.subscriptions(40))
            let waiting = try await harness.ledger.store.outbox.list(status: .pending, limit: 10_000).filter { $0.endpoint == url }
            #expect(waiting.count >= 40)
            let sender = harness.sender
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await sender.run() }
                // Every 100 ms for at most 120 s: far below the hanging endpoint's 600 s.
                for _ in 0..<1200 where receiver.received.count < waiting.count {
                    try await Task.sleep(for: .milliseconds(100))
                }
                group.cancelAll()
            }
            #expect(receiver.received.count == waiting.count)
        }
        withExtendedLifetime(hanging) {}
    }
}
