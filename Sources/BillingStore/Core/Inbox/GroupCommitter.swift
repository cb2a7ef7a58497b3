import BillingCore
import Foundation

/// Shares one transaction, and so one fsync, among all items that arrive while the previous
/// commit is on disk. Each caller returns only after the commit holding its item, with its own
/// outcome. Webhook deliveries (``GroupCommitter``) and usage records (``UsageStore``) go
/// through one each.
///
/// Throughput comes from batching, never from weakening durability: `synchronous=FULL` stays.
///
/// With `concurrentCommits` above one, that many batches may be committing at once, each
/// formed from what waits when a commit slot frees: for a database whose commits are bounded by
/// round trips rather than by one writer (PostgreSQL), so that one batch's statements overlap
/// another's. On SQLite's one writer a second slot would only queue behind the first.
public actor BatchCommitter<Item: Sendable, Outcome: Sendable> {
    private struct Waiter {
        let item: Item
        let continuation: CheckedContinuation<Outcome, any Error>
    }

    private let commit: @Sendable ([Item]) async throws -> [Outcome]
    private let maximumBatch: Int
    private let concurrentCommits: Int
    private let commitDeadline: Duration
    private let didCommit: @Sendable ([Outcome]) -> Void
    private var waiting: [Waiter] = []
    /// Flush loops running, at most `concurrentCommits`.
    private var flushing = 0

    /// - Parameters:
    ///   - maximumBatch: the most items in one transaction.
    ///   - concurrentCommits: the most transactions committing at once (at least one).
    ///   - commitDeadline: how long one commit may take before its callers are failed with
    ///     ``DeadlinePassed`` and the next batch goes on: a commit on a database connection that
    ///     died without the driver noticing (seen with PostgreSQL stopped mid-transaction) would
    ///     otherwise stop every later one. The late commit may still land: an item it stored is a
    ///     duplicate when it is sent again.
    ///   - commit: writes a batch in one transaction; one outcome per item, in order.
    ///   - didCommit: called after each commit with its outcomes.
    public init(
        maximumBatch: Int = 512, concurrentCommits: Int = 1, commitDeadline: Duration = .seconds(120),
        commit: @escaping @Sendable ([Item]) async throws -> [Outcome],
        didCommit: @escaping @Sendable ([Outcome]) -> Void = { _ in }
    ) {
        self.commit = commit
        self.maximumBatch = maximumBatch
        self.concurrentCommits = max(1, concurrentCommits)
        self.commitDeadline = commitDeadline
        self.didCommit = didCommit
    }

    /// Writes one item durably; returns once its transaction has committed.
    public func submit(_ item: Item) async throws -> Outcome {
        try await withCheckedThrowingContinuation { continuation in
            waiting.append(Waiter(item: item, continuation: continuation))
            if flushing < concurrentCommits {
                flushing += 1
                // A flush loop outlives this call only until the queue is empty; every waiter
                // it takes is resumed, with an outcome or the commit's error.
                Task { await self.flush() }
            }
        }
    }

    private func flush() async {
        while !waiting.isEmpty {
            let batch = Array(waiting.prefix(maximumBatch))
            waiting.removeFirst(batch.count)
            do {
                let items = batch.map(\.item)
                let outcomes = try await withDeadline(commitDeadline) { [commit] in try await commit(items) }
                for (waiter, outcome) in zip(batch, outcomes) { waiter.continuation.resume(returning: outcome) }
                didCommit(outcomes)
            } catch {
                for waiter in batch { waiter.continuation.resume(throwing: error) }
            }
        }
        flushing -= 1
    }
}

/// The group commit of deliveries into the inbox: each new delivery is applied to the ledger
/// in the transaction that stores it (see ``EventApplier/ingest(_:now:)``), so a 2xx means
/// stored and applied, with one fsync for the whole group.
public final class GroupCommitter: Sendable {
    private let applier: any EventApplier
    private let batcher: BatchCommitter<PreparedDelivery, InboxInsertOutcome>

    /// - Parameters:
    ///   - maximumBatch: the most deliveries in one transaction.
    ///   - now: the clock of `processedAt` (Unix ms).
    ///   - didCommit: called after each commit with what it stored and applied (for metrics,
    ///     and to wake the applier for deliveries left to it).
    public init(
        applier: any EventApplier, maximumBatch: Int = 512,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
        didCommit: @escaping @Sendable (IngestResult) -> Void = { _ in }
    ) {
        self.applier = applier
        batcher = BatchCommitter(maximumBatch: maximumBatch, concurrentCommits: applier.concurrentCommits) { batch in
            let ingested = try await applier.ingest(batch, now: now())
            didCommit(ingested)
            return ingested.outcomes
        }
    }

    /// Stores one delivery durably and applies it; returns once its transaction has committed.
    /// Decoding happens here, on the caller's task, before the delivery joins a group.
    public func submit(_ delivery: InboxDelivery) async throws -> InboxInsertOutcome {
        try await batcher.submit(applier.prepare(delivery))
    }

    /// Decodes a delivery on the caller's task, for a caller that looks at the outcome
    /// (``PreparedDelivery/decodingFailure``) before it submits the delivery.
    public func prepare(_ delivery: InboxDelivery) -> PreparedDelivery {
        applier.prepare(delivery)
    }

    /// Stores one prepared delivery durably and applies it; returns once its transaction has committed.
    public func submit(_ prepared: PreparedDelivery) async throws -> InboxInsertOutcome {
        try await batcher.submit(prepared)
    }
}
