import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to a server on 127.0.0.1 for what an HTTP client will not send: broken
/// chunked framing, a NUL in a header, HTTP/1.0, half a request head. Every blocking call runs
/// on a thread of its own, never on the cooperative pool that the server under test may need.
public final class RawConnection: Sendable {
    public struct ConnectionError: Error, CustomStringConvertible {
        public let description: String
    }

    private let socket: Int32
    private let closed = Mutex(false)

    private init(socket: Int32) {
        self.socket = socket
    }

    deinit { close() }

    /// Connects to `127.0.0.1:port`, from `source` (another loopback address, such as
    /// 127.0.0.2, is another client to the server).
    public static func open(port: Int, from source: String = "127.0.0.1") async throws -> RawConnection {
        try await onThread {
            let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw ConnectionError(description: "socket: \(String(cString: strerror(errno)))") }
            if source != "127.0.0.1" {
                var local = sockaddr_in()
                local.sin_family = sa_family_t(AF_INET)
                local.sin_addr.s_addr = inet_addr(source)
                let bound = withUnsafePointer(to: &local) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                guard bound == 0 else {
                    let reason = String(cString: strerror(errno))
                    Glibc.close(fd)
                    throw ConnectionError(description: "bind to \(source): \(reason)")
                }
            }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else {
                let reason = String(cString: strerror(errno))
                Glibc.close(fd)
                throw ConnectionError(description: "connect to port \(port): \(reason)")
            }
            return RawConnection(socket: fd)
        }
    }

    /// Writes all of `bytes`.
    public func send(_ bytes: [UInt8]) async throws {
        let fd = socket
        try await Self.onThread {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard written > 0 else { throw ConnectionError(description: "send: \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
    }

    /// Writes the UTF-8 of `text`.
    public func send(_ text: String) async throws {
        try await send(Array(text.utf8))
    }

    /// Reads until the server closes the connection or `timeout` passes without that; `closed`
    /// says which. A reset counts as closed.
    public func readUntilClosed(timeout: Duration) async -> (bytes: [UInt8], closed: Bool) {
        let fd = socket
        return await Self.onThread {
            let deadline = ContinuousClock.now + timeout
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return (received, false) }
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
                let ready = poll(&poller, 1, milliseconds)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0 else { continue }
                let count = recv(fd, &chunk, chunk.count, 0)
                if count > 0 {
                    received.append(contentsOf: chunk[0..<count])
                } else if count < 0, errno == EINTR {
                    continue
                } else {
                    return (received, true)
                }
            }
        }
    }

    /// Reads until `bytes` ends with a complete response (by its Content-Length, the head alone
    /// for HEAD), the server closes, or `timeout` passes.
    public func readResponse(timeout: Duration, head: Bool = false) async -> RawHTTPResponse? {
        let fd = socket
        let received = await Self.onThread {
            let deadline = ContinuousClock.now + timeout
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while RawHTTPResponse(received, head: head) == nil {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { break }
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
                guard poll(&poller, 1, milliseconds) > 0 else { continue }
                let count = recv(fd, &chunk, chunk.count, 0)
                guard count > 0 else { break }
                received.append(contentsOf: chunk[0..<count])
            }
            return received
        }
        return RawHTTPResponse(received, head: head)
    }

    /// Closes the connection (once).
    public func close() {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if first { Glibc.close(socket) }
    }

    /// One HTTP exchange on a new connection: sends `request`, then reads until the server closes
    /// (or `timeout`). The default is generous, not a measure: in a full run on two busy cores an
    /// in-process server has answered a plain request more than 10 s late (a fresh clone's CI run).
    public static func exchange(port: Int, _ request: [UInt8], timeout: Duration = .seconds(60)) async throws -> (bytes: [UInt8], closed: Bool) {
        let connection = try await open(port: port)
        defer { connection.close() }
        try await connection.send(request)
        return await connection.readUntilClosed(timeout: timeout)
    }

    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }

    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }
}

/// The first response in bytes read off a connection: status, header fields (names in lower
/// case) and a body of `Content-Length` bytes.
public struct RawHTTPResponse: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: [UInt8]

    /// nil until `bytes` hold a complete response.
    public init?(_ bytes: [UInt8], head isHead: Bool = false) {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4,
            let end = (0...(bytes.count - 4)).first(where: { bytes[$0..<($0 + 4)].elementsEqual(separator) })
        else { return nil }
        let lines = String(decoding: bytes[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = isHead ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        let bodyStart = end + 4
        guard bytes.count - bodyStart >= length else { return nil }
        self.status = status
        self.headers = headers
        self.body = Array(bytes[bodyStart..<(bodyStart + length)])
    }

    /// `error.code` of a JSON error body.
    public var errorCode: String? {
        let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        return (object?["error"] as? [String: Any])?["code"] as? String
    }
}
