import BillingCore
import Foundation

/// The inbox as the layers above BillingStore see it: durable deliveries deduplicated by
/// (event id, account, livemode), and the operator's view of them.
public protocol EventInbox: Sendable {
    /// Stores deliveries for the applier in one transaction, in order; one outcome per delivery.
    func insert(_ deliveries: [InboxDelivery]) async throws -> [InboxInsertOutcome]
    /// Stored events in commit order, without their bodies.
    func list(_ filter: InboxFilter) async throws -> [InboxEvent]
    /// The raw body of an event of an account and mode.
    func body(eventID: String, account: String?, livemode: Bool) async throws -> [UInt8]?
    /// Number of events in each status.
    func countsByStatus() async throws -> [InboxStatus: Int]
    /// Total number of stored events.
    func count() async throws -> Int
    /// Whether an event of an account and mode is stored.
    func contains(eventID: String, account: String?, livemode: Bool) async throws -> Bool
    /// Re-queues one failed or dead event of an account and mode; whether there was one.
    func retry(eventID: String, account: String?, livemode: Bool) async throws -> Bool
    /// Re-queues every failed and dead event; how many.
    func retryAllFailed() async throws -> Int
    /// The work queue's depth, for metrics.
    func depth() async throws -> InboxDepth
}

/// Applies the inbox to the ledger: deliveries in the group commit that stores them, and
/// whatever is left queued (recovered by reconcile, failed, replayed) in commit order.
public protocol EventApplier: Sendable {
    var configuration: ApplierConfiguration { get }
    /// Applies every due event until none is left; `now` is Unix ms.
    func drain(now: @Sendable () -> Int64, progress: @Sendable (ApplyPass) -> Void) async throws -> ApplyPass
    /// Decodes a delivery for ``ingest(_:now:)``, on the caller's task.
    func prepare(_ delivery: InboxDelivery) -> PreparedDelivery
    /// Stores deliveries and applies each new one in the same transaction.
    func ingest(_ batch: [PreparedDelivery], now: Int64) async throws -> IngestResult
    /// How many ``ingest(_:now:)`` transactions a group commit runs at once: one on a database
    /// with one writer, more where commits are bounded by round trips.
    var concurrentCommits: Int { get }
}

extension EventApplier {
    public var concurrentCommits: Int { 1 }

    /// Applies every due event now.
    @discardableResult
    public func drain() async throws -> ApplyPass {
        try await drain(now: { Int64(Date().timeIntervalSince1970 * 1000) }, progress: { _ in })
    }
}

/// Operator actions over the whole ledger.
public protocol LedgerMaintenanceStore: Sendable {
    /// Empties the ledger and applies every stored event again with `applier`, announcing
    /// nothing: history is not sent to the app again, and the last announced views are kept.
    func replay(applier: any EventApplier, progress: @Sendable (Int) -> Void) async throws -> ApplyPass
    /// The ledger's view of one object, with its children, raw JSON and events; nil when unknown.
    func inspect(id: String) async throws -> [String: any Sendable]?
    /// Every ledger row as ordered text: equal dumps, equal ledgers.
    func dump() async throws -> String
}

/// How the applier retries and batches.
public struct ApplierConfiguration: Sendable {
    /// Tries before an event is `dead`.
    public var maximumAttempts: Int = 8
    /// Delay before the first retry; doubles on each further try.
    public var firstRetryDelay: Duration = .seconds(5)
    /// Longest delay between tries.
    public var maximumRetryDelay: Duration = .seconds(3600)
    /// Events per transaction.
    public var batchSize: Int = 256
    /// The Stripe API version billingd is configured for; events of another are counted.
    public var apiVersion: String = StripeAPIVersion.pinned

    public init(
        maximumAttempts: Int = 8, firstRetryDelay: Duration = .seconds(5), maximumRetryDelay: Duration = .seconds(3600),
        batchSize: Int = 256, apiVersion: String = StripeAPIVersion.pinned
    ) {
        self.maximumAttempts = maximumAttempts
        self.firstRetryDelay = firstRetryDelay
        self.maximumRetryDelay = maximumRetryDelay
        self.batchSize = batchSize
        self.apiVersion = apiVersion
    }
}

/// What one pass of the applier, or one group commit, applied.
public struct ApplyPass: Sendable, Equatable {
    public var processed = 0
    public var applied = 0
    public var stale = 0
    public var ignored = 0
    public var failed = 0
    public var dead = 0
    public var otherAPIVersion = 0
    /// `otherAPIVersion` broken down by version.
    public var apiVersions: [String: Int] = [:]

    public init() {}

    mutating func add(_ other: ApplyPass) {
        processed += other.processed
        applied += other.applied
        stale += other.stale
        ignored += other.ignored
        failed += other.failed
        dead += other.dead
        otherAPIVersion += other.otherAPIVersion
        apiVersions.merge(other.apiVersions, uniquingKeysWith: +)
    }
}

/// A delivery decoded on its sender's task, ready to be stored and applied in one group commit.
public struct PreparedDelivery: Sendable {
    public let delivery: InboxDelivery
    let decoded: DecodedDelivery

    /// Why the delivery's object cannot be applied, nil when it can. A webhook refuses such a
    /// delivery rather than acknowledge what it could never apply (invariant 9).
    public var decodingFailure: String? {
        if case .failure(let reason) = decoded { reason } else { nil }
    }
}

/// What one group commit of deliveries did.
public struct IngestResult: Sendable {
    /// One per delivery, in order.
    public var outcomes: [InboxInsertOutcome] = []
    /// The new deliveries applied (or ignored) in the commit that stored them.
    public var pass = ApplyPass()
    /// New deliveries left for the applier: their decoding failed, or a ledger write did.
    public var queued = 0
}

/// Which inbox events ``EventInbox/list(_:)`` returns.
public struct InboxFilter: Sendable {
    public var statuses: [InboxStatus] = []
    public var type: String?
    public var objectID: String?
    public var eventID: String?
    public var afterSeq: Int64?
    public var limit: Int = 100

    public init(
        statuses: [InboxStatus] = [], type: String? = nil, objectID: String? = nil, eventID: String? = nil, afterSeq: Int64? = nil,
        limit: Int = 100
    ) {
        self.statuses = statuses
        self.type = type
        self.objectID = objectID
        self.eventID = eventID
        self.afterSeq = afterSeq
        self.limit = limit
    }
}

/// Inbox depth for metrics: events per status of the work queue, and when the oldest
/// pending one arrived (Unix ms).
public struct InboxDepth: Sendable {
    public var counts: [InboxStatus: Int]
    public var oldestPendingReceivedAt: Int64?
}
