import AsyncAlgorithms
import Logging
import ServiceLifecycle
import Synchronization

/// Logs rejected requests without letting a flood of them flood the log (issue 39): the first
/// rejection of a cause is logged in full; the next ones are only counted, and each `interval`
/// one summary line per cause says how many there were. A cause quiet for a whole interval is
/// forgotten, so its next rejection is logged in full again: a cause writes at most two lines an
/// interval, whatever the rate. The totals are the callers' metrics.
///
/// A cause is a fixed message and a reason from billingd's own codes (never request data), so
/// the causes are few.
public final class RejectionLog: Service, Sendable {
    /// Rejections of one cause since its last line.
    private struct Tally {
        let message: String
        let reason: String
        var suppressed = 0
    }

    private let interval: Duration
    private let logger: Logger
    private let tallies = Mutex<[String: Tally]>([:])

    /// - Parameters:
    ///   - interval: how often the summary lines are written.
    ///   - logger: where the summary lines go.
    public init(interval: Duration = .seconds(10), logger: Logger) {
        self.interval = interval
        self.logger = logger
    }

    /// A request was rejected for `reason`: logs `message` at notice level with `metadata` to
    /// `logger` (the request's) if it is the cause's first rejection since its last line, and
    /// counts it otherwise.
    public func notice(_ message: String, reason: String, metadata: Logger.Metadata, to logger: Logger) {
        let cause = "\(message)\u{0}\(reason)"
        let first = tallies.withLock { tallies in
            guard tallies[cause] != nil else {
                tallies[cause] = Tally(message: message, reason: reason)
                return true
            }
            tallies[cause]!.suppressed += 1
            return false
        }
        guard first else { return }
        var metadata = metadata
        metadata["reason"] = "\(reason)"
        logger.notice("\(message)", metadata: metadata)
    }

    /// Writes one line for each cause with rejections not logged, saying how many, and forgets
    /// the causes that had none.
    public func flush() {
        let summaries = tallies.withLock { tallies in
            var summaries: [Tally] = []
            for (cause, tally) in tallies {
                if tally.suppressed > 0 {
                    summaries.append(tally)
                    tallies[cause]?.suppressed = 0
                } else {
                    tallies[cause] = nil
                }
            }
            return summaries
        }
        for tally in summaries.sorted(by: { ($0.message, $0.reason) < ($1.message, $1.reason) }) {
            logger.notice(
                "\(tally.message): \(tally.suppressed) more not logged",
                metadata: ["reason": "\(tally.reason)", "suppressed": "\(tally.suppressed)", "interval": "\(interval)"])
        }
    }

    /// Writes the summaries every `interval` until graceful shutdown, then once more.
    public func run() async throws {
        for try await _ in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
            flush()
        }
        flush()
    }
}
