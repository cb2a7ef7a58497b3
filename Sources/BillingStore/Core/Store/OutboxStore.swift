import BillingCore

/// The outbox of events for the app's backend: written by the ledger's transactions (see
/// ``OutboxPolicy``), read and updated by the sender and `billingd outbox`. Every row is one
/// event for one endpoint; a user's rows for an endpoint go out in `seq` order.
public protocol OutboxStore: Sendable {
    /// The next event of each (endpoint, user) whose earlier events are all delivered or dead,
    /// due at `now` (Unix ms), for endpoints not disabled and not in `excluding`; oldest due
    /// first. On PostgreSQL what is returned is taken: leased to this replica for the send lease
    /// (two minutes), so a caller asks only for the endpoints it will send to now.
    func due(now: Int64, limit: Int, excluding: Set<String>) async throws -> [OutboxMessage]
    /// Records the outcomes of delivery attempts in one transaction.
    func record(_ attempts: [OutboxAttempt]) async throws
    /// Events newest first, of one status or any.
    func list(status: OutboxStatus?, limit: Int) async throws -> [OutboxMessage]
    /// Makes the failed or dead rows of event `id` due at `now`; returns how many.
    func retry(id: String, now: Int64) async throws -> Int
    /// Makes every dead row due at `now`; returns how many.
    func retryAllDead(now: Int64) async throws -> Int
    /// Counts by status and the oldest undelivered event's time.
    func depth() async throws -> OutboxDepth
    /// Stops sending to an endpoint (it answered 410 Gone) until ``enableEndpoint(_:)``.
    func disableEndpoint(_ url: String, at: Int64, reason: String) async throws
    /// Sends to an endpoint again; false when it was not disabled.
    func enableEndpoint(_ url: String) async throws -> Bool
    /// The disabled endpoints and when they were disabled (Unix ms).
    func disabledEndpoints() async throws -> [String: Int64]
    /// Announces what time alone changed (a grant that ran out with no event to say so: a
    /// scheduled cancellation, a grace period, an App Store period whose renewal never came):
    /// resolves again up to `limit` users whose announced view was due for review under the
    /// store's policy, and queues their events as a ledger change does. `now` (Unix ms) stamps
    /// the events. Returns how many users were looked at; 0 without a policy.
    func announceLapsed(now: Int64, limit: Int) async throws -> Int
    /// The earliest time (Unix ms) an announced view is due for review; nil when none is.
    func nextReview() async throws -> Int64?
    /// Queues one ready-made event per endpoint (`send-test`), after the user's earlier ones.
    func enqueue(_ event: OutboxDraft, endpoints: [String], now: Int64) async throws -> [OutboxMessage]
}

extension OutboxStore {
    /// ``due(now:limit:excluding:)`` for every endpoint.
    public func due(now: Int64, limit: Int) async throws -> [OutboxMessage] {
        try await due(now: now, limit: limit, excluding: [])
    }
}

/// Where an outbound event stands.
public enum OutboxStatus: String, Sendable, Codable, CaseIterable {
    /// Waiting for its first attempt, or for the user's earlier events.
    case pending
    /// An attempt failed; retried with backoff.
    case failed
    /// The endpoint answered 2xx.
    case delivered
    /// Retried for the whole retry window (3 days) without success; kept for `outbox retry`.
    case dead
}

/// An event before it is stored: everything but its position.
public struct OutboxDraft: Sendable, Equatable {
    /// The `webhook-id`, the same for every endpoint and every retry.
    public var id: String
    public var type: String
    public var scope: ServiceScope
    public var user: String
    /// Unix ms.
    public var createdAt: Int64
    /// The JSON body sent.
    public var payload: [UInt8]

    public init(id: String, type: String, scope: ServiceScope, user: String, createdAt: Int64, payload: [UInt8]) {
        self.id = id
        self.type = type
        self.scope = scope
        self.user = user
        self.createdAt = createdAt
        self.payload = payload
    }
}

/// One stored event for one endpoint.
public struct OutboxMessage: Sendable, Equatable {
    public var seq: Int64
    public var event: OutboxDraft
    public var endpoint: String
    public var status: OutboxStatus
    public var attempts: Int
    /// Unix ms; nil once delivered or dead.
    public var nextAttemptAt: Int64?
    public var lastError: String?
    public var deliveredAt: Int64?

    public init(
        seq: Int64, event: OutboxDraft, endpoint: String, status: OutboxStatus, attempts: Int, nextAttemptAt: Int64?,
        lastError: String?, deliveredAt: Int64?
    ) {
        self.seq = seq
        self.event = event
        self.endpoint = endpoint
        self.status = status
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.deliveredAt = deliveredAt
    }
}

/// What one delivery attempt of row `seq` came to.
public struct OutboxAttempt: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        case delivered
        /// Try again at `retryAt` (Unix ms).
        case failed(error: String, retryAt: Int64)
        /// Given up; kept.
        case dead(error: String)
        /// The endpoint answered 410: the row stays pending and the endpoint is disabled.
        case gone
    }

    public var seq: Int64
    public var outcome: Outcome
    /// Unix ms.
    public var at: Int64

    public init(seq: Int64, outcome: Outcome, at: Int64) {
        self.seq = seq
        self.outcome = outcome
        self.at = at
    }
}

/// The outbox's backlog.
public struct OutboxDepth: Sendable, Equatable {
    public var counts: [OutboxStatus: Int]
    /// Unix ms of the oldest pending or failed event; nil when none.
    public var oldestUndeliveredAt: Int64?

    public init(counts: [OutboxStatus: Int], oldestUndeliveredAt: Int64?) {
        self.counts = counts
        self.oldestUndeliveredAt = oldestUndeliveredAt
    }
}

/// How a ledger transaction announces the changes of users' views: the catalog that resolves a
/// view, how the payload's `data` renders it, and the endpoints each event is queued for. A
/// store given none (`billingd replay`, tests of the ledger alone) announces nothing and leaves
/// the last announced views as they are.
public struct OutboxPolicy: Sendable {
    public var catalog: PlanCatalog
    /// One row per event and endpoint; empty keeps the announced views up to date without queuing.
    public var endpoints: [String]
    /// The payload's `data` object: the user's views after the change.
    public var render: @Sendable (UserBilling, PlanResolution) -> [UInt8]
    /// Unix seconds at which views are resolved.
    public var now: @Sendable () -> Int64
    /// The `data` of `usage.limit_reached`: the meter's state.
    public var renderUsage: @Sendable (UsageMeterState) -> [UInt8]

    public init(
        catalog: PlanCatalog, endpoints: [String], render: @escaping @Sendable (UserBilling, PlanResolution) -> [UInt8],
        now: @escaping @Sendable () -> Int64, renderUsage: @escaping @Sendable (UsageMeterState) -> [UInt8] = { _ in [] }
    ) {
        self.catalog = catalog
        self.endpoints = endpoints
        self.render = render
        self.now = now
        self.renderUsage = renderUsage
    }
}

extension OutboxDepth {
    /// When the first event still waiting (pending or failed) was queued: the one first in the
    /// queue, found by two index lookups rather than a walk of the backlog.
    static let oldestWaitingSQL = """
        SELECT createdAt FROM outboxEvent WHERE seq = (
            SELECT MIN(seq) FROM (
                SELECT MIN(seq) AS seq FROM outboxEvent WHERE status = 'pending'
                UNION ALL SELECT MIN(seq) FROM outboxEvent WHERE status = 'failed') AS firsts)
        """
}
