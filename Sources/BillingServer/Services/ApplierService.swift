import BillingStore
import Foundation
import Logging
import ServiceLifecycle

/// The long-running applier. Live deliveries are applied in the group commit that stores them;
/// this service applies what is left queued: deliveries that could not be applied there,
/// events reconcile recovered, and retries as they come due (it looks every second). It never
/// holds up acknowledgement.
public final class ApplierService: Service, Sendable {
    private let applier: any EventApplier
    /// The applier this service drives (reconcile applies recovered events through it).
    public var inboxApplier: any EventApplier { applier }
    private let inbox: any EventInbox
    private let metrics: BillingMetrics
    private let logger: Logger
    private let wakeups: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    /// Told after a pass that applied events (the revenue gauges recompute).
    private let didApply: @Sendable () -> Void
    /// Says when the store is full; the applier then waits for room instead of trying each second.
    private let space: StoreSpaceWatch?

    /// - Parameter space: told of a pass refused for want of space; while it says the store is
    ///   full, no pass starts (the events stay queued, their tries not counted).
    public init(
        applier: any EventApplier, inbox: any EventInbox, metrics: BillingMetrics, logger: Logger, space: StoreSpaceWatch? = nil,
        didApply: @escaping @Sendable () -> Void = {}
    ) {
        self.applier = applier
        self.inbox = inbox
        self.metrics = metrics
        self.logger = logger
        self.space = space
        self.didApply = didApply
        (wakeups, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks for a drain soon; cheap, callable from any task (the group committer calls it).
    public func wake() {
        continuation.yield()
    }

    public func run() async throws {
        let continuation = self.continuation
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(1))
                        continuation.yield()
                    }
                }
                continuation.yield()
                // Inbox depth counts the queue; once a second is enough for a gauge.
                var depthRecordedAt = ContinuousClock.now - .seconds(2)
                for await _ in wakeups {
                    // A full store would refuse the pass: the watch says when there is room.
                    if space?.isFull == true { continue }
                    await drainOnce()
                    if ContinuousClock.now - depthRecordedAt >= .seconds(1) {
                        depthRecordedAt = .now
                        do { try await recordDepth() } catch {
                            // A stop that cut the wait short is no failure to report.
                            if !Task.isCancelled { logger.error("inbox depth not recorded", metadata: ["error": "\(error)"]) }
                        }
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            // The pass in progress finishes; no new one starts.
            continuation.finish()
        }
    }

    /// Counts what a group commit applied, and wakes the applier for what it left queued.
    public func ingested(_ ingested: IngestResult) {
        record(ingested.pass)
        if ingested.queued > 0 { wake() }
    }

    private func record(_ pass: ApplyPass) {
        if pass.applied > 0 { didApply() }
        metrics.count("billingd_events_applied_total", by: pass.applied, dimensions: [("effect", "applied")])
        metrics.count("billingd_events_applied_total", by: pass.stale, dimensions: [("effect", "stale")])
        metrics.count("billingd_events_applied_total", by: pass.ignored, dimensions: [("effect", "ignored")])
        metrics.count("billingd_events_failed_total", by: pass.failed + pass.dead)
        for (version, count) in pass.apiVersions {
            metrics.count("billingd_events_other_api_version_total", by: count, dimensions: [("api_version", version)])
        }
    }

    private func drainOnce() async {
        let started = ContinuousClock.now
        do {
            let pass = try await applier.drain()
            if pass.processed > 0 {
                metrics.time("billingd_apply_batch_seconds", ContinuousClock.now - started)
                record(pass)
                if pass.failed + pass.dead > 0 {
                    logger.warning(
                        "events failed to apply",
                        metadata: ["failed": "\(pass.failed)", "dead": "\(pass.dead)", "hint": "billingd events --status failed"])
                }
                logger.debug("applied events", metadata: ["processed": "\(pass.processed)", "stale": "\(pass.stale)"])
            }
        } catch {
            // A full store is logged once per episode by the watch.
            if space?.refused(error, writer: "applier") == true { return }
            if !Task.isCancelled { logger.error("applier pass failed; retrying shortly", metadata: ["error": "\(error)"]) }
        }
    }

    private func recordDepth() async throws {
        let depth = try await inbox.depth()
        for (status, count) in depth.counts {
            metrics.gauge("billingd_inbox_events", Double(count), dimensions: [("status", status.rawValue)])
        }
        let age = depth.oldestPendingReceivedAt.map { max(0, Date().timeIntervalSince1970 - Double($0) / 1000) } ?? 0
        metrics.gauge("billingd_inbox_oldest_pending_age_seconds", age)
    }
}
