import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The open connections of one server, by client address, and the rule that admits a new one:
///
/// 1. A connection is *evictable* while it has not sent a complete request head: a new one, one
///    trickling its head (a slowloris), or an idle keep-alive between requests. From a complete
///    head until its response ends it is never evicted.
/// 2. When the new connection's client address is at ``ConnectionLimits/maximumConnectionsPerClient``,
///    that address's oldest evictable connection is closed to make room; if it has none, the new
///    connection is closed.
/// 3. Then, when the server is at ``ConnectionLimits/maximumConnections``, the oldest evictable
///    connection of any address is closed; if there is none, the new connection is closed.
/// 4. Of each cap, at most ``ConnectionLimits/bodyBudget(of:)`` connections may be reading a
///    request body; a request with a body beyond that is answered 503 (``RequestGuard``), so that
///    slow bodies, which rule 1 protects, never take the last slots from health checks.
///
/// So a flood of slow connections costs the flood its own oldest connections, not the healthy
/// clients, even when both come from one address; and no client waits in the listen backlog.
final class ConnectionAdmission: Sendable {
    /// Which cap a connection or a request met.
    enum Scope: String, Sendable {
        case client, server
    }

    /// What became of a new connection.
    enum Decision: Equatable {
        /// Served, under this id (any connection evicted to make room is closing).
        case admitted(id: Int)
        /// Closed at once: the scope is full of connections that may not be evicted.
        case refused(Scope)
    }

    /// Whether a request whose head is complete may be read.
    enum RequestDecision: Equatable {
        case serve
        /// The connection was evicted before its head completed: it is closing.
        case evicted
        /// The scope's body budget is spent: answer 503 and close.
        case busy(Scope)
    }

    private struct Connection {
        let channel: any Channel
        let client: String
        /// Between a complete head and the end of its response.
        var inRequest = false
        var readingBody = false
    }

    private struct State {
        var nextID = 0
        var connections: [Int: Connection] = [:]
        /// Ids in admission order, oldest first (ids only grow).
        var order: [Int] = []
        var byClient: [String: [Int]] = [:]
        var bodies = 0
        var bodiesByClient: [String: Int] = [:]

        mutating func remove(_ id: Int) -> Connection? {
            guard let connection = connections.removeValue(forKey: id) else { return nil }
            order.remove(at: Self.position(of: id, in: order))
            let siblings = byClient[connection.client, default: []].filter { $0 != id }
            byClient[connection.client] = siblings.isEmpty ? nil : siblings
            if connection.readingBody { endBody(of: connection) }
            return connection
        }

        mutating func endBody(of connection: Connection) {
            bodies -= 1
            let remaining = bodiesByClient[connection.client, default: 1] - 1
            bodiesByClient[connection.client] = remaining > 0 ? remaining : nil
        }

        /// The oldest evictable connection among `ids`.
        func oldestEvictable(in ids: [Int]) -> Int? {
            ids.first { connections[$0]?.inRequest == false }
        }

        static func position(of id: Int, in ids: [Int]) -> Int {
            var (low, high) = (0, ids.count)
            while low < high {
                let middle = (low + high) / 2
                if ids[middle] < id { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    private let limits: ConnectionLimits
    private let metrics: BillingMetrics
    private let state = Mutex(State())

    init(limits: ConnectionLimits, metrics: BillingMetrics) {
        self.limits = limits
        self.metrics = metrics
    }

    /// Admits `channel` within the caps, evicting as the rules say, or refuses it; the caller
    /// closes a refused channel.
    func admit(_ channel: any Channel) -> Decision {
        let client = Self.clientKey(channel.remoteAddress)
        var evicted: [(channel: any Channel, scope: Scope)] = []
        let decision = state.withLock { state -> Decision in
            if state.byClient[client, default: []].count >= limits.maximumConnectionsPerClient {
                guard let oldest = state.oldestEvictable(in: state.byClient[client, default: []]) else { return .refused(.client) }
                evicted.append((state.remove(oldest)!.channel, .client))
            }
            if state.connections.count >= limits.maximumConnections {
                guard let oldest = state.oldestEvictable(in: state.order) else { return .refused(.server) }
                evicted.append((state.remove(oldest)!.channel, .server))
            }
            let id = state.nextID
            state.nextID += 1
            state.connections[id] = Connection(channel: channel, client: client)
            state.order.append(id)
            state.byClient[client, default: []].append(id)
            return .admitted(id: id)
        }
        for (channel, scope) in evicted {
            metrics.count("billingd_http_connections_evicted_total", dimensions: [("scope", scope.rawValue)])
            channel.close(promise: nil)
        }
        if case .refused(let scope) = decision {
            metrics.count("billingd_http_connections_refused_total", dimensions: [("scope", scope.rawValue)])
        }
        return decision
    }

    /// A request's head is complete: the connection may no longer be evicted, and if the request
    /// has a body, it takes one of the body budget's places, if one is left.
    func startRequest(_ id: Int, hasBody: Bool) -> RequestDecision {
        let decision = state.withLock { state -> RequestDecision in
            guard var connection = state.connections[id] else { return .evicted }
            if hasBody, !connection.readingBody {
                if state.bodiesByClient[connection.client, default: 0] >= ConnectionLimits.bodyBudget(of: limits.maximumConnectionsPerClient) {
                    return .busy(.client)
                }
                if state.bodies >= ConnectionLimits.bodyBudget(of: limits.maximumConnections) { return .busy(.server) }
                connection.readingBody = true
                state.bodies += 1
                state.bodiesByClient[connection.client, default: 0] += 1
            }
            connection.inRequest = true
            state.connections[id] = connection
            return .serve
        }
        if case .busy(let scope) = decision {
            metrics.count("billingd_http_requests_shed_total", dimensions: [("scope", scope.rawValue)])
        }
        return decision
    }

    /// The request's body has arrived in full: its place in the body budget is free.
    func endBody(_ id: Int) {
        state.withLock { state in
            guard var connection = state.connections[id], connection.readingBody else { return }
            state.endBody(of: connection)
            connection.readingBody = false
            state.connections[id] = connection
        }
    }

    /// The connection has answered every request it read and reads no body: it may be evicted again.
    func endRequest(_ id: Int) {
        state.withLock { state in
            guard var connection = state.connections[id] else { return }
            if connection.readingBody { state.endBody(of: connection) }
            connection.readingBody = false
            connection.inRequest = false
            state.connections[id] = connection
        }
    }

    /// The connection closed.
    func remove(_ id: Int) {
        _ = state.withLock { $0.remove(id) }
    }

    /// Connections open now, for tests.
    var count: Int { state.withLock { $0.connections.count } }

    /// What one client is, for the per-client cap: an IPv4 address; an IPv6 address's /64, which
    /// one customer usually holds whole (an IPv4 address mapped into IPv6 stays whole); every
    /// Unix-socket client one.
    static func clientKey(_ address: SocketAddress?) -> String {
        switch address {
        case .v4:
            return address?.ipAddress ?? "?"
        case .v6:
            var bytes = [UInt8](repeating: 0, count: 16)
            guard let text = address?.ipAddress, inet_pton(AF_INET6, text, &bytes) == 1 else { return address?.ipAddress ?? "?" }
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
            if mapped { return address?.ipAddress ?? "?" }
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        case .unixDomainSocket, .none:
            return "local"
        }
    }
}
