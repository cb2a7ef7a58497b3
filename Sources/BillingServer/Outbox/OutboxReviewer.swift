import BillingStore
import Foundation
import Logging
import ServiceLifecycle

/// Announces what time alone changes in users' views: a scheduled cancellation reached, a grace
/// period over, an App Store period that ended with no renewal (Apple's notification late, or
/// never sent, as the sandbox does). The ledger stays as it was; each announced view keeps the
/// time it may next change, and this service resolves those views again when that time comes
/// (``OutboxStore/announceLapsed(now:limit:)``), queuing their events as a ledger change would.
/// It runs in serve whether or not an app webhook URL is set, so that the kept views stay
/// current; a replica on PostgreSQL reviewing a user another just reviewed announces nothing.
public final class OutboxReviewer: Service, Sendable {
    public struct Configuration: Sendable {
        /// The longest wait between looks; sooner when a view falls due sooner.
        public var interval: Duration = .seconds(30)
        /// Users resolved per transaction.
        public var batchSize: Int = 200

        public init() {}
    }

    private let store: any OutboxStore
    private let configuration: Configuration
    private let queued: @Sendable () -> Void
    private let logger: Logger
    /// Says when the store is full: a look then waits for the next (it could not record a view).
    private let space: StoreSpaceWatch?

    /// - Parameters:
    ///   - queued: called after a look that resolved a view (the sender then looks at once).
    ///   - space: told of a look refused for want of space; while it says the store is full, no
    ///     look starts.
    public init(
        store: any OutboxStore, configuration: Configuration = .init(), logger: Logger, space: StoreSpaceWatch? = nil,
        queued: @escaping @Sendable () -> Void
    ) {
        self.store = store
        self.configuration = configuration
        self.queued = queued
        self.logger = logger
        self.space = space
    }

    public func run() async throws {
        // Ends by cancellation (a graceful shutdown cancels the loop), never by an error.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                var wait = self.configuration.interval
                do {
                    // A full store could not record a view: wait for room (the watch) instead.
                    if self.space?.isFull == true {
                        try await Task.sleep(for: wait)
                        continue
                    }
                    try await self.reviewDue()
                    if let next = try await self.store.nextReview() {
                        let until = Duration.milliseconds(max(next - Self.nowMilliseconds(), 0))
                        wait = min(max(until, .seconds(1)), self.configuration.interval)
                    }
                } catch is CancellationError {
                    return
                } catch let error where self.space?.refused(error, writer: "outbox_review") == true {
                    // A full store is logged once per episode by the watch.
                } catch {
                    self.logger.error(
                        "reviewing users' views for changes due to time failed; retrying shortly", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: wait)
            }
        }
    }

    /// Resolves every view that is due, batch after batch; returns how many users were looked at.
    @discardableResult
    public func reviewDue() async throws -> Int {
        var total = 0
        while true {
            let looked = try await store.announceLapsed(now: Self.nowMilliseconds(), limit: configuration.batchSize)
            total += looked
            if looked < configuration.batchSize { break }
        }
        if total > 0 {
            logger.debug("reviewed users' views for changes due to time", metadata: ["users": "\(total)"])
            queued()
        }
        return total
    }

    private static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
