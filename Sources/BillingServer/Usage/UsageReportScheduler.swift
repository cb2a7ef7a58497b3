import AsyncAlgorithms
import BillingStore
import Logging
import ServiceLifecycle

/// `serve`'s usage report: at start and then every `interval` (BILLINGD_USAGE_REPORT_INTERVAL),
/// reports the usage records that are due (``UsageReporter``).
///
/// A graceful shutdown ends the timer; a run in progress stops sending and records the answers of
/// the calls in flight, so nothing is left half known. A cron `billingd usage report` beside it is
/// fine: whichever comes second skips its turn (the `usage-report` lease).
public struct UsageReportScheduler: Service {
    let reporter: UsageReporter
    let interval: Duration
    let logger: Logger

    public init(reporter: UsageReporter, interval: Duration, logger: Logger) {
        self.reporter = reporter
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        logger.info("usage report scheduler started", metadata: ["interval_s": "\(interval.components.seconds)"])
        await runOnce()
        for try await _ in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
            await runOnce()
        }
    }

    func runOnce() async {
        guard !Task.isShuttingDownGracefully else { return }
        do {
            _ = try await reporter.run(shouldStop: { Task.isShuttingDownGracefully })
        } catch is LeaseHeld {
            logger.info("usage report skipped: another run holds the usage-report lease")
        } catch {
            // The reporter logged the failure with its summary; the next tick tries again.
        }
    }
}
