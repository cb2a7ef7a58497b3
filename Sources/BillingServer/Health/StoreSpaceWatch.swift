import AsyncAlgorithms
import BillingCore
import BillingStore
import Logging
import ServiceLifecycle
import Synchronization

/// Keeps track of a full store (issue 38): from the first write refused for want of space
/// (``StoreFull``) until one commits again, the store is *full*. While it is, deliveries and the
/// service API's writes are answered 503 `store_full` with `Retry-After`, `/readyz` fails, the
/// applier and the other background writers wait instead of trying, and `billingd_store_full` is 1.
/// One error line says so when it begins, with what to do; one info line when it ends.
///
/// It ends on its own once space returns: any write that commits ends it (a delivery, `/readyz`'s
/// check), and as a service it checks every `interval` while full (``LedgerStore/checkSpace()``),
/// so that it ends even when nothing is sent.
///
/// As a service it also publishes how much the store takes (``LedgerStore/sizes()``) every
/// `sizesInterval`: `billingd_store_bytes{table}`, `billingd_store_database_bytes` and
/// `billingd_store_free_bytes`, with the inbox's events per store.
public final class StoreSpaceWatch: Service, Sendable {
    /// One full spell: when it began and how many writes it refused.
    private struct Episode {
        let began: ContinuousClock.Instant
        var refusals = 0
    }

    private let store: any LedgerStore
    private let metrics: BillingMetrics
    private let logger: Logger
    private let interval: Duration
    private let sizesInterval: Duration
    /// What an operator does about it, for the error line: where to free space.
    private let hint: String
    private let episode = Mutex<Episode?>(nil)
    /// When the sizes are next read.
    private let nextSizes = Mutex<ContinuousClock.Instant>(.now)

    /// - Parameters:
    ///   - interval: how often the store's space is checked while it is full.
    ///   - sizesInterval: how often the store's sizes are read (on SQLite a read of every page).
    ///   - hint: where to free space ("free space on the disk holding /var/lib/billingd").
    public init(
        store: any LedgerStore, metrics: BillingMetrics, logger: Logger, interval: Duration = .seconds(10),
        sizesInterval: Duration = .seconds(600), hint: String = "free space on the disk that holds the ledger database"
    ) {
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.interval = interval
        self.sizesInterval = sizesInterval
        self.hint = hint
        metrics.gauge(Self.gaugeName, 0)
    }

    static let gaugeName = "billingd_store_full"
    static let refusalsName = "billingd_store_write_refusals_total"

    /// Whether the store is full: a write was refused for want of space and none has committed since.
    public var isFull: Bool { episode.withLock { $0 != nil } }

    /// Looks at a failed write of `writer` (`webhook`, `applier` …): when it failed for want of
    /// space, counts it, begins an episode if none is under way (and logs that once), and
    /// returns true; any other error returns false, untouched.
    @discardableResult
    public func refused(_ error: any Error, writer: String) -> Bool {
        guard StoreFull.matches(error) else { return false }
        metrics.count(Self.refusalsName, dimensions: [("reason", "disk_full")])
        begin(error, writer: writer, refusals: 1)
        return true
    }

    /// Begins an episode unless one is under way, and adds `refusals` to it; the first says so
    /// in the log.
    private func begin(_ error: any Error, writer: String, refusals: Int) {
        let began = episode.withLock { episode in
            guard episode != nil else {
                episode = Episode(began: .now, refusals: refusals)
                return true
            }
            episode!.refusals += refusals
            return false
        }
        if began {
            metrics.gauge(Self.gaugeName, 1)
            logger.error(
                "the ledger store is full: deliveries and writes are refused with 503 store_full (Stripe and Apple retry them), nothing acknowledged is lost",
                metadata: ["error": "\(StoreFull.reason(error))", "writer": "\(writer)", "hint": "\(hint); billingd resumes on its own once there is room"])
        }
    }

    /// A write committed: ends an episode under way (and logs that once).
    public func wrote() {
        let ended = episode.withLock { episode in
            defer { episode = nil }
            return episode
        }
        guard let ended else { return }
        metrics.gauge(Self.gaugeName, 0)
        logger.info(
            "store writable again",
            metadata: ["full_for": "\(ContinuousClock.now - ended.began)", "refused_writes": "\(ended.refusals)"])
    }

    /// Checks whether the store has room (``LedgerStore/checkSpace()``), ending an episode if it
    /// has; throws the check's error otherwise, beginning an episode when it is for want of space
    /// (a check is no refused write: the counter leaves it out).
    public func checkSpace() async throws {
        do {
            try await store.checkSpace()
        } catch {
            if StoreFull.matches(error) { begin(error, writer: "space_check", refusals: 0) }
            throw error
        }
        wrote()
    }

    /// Reads the store's sizes into `billingd_store_bytes{table}`, `billingd_store_database_bytes`
    /// and `billingd_store_free_bytes`, and its inbox into `billingd_store_events_total{store}` and
    /// `billingd_store_bodies_pruned_total{store}` (events whose body retention pruned; it only
    /// grows); a failure is logged, and the gauges keep their last values.
    public func refreshSizes() async {
        do {
            let sizes = try await store.sizes()
            for (table, bytes) in sizes.tables {
                metrics.gauge("billingd_store_bytes", Double(bytes), dimensions: [("table", table)])
            }
            metrics.gauge("billingd_store_database_bytes", Double(sizes.database))
            metrics.gauge("billingd_store_free_bytes", Double(sizes.free))
            for (name, count) in try await store.retention.eventCounts() {
                metrics.gauge("billingd_store_events_total", Double(count.events), dimensions: [("store", name)])
                metrics.gauge("billingd_store_bodies_pruned_total", Double(count.pruned), dimensions: [("store", name)])
            }
        } catch {
            if !Task.isCancelled {
                logger.warning("store sizes not read; billingd_store_bytes keeps its last values", metadata: ["error": "\(StoreFull.reason(error))"])
            }
        }
    }

    /// What the service does every `interval`: while full, checks for room (a failure keeps the
    /// episode, and the next tick tries again); when `sizesInterval` has passed since the last
    /// read (or at the first tick), reads the store's sizes.
    public func tick() async {
        if isFull { try? await checkSpace() }
        let sizesDue = nextSizes.withLock { next in
            guard ContinuousClock.now >= next else { return false }
            next = .now + sizesInterval
            return true
        }
        if sizesDue { await refreshSizes() }
    }

    /// Ticks every `interval` until graceful shutdown.
    public func run() async throws {
        for try await _ in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
            await tick()
        }
    }
}
