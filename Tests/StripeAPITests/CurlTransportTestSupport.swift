import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A request context that remembers the client's port, so tests can count connections.
struct ProbeContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let remotePort: Int?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remotePort = source.channel.remoteAddress?.port
    }
}

/// A Hummingbird server on 127.0.0.1 that records what it receives.
final class ProbeServer: Sendable {
    struct Seen: Sendable {
        let method: String
        let path: String
        let query: String?
        let headers: [String: String]
        let body: [UInt8]
        let remotePort: Int?
    }

    private let state = Mutex<(seen: [Seen], inFlight: Int, maxInFlight: Int)>(([], 0, 0))

    var seen: [Seen] { state.withLock { $0.seen } }
    var inFlight: Int { state.withLock { $0.inFlight } }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }
    var connections: Set<Int> { Set(seen.compactMap(\.remotePort)) }

    /// `/echo` (any method) answers JSON; `/slow` answers after 5 s; `/work` after 50 ms.
    func router() -> Router<ProbeContext> {
        let router = Router(context: ProbeContext.self)
        let echo: @Sendable (Request, ProbeContext) async throws -> Response = { request, context in
            try await self.record(request, context)
            let body = #"{"object":"echo","ok":true}"#
            return Response(
                status: .ok, headers: [.contentType: "application/json", HTTPField.Name("Request-Id")!: "req_probe"],
                body: .init(byteBuffer: ByteBuffer(string: body))
            )
        }
        router.get("echo", use: echo)
        router.post("echo", use: echo)
        router.delete("echo", use: echo)
        router.get("slow") { request, context in
            try await self.record(request, context)
            self.state.withLock { $0.inFlight += 1; $0.maxInFlight = max($0.maxInFlight, $0.inFlight) }
            defer { self.state.withLock { $0.inFlight -= 1 } }
            try await Task.sleep(for: .seconds(5))
            return "late"
        }
        router.get("work") { request, context in
            try await self.record(request, context)
            self.state.withLock { $0.inFlight += 1; $0.maxInFlight = max($0.maxInFlight, $0.inFlight) }
            defer { self.state.withLock { $0.inFlight -= 1 } }
            try await Task.sleep(for: .milliseconds(50))
            return "done"
        }
        return router
    }

    private func record(_ request: Request, _ context: ProbeContext) async throws {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let seen = Seen(
            method: request.method.rawValue, path: request.uri.path, query: request.uri.query, headers: headers,
            body: Array(buffer.readableBytesView), remotePort: context.remotePort
        )
        state.withLock { $0.seen.append(seen) }
    }

    /// Runs the server for the duration of `body`, which gets its base URL.
    func run(_ body: (String) async throws -> Void) async throws {
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "probe")
        logger.logLevel = .critical
        let app = Application(
            router: router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in portContinuation.yield(channel.localAddress?.port ?? 0) }, logger: logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            var iterator = ports.makeAsyncIterator()
            let port = await iterator.next() ?? 0
            try await body("http://127.0.0.1:\(port)")
            group.cancelAll()
        }
    }
}

/// A bare TCP listener on 127.0.0.1 for what an HTTP server will not do: refuse connections
/// (bound but not listening), close without answering, or answer with hand-written bytes.
final class RawSocketServer: Sendable {
    let port: Int
    private let socket: Int32

    init(listening: Bool = true) throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, !listening || listen(fd, 16) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        socket = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(socket) }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// On a thread of its own: accepts up to `connections` connections one after another (giving
    /// up after 10 s without one), reads each request head, then writes `reply` or, when nil,
    /// closes without a byte.
    func serve(connections: Int, reply: [UInt8]?) {
        let listener = socket
        let thread = Thread {
            for _ in 0..<connections {
                var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 10_000) == 1 else { return }
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                var received: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 4096)
                while !received.contains(subsequence: [13, 10, 13, 10]) {
                    let count = read(connection, &chunk, chunk.count)
                    if count <= 0 { break }
                    received.append(contentsOf: chunk[0..<count])
                }
                if let reply {
                    _ = reply.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                }
                close(connection)
            }
        }
        thread.start()
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard count >= subsequence.count else { return false }
        for start in 0...(count - subsequence.count) where self[start..<(start + subsequence.count)].elementsEqual(subsequence) {
            return true
        }
        return false
    }
}

/// `{"compressed":true,"id":"cus_gz"}`, gzipped.
let gzippedJSON: [UInt8] = [
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0x4a, 0xce, 0xcf, 0x2d, 0x28, 0x4a, 0x2d,
    0x2e, 0x4e, 0x4d, 0x51, 0xb2, 0x2a, 0x29, 0x2a, 0x4d, 0xd5, 0x51, 0xca, 0x04, 0xb2, 0x94, 0x92, 0x4b, 0x8b, 0xe3,
    0xd3, 0xab, 0x94, 0x6a, 0x01, 0x6a, 0x90, 0x82, 0x85, 0x21, 0x00, 0x00, 0x00,
]
