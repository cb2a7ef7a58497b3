/// How long a client may hold a connection without making progress, and how many connections
/// are served at once, in all and per client address (`BILLINGD_IDLE_TIMEOUT`,
/// `BILLINGD_HEADER_TIMEOUT`, `BILLINGD_BODY_TIMEOUT`, `BILLINGD_MIN_TRANSFER_RATE`,
/// `BILLINGD_MAX_CONNECTIONS`, `BILLINGD_MAX_CONNECTIONS_PER_CLIENT`). Without them an idle
/// keep-alive connection, a request head sent a byte a minute, or an unfinished body each hold a
/// descriptor and buffers for as long as the client likes, and a few hundred of them keep every
/// other client out (issue 39).
public struct ConnectionLimits: Sendable, Equatable {
    /// A connection with no request in flight is closed after this long (Hummingbird's idle timeout).
    public var idleTimeout: Duration
    /// A request's head must be complete this long after its first byte arrived.
    public var headerTimeout: Duration
    /// A request's body must be complete this long after its head.
    public var bodyTimeout: Duration
    /// Bytes a second a request head or body must arrive at, judged over each
    /// ``transferRateWindow`` in which billingd was reading; 0 turns the check off.
    public var minimumTransferRate: Int
    /// The span over which ``minimumTransferRate`` is judged.
    public var transferRateWindow: Duration
    /// Connections served at once. At the cap a new connection evicts the oldest one that has not
    /// sent a complete request head (see ``ConnectionAdmission``), or is closed if there is none.
    public var maximumConnections: Int
    /// Connections served at once to one client address (an IPv6 client: its /64), evicting the
    /// same way within that address.
    public var maximumConnectionsPerClient: Int

    public init(
        idleTimeout: Duration = .seconds(60), headerTimeout: Duration = .seconds(10), bodyTimeout: Duration = .seconds(60),
        minimumTransferRate: Int = 1024, transferRateWindow: Duration = .seconds(5),
        maximumConnections: Int = 512, maximumConnectionsPerClient: Int = 128
    ) {
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.minimumTransferRate = minimumTransferRate
        self.transferRateWindow = transferRateWindow
        self.maximumConnections = maximumConnections
        self.maximumConnectionsPerClient = maximumConnectionsPerClient
    }

    /// Of a cap of `cap` connections, how many may be reading a request body at once: all but an
    /// eighth (at least one), which stays for requests without a body — `/healthz`, `/readyz`,
    /// the service API's reads — and for new connections, however many slow bodies arrive.
    static func bodyBudget(of cap: Int) -> Int {
        max(1, cap - max(1, cap / 8))
    }
}
