/// The HTTP methods Stripe's API uses.
public enum HTTPTransportMethod: String, Sendable {
    case get = "GET"
    case post = "POST"
    case put = "PUT"
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
    /// How much of the answer's body is read and kept, and whether it may come compressed.
    public var responseBody: ResponseBodyPolicy

    public init(
        method: HTTPTransportMethod, url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(80), responseBody: ResponseBodyPolicy = .wholeAnswer
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.responseBody = responseBody
    }

    /// The first header with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }
}

/// How much of an answer's body a transport reads and keeps, and whether it asks for a compressed
/// one: a peer decides how much it sends, so without a bound one answer can take any amount of
/// memory, and a small compressed one (a "zip bomb") a thousand times its size (issue 39).
public struct ResponseBodyPolicy: Sendable, Equatable {
    /// Bytes of the body kept at most: decoded bytes when ``decompresses``, so that the bound
    /// holds whatever the compression ratio.
    public var maximumBytes: Int
    /// Past ``maximumBytes``: true stops reading and returns the answer with what was kept
    /// (``HTTPTransportResponse/bodyTruncated``); false fails the attempt.
    public var truncates: Bool
    /// Sends `Accept-Encoding` for what the transport can decode, and decodes the answer.
    /// Without it no `Accept-Encoding` is sent and a compressed answer is kept as it came.
    public var decompresses: Bool

    public init(maximumBytes: Int, truncates: Bool, decompresses: Bool) {
        self.maximumBytes = maximumBytes
        self.truncates = truncates
        self.decompresses = decompresses
    }

    /// An API's whole JSON answer (Stripe, the App Store Server API): compressed on the wire if
    /// the server likes (a page of a Stripe list shrinks several times), at most 16 MiB decoded,
    /// far above the largest page either API sends; a larger answer fails the attempt.
    public static let wholeAnswer = ResponseBodyPolicy(maximumBytes: 16 << 20, truncates: false, decompresses: true)

    /// The first `bytes` of the answer as sent, never decompressed, and nothing more read: for a
    /// reply whose status is what counts and whose body is only logged (an outbound webhook's).
    public static func prefix(_ bytes: Int) -> ResponseBodyPolicy {
        ResponseBodyPolicy(maximumBytes: bytes, truncates: true, decompresses: false)
    }
}

/// An HTTP answer of any status.
public struct HTTPTransportResponse: Sendable {
    public var status: Int
    /// Header names lowercased; a repeated header's values joined with ", ".
    public var headers: [String: String]
    public var body: [UInt8]
    /// The body went on past what the request's ``ResponseBodyPolicy`` keeps; the rest was not read.
    public var bodyTruncated: Bool

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = [], bodyTruncated: Bool = false) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }) { first, second in "\(first), \(second)" }
        self.body = body
        self.bodyTruncated = bodyTruncated
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
