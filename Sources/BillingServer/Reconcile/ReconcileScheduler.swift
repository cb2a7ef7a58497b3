import BillingStore
import Foundation
import Logging
import ServiceLifecycle

/// `serve`'s scheduler: a missed-events sweep every few minutes and a full reconcile daily (both
/// settings). Both go through the reconcile lease, so a cron job beside it is fine: whichever
/// comes second skips its turn. Schedules follow the run records in the database, so a restart
/// does not reset them and a cron run counts as a run. Every minute it also publishes the latest
/// runs (its own and cron's) as metrics.
public final class ReconcileScheduler: Service, Sendable {
    public struct Configuration: Sendable {
        /// Missed-events sweep; nil = off.
        public var sweepInterval: Duration?
        /// Full reconcile; nil = off.
        public var reconcileInterval: Duration?
        /// First sweep after start-up.
        public var initialDelay: Duration = .seconds(15)
        /// How often the schedule and the metrics are looked at.
        public var tick: Duration = .seconds(30)

        public init(sweepInterval: Duration?, reconcileInterval: Duration?) {
            self.sweepInterval = sweepInterval
            self.reconcileInterval = reconcileInterval
        }
    }

    private let reconciler: Reconciler?
    private let appStore: [AppStoreReconciler]
    private let runs: any ReconcileRunStore
    private let configuration: Configuration
    private let metrics: BillingMetrics
    private let logger: Logger

    /// - Parameters:
    ///   - reconciler: Stripe's; nil without a Stripe key.
    ///   - appStore: one per App Store environment with an API, run on the full reconcile's interval.
    public init(
        reconciler: Reconciler?, appStore: [AppStoreReconciler] = [], store: any LedgerStore, configuration: Configuration,
        metrics: BillingMetrics, logger: Logger
    ) {
        self.reconciler = reconciler
        self.appStore = appStore
        self.runs = store.reconcileRuns
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
    }

    public func run() async throws {
        logger.info(
            "reconcile scheduler started",
            metadata: [
                "events_sweep": "\(configuration.sweepInterval.map { "every \($0.components.seconds) s" } ?? "off")",
                "full_reconcile": "\(configuration.reconcileInterval.map { "every \($0.components.seconds) s" } ?? "off")",
            ])
        // Cancellation on graceful shutdown ends the sleep, and a run in progress stops at its
        // next page and records itself as failed ("cancelled").
        try? await cancelWhenGracefulShutdown {
            try? await Task.sleep(for: self.configuration.initialDelay)
            while !Task.isCancelled {
                await self.tick()
                try? await Task.sleep(for: self.configuration.tick)
            }
        }
    }

    /// Runs what is due, then publishes the latest runs.
    func tick() async {
        let now = Int64(Date().timeIntervalSince1970)
        if reconciler != nil {
            if let interval = configuration.reconcileInterval, await isDue(mode: "full", interval: interval, now: now) {
                await runOnce(mode: "full")
            } else if let interval = configuration.sweepInterval, await isDue(mode: "events", interval: interval, now: now) {
                await runOnce(mode: "events")
            }
        }
        if let interval = configuration.reconcileInterval {
            for appStoreReconciler in appStore
            where await isDue(mode: AppStoreReconciler.mode(appStoreReconciler.environment), interval: interval, now: now) {
                do {
                    _ = try await appStoreReconciler.run(AppStoreReconciler.Options())
                } catch is LeaseHeld {
                    logger.info("appstore reconcile skipped: another run holds the lease", metadata: ["environment": "\(appStoreReconciler.environment)"])
                } catch {
                    // Logged with its report by AppStoreReconciler.
                }
            }
        }
        await publish()
    }

    /// Due when the latest completed run of the mode (a full run also sweeps events) is older
    /// than the interval.
    private func isDue(mode: String, interval: Duration, now: Int64) async -> Bool {
        do {
            var last = try await runs.latest(mode: mode).completed?.finishedAt ?? 0
            if mode == "events", let full = try await runs.latest(mode: "full").completed?.finishedAt {
                last = max(last, full)
            }
            return now - last >= interval.components.seconds
        } catch {
            logger.error("reconcile schedule not read", metadata: ["error": "\(error)"])
            return false
        }
    }

    private func runOnce(mode: String) async {
        guard let reconciler else { return }
        var options = Reconciler.Options()
        options.mode = mode
        if mode == "events" { options.kinds = [.events] }
        do {
            _ = try await reconciler.run(options)
        } catch is LeaseHeld {
            logger.info("reconcile skipped: another run holds the lease", metadata: ["mode": "\(mode)"])
        } catch {
            // Reconciler has logged the failure with its report; the next tick tries again
            // after the interval of the last completed run, i.e. soon.
        }
    }

    /// The latest runs as gauges: when each mode last completed, how the last run went.
    func publish() async {
        do {
            for mode in ["full", "events"] + appStore.map({ AppStoreReconciler.mode($0.environment) }) {
                let latest = try await runs.latest(mode: mode)
                if let completed = latest.completed, let finished = completed.finishedAt {
                    metrics.gauge("billingd_reconcile_last_success_timestamp_seconds", Double(finished), dimensions: [("mode", mode)])
                    metrics.gauge("billingd_reconcile_last_duration_seconds", Double(finished - completed.startedAt), dimensions: [("mode", mode)])
                    metrics.gauge("billingd_reconcile_last_drift_objects", Double(completed.drift), dimensions: [("mode", mode)])
                    metrics.gauge("billingd_reconcile_last_repaired_objects", Double(completed.repaired), dimensions: [("mode", mode)])
                    metrics.gauge("billingd_reconcile_last_recovered_events", Double(completed.recoveredEvents), dimensions: [("mode", mode)])
                }
                if let finished = latest.finished {
                    metrics.gauge("billingd_reconcile_last_run_failed", finished.outcome == .completed ? 0 : 1, dimensions: [("mode", mode)])
                }
            }
            if let reconciler, let cursor = try await runs.eventCursor(account: "", livemode: reconciler.livemode) {
                metrics.gauge("billingd_reconcile_events_cursor_age_seconds", Double(max(0, Int64(Date().timeIntervalSince1970) - cursor.walkedAt)))
            }
        } catch {
            logger.error("reconcile metrics not published", metadata: ["error": "\(error)"])
        }
    }
}
