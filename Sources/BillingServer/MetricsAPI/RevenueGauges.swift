import AsyncAlgorithms
import BillingCore
import BillingStore
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Keeps the revenue gauges of `/metrics` current: `billingd_mrr_minor_units{currency,store}`,
/// `billingd_active_subscriptions{store,plan}` and `billingd_active_trials{store}`, as of now.
/// A scrape reads the gauges, never the ledger: they are recomputed when the applier applied
/// changes (``changed()``; a burst of changes is one recomputation at most every
/// ``Configuration/settle``), and on a timer, because time passing alone ends trials and periods.
/// With the console on, each recomputation also keeps the console overview's figures
/// (``ConsoleOverviewFigures``) with the same refreshed index and overview, when they are due.
public final class RevenueGauges: Service, Sendable {
    public struct Configuration: Sendable {
        /// Recomputed at least this often.
        public var interval: Duration = .seconds(60)
        /// At most one recomputation this often, however many changes arrive.
        public var settle: Duration = .seconds(5)

        public init() {}
    }

    private let reader: RevenueMetricsReader
    private let consoleOverview: ConsoleOverviewFigures?
    private let configuration: Configuration
    private let metrics: BillingMetrics
    private let logger: Logger
    private let wakeups: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    /// The label sets set last time, to zero those that are gone; the last error logged.
    private let state = Mutex<(labels: Set<[String]>, lastError: String?)>(([], nil))

    public init(
        reader: RevenueMetricsReader, consoleOverview: ConsoleOverviewFigures? = nil, configuration: Configuration = .init(),
        metrics: BillingMetrics, logger: Logger
    ) {
        self.reader = reader
        self.consoleOverview = consoleOverview
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        (wakeups, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The ledger changed: recompute soon. Cheap, callable from any task.
    public func changed() {
        consoleOverview?.changed()
        continuation.yield()
    }

    /// Runs until a graceful shutdown, which cancels a recomputation in progress rather than
    /// wait for it: the gauges are a view, and a recomputation waiting on an unreachable
    /// database would otherwise hold up the stop.
    public func run() async throws {
        let (continuation, interval, settle) = (self.continuation, configuration.interval, configuration.settle)
        // A visit that finds the console's figures due wakes this loop instead of computing them.
        consoleOverview?.setWake { continuation.yield() }
        defer { consoleOverview?.setWake(nil) }
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Ends with the group: cancelled below once the wake-ups finish.
                    for await _ in AsyncTimerSequence(interval: interval, clock: .continuous) {
                        continuation.yield()
                    }
                }
                continuation.yield()
                // Ends when cancelled.
                for await _ in self.wakeups {
                    await self.recompute(at: Int64(self.reader.configuration.now().timeIntervalSince1970))
                    // Changes that arrive meanwhile wait here, folded into one wake-up.
                    try? await Task.sleep(for: settle)
                }
                group.cancelAll()
            }
        }
    }

    /// Reads the overview at `instant` (refreshing the metrics index) and sets every gauge.
    func recompute(at instant: Int64) async {
        let index: any MetricsIndexReads
        let figures: MetricsOverview
        do {
            index = try await reader.index()
            figures = try await index.overview(at: instant)
        } catch {
            if Task.isCancelled { return }
            let description = "\(error)"
            let isNew = state.withLock { state in
                defer { state.lastError = description }
                return state.lastError != description
            }
            if isNew { logger.warning("revenue gauges not updated", metadata: ["error": "\(description)"]) }
            return
        }
        var values: [[String]: Double] = [:]
        for store in MetricsStore.allCases {
            values[["billingd_active_trials", "store", store.rawValue]] = Double(figures.activeTrials[store])
        }
        for (currency, split) in figures.mrr {
            for store in MetricsStore.allCases where split[store] != 0 {
                values[["billingd_mrr_minor_units", "currency", currency, "store", store.rawValue], default: 0] += Double(split[store])
            }
        }
        for (key, count) in figures.byStoreAndPlan {
            values[["billingd_active_subscriptions", "store", key.store.rawValue, "plan", key.plan ?? "none"], default: 0] += Double(count)
        }
        let gone = state.withLock { state in
            defer {
                state.labels = Set(values.keys)
                state.lastError = nil
            }
            return state.labels.subtracting(values.keys)
        }
        for key in gone { values[key] = 0 }
        for (key, value) in values {
            let dimensions = stride(from: 1, to: key.count - 1, by: 2).map { (key[$0], key[$0 + 1]) }
            metrics.gauge(key[0], value, dimensions: dimensions)
        }
        do {
            try await consoleOverview?.refreshIfDue(index: index, overview: figures, at: instant)
        } catch {
            // The page keeps serving the last figures, and says as of when.
            if !Task.isCancelled { logger.warning("console overview figures not recomputed", metadata: ["error": "\(error)"]) }
        }
    }
}
