/// The HTTP methods Stripe's API uses.
public enum HTTPTransportMethod: String, Sendable {
    case get = "GET"
    case post = "POST"
    case delete = "DELETE"
}

/// Sends one HTTP request and returns the answer, whatever its status. `CurlTransport` is the real
/// one; tests script answers with their own.
public protocol HTTPTransport: Sendable {
    /// One attempt: no retries, no interpretation of the status.
    func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse
}

/// A request exactly as it goes on the wire.
public struct HTTPTransportRequest: Sendable {
    public var method: HTTPTransportMethod
    /// The absolute URL, query included.
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    public var connectTimeout: Duration
    /// The limit for the whole attempt: connect, send and the complete answer.
    public var timeout: Duration

    public init(
        method: HTTPTransportMethod, url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(80)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTimeout = connectTimeout
        self.timeout = timeout
    }

    /// The first header with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }
}

/// An HTTP answer of any status.
public struct HTTPTransportResponse: Sendable {
    public var status: Int
    /// Header names lowercased; a repeated header's values joined with ", ".
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }) { first, second in "\(first), \(second)" }
        self.body = body
    }
}

/// Why no HTTP answer came back. The message says what the transport saw (never a header value).
public enum HTTPTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The connect or the total time limit was reached.
    case timedOut(String)
    /// No connection could be made: refused, unreachable, or the name did not resolve.
    case couldNotConnect(String)
    /// The connection broke before a complete answer arrived.
    case connectionLost(String)
    /// The TLS handshake failed or the peer's certificate did not verify.
    case tls(String)
    /// Anything else, including a transfer stopped because its task was cancelled.
    case other(String)

    public var message: String {
        switch self {
        case .timedOut(let message), .couldNotConnect(let message), .connectionLost(let message), .tls(let message),
            .other(let message):
            message
        }
    }

    public var description: String {
        switch self {
        case .timedOut(let message): "timed out: \(message)"
        case .couldNotConnect(let message): "could not connect: \(message)"
        case .connectionLost(let message): "connection lost: \(message)"
        case .tls(let message): "TLS failure: \(message)"
        case .other(let message): message
        }
    }

    /// Whether trying again may get an answer: a timeout, a refused connect or a dropped connection.
    public var isRetryable: Bool {
        switch self {
        case .timedOut, .couldNotConnect, .connectionLost: true
        case .tls, .other: false
        }
    }
}
