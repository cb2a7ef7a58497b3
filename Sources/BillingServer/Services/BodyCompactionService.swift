import AsyncAlgorithms
import BillingStore
import Foundation
import Logging
import ServiceLifecycle

/// `serve`'s daily compaction when `BILLINGD_RETENTION_BODIES` is set (issue 38): prunes the
/// bodies the retention allows (``BodyRetentionStore``) and gives the space back, at start and
/// then every `interval`, one log line a run; with several replicas, the one that holds the
/// `body-compaction` lease runs and the others skip their turn. A graceful shutdown ends the timer; a run under way
/// finishes its batch (each batch is its own transaction, so stopping between two loses nothing).
public struct BodyCompactionService: Service {
    let store: any LedgerStore
    let days: Int
    let interval: Duration
    let batchSize: Int
    let space: StoreSpaceWatch?
    let logger: Logger
    /// Unix seconds now.
    let now: @Sendable () -> Int64
    /// Who holds the lease while a run is under way (host:pid).
    let holder: String

    /// The lease that keeps replicas of one PostgreSQL ledger from compacting at once.
    static let leaseName = "body-compaction"
    /// Long enough for a large first compaction; a run past it may overlap another's, harmlessly.
    static let leaseTTL: Int64 = 6 * 3600

    public init(
        store: any LedgerStore, days: Int, interval: Duration = .seconds(86_400), batchSize: Int = 1000, space: StoreSpaceWatch?,
        logger: Logger, holder: String = Reconciler.defaultHolder, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.holder = holder
        self.store = store
        self.days = days
        self.interval = interval
        self.batchSize = batchSize
        self.space = space
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        logger.info("body compaction scheduled", metadata: ["retention_days": "\(days)", "interval_s": "\(interval.components.seconds)"])
        await runOnce()
        for try await _ in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
            await runOnce()
        }
    }

    /// One run: prune, reclaim, log; a failure is logged and the next run tries again. Returns
    /// what was pruned, nil when the run failed or was skipped.
    @discardableResult
    public func runOnce() async -> BodyPruneResult? {
        guard !Task.isShuttingDownGracefully else { return nil }
        // A full store frees no room by pruning first: the deletes themselves need the WAL.
        if let space, space.isFull { return nil }
        let started = ContinuousClock.now
        // One replica a day: the others skip their turn while it holds the lease.
        do {
            try await store.reconcileRuns.acquire(Self.leaseName, holder: holder, ttl: Self.leaseTTL, now: now())
        } catch is LeaseHeld {
            logger.info("body compaction skipped: another replica holds the body-compaction lease")
            return nil
        } catch {
            logger.warning("body compaction failed; the next run tries again", metadata: ["error": "\(StoreFull.reason(error))"])
            return nil
        }
        let result = await compact(started: started)
        try? await store.reconcileRuns.release(Self.leaseName, holder: holder)
        return result
    }

    /// Prunes, reclaims and logs, holding the lease; nil when it failed.
    private func compact(started: ContinuousClock.Instant) async -> BodyPruneResult? {
        do {
            let result = try await store.retention.pruneBodies(
                olderThan: BodyRetentionWindow.cutoff(days: days, now: now()), batchSize: batchSize, dryRun: false, progress: { _ in })
            // Bodies a billingd older than their compression stored (after the first run, only the
            // few that compressing would not shrink, read again and left as they are).
            let compressed = try await store.retention.compressBodies(batchSize: batchSize, dryRun: false, progress: { _ in })
            // Objects' raw JSON an older billingd stored (verbatim, or beside its event's body):
            // once, then this reads nothing.
            let objects = try await store.retention.compressLedgerJSON(batchSize: batchSize, dryRun: false, progress: { _ in })
            let changed = result.bodies > 0 || compressed.compressed > 0 || objects.compressed > 0 || objects.inEventBodies > 0
            if changed { try await store.retention.reclaimSpace(full: false) }
            logger.info(
                "bodies compacted",
                metadata: [
                    "bodies_pruned": "\(result.bodies)", "bytes_pruned": "\(result.bytes)", "retention_days": "\(days)",
                    "bodies_compressed": "\(compressed.compressed)",
                    "bytes_saved": "\(compressed.bytesBefore - compressed.bytesAfter)",
                    "objects_compressed": "\(objects.compressed)", "objects_in_event_bodies": "\(objects.inEventBodies)",
                    "object_bytes_saved": "\(objects.bytesBefore - objects.bytesAfter)",
                    "duration_ms": "\((ContinuousClock.now - started).nanoseconds / 1_000_000)",
                ])
            if changed { await space?.refreshSizes() }
            return result
        } catch {
            if StoreFull.matches(error) { space?.refused(error, writer: "compaction") }
            logger.warning("body compaction failed; the next run tries again", metadata: ["error": "\(StoreFull.reason(error))"])
            return nil
        }
    }
}
