/// How long a client may hold a connection without making progress, and how many connections
/// are served at once (`BILLINGD_IDLE_TIMEOUT`, `BILLINGD_HEADER_TIMEOUT`,
/// `BILLINGD_BODY_TIMEOUT`, `BILLINGD_MAX_CONNECTIONS`). Without them an idle keep-alive
/// connection, a request head sent a byte a minute, or an unfinished body each hold a descriptor
/// and buffers for as long as the client likes.
public struct ConnectionLimits: Sendable, Equatable {
    /// A connection with no request in flight is closed after this long (Hummingbird's idle timeout).
    public var idleTimeout: Duration
    /// A request's head must be complete this long after its first byte arrived.
    public var headerTimeout: Duration
    /// A request's body must be complete this long after its head.
    public var bodyTimeout: Duration
    /// Connections served at once; further clients wait in the listen backlog until one closes.
    public var maximumConnections: Int

    public init(
        idleTimeout: Duration = .seconds(60), headerTimeout: Duration = .seconds(30), bodyTimeout: Duration = .seconds(60),
        maximumConnections: Int = 512
    ) {
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.maximumConnections = maximumConnections
    }
}
