/// Shares one transaction, and so one fsync, among all items that arrive while the previous
/// commit is on disk. Each caller returns only after the commit holding its item, with its own
/// outcome. Webhook deliveries (``GroupCommitter``) and usage records (``UsageLedger``) go
/// through one each.
///
/// Throughput comes from batching, never from weakening durability: `synchronous=FULL` stays.
public actor BatchCommitter<Item: Sendable, Outcome: Sendable> {
    private struct Waiter {
        let item: Item
        let continuation: CheckedContinuation<Outcome, any Error>
    }

    private let commit: @Sendable ([Item]) async throws -> [Outcome]
    private let maximumBatch: Int
    private let didCommit: @Sendable ([Outcome]) -> Void
    private var waiting: [Waiter] = []
    private var isFlushing = false

    /// - Parameters:
    ///   - maximumBatch: the most items in one transaction.
    ///   - commit: writes a batch in one transaction; one outcome per item, in order.
    ///   - didCommit: called after each commit with its outcomes.
    public init(
        maximumBatch: Int = 512, commit: @escaping @Sendable ([Item]) async throws -> [Outcome],
        didCommit: @escaping @Sendable ([Outcome]) -> Void = { _ in }
    ) {
        self.commit = commit
        self.maximumBatch = maximumBatch
        self.didCommit = didCommit
    }

    /// Writes one item durably; returns once its transaction has committed.
    public func submit(_ item: Item) async throws -> Outcome {
        try await withCheckedThrowingContinuation { continuation in
            waiting.append(Waiter(item: item, continuation: continuation))
            if !isFlushing {
                isFlushing = true
                // The flush loop outlives this call only until the queue is empty; every
                // waiter it takes is resumed, with an outcome or the commit's error.
                Task { await self.flush() }
            }
        }
    }

    private func flush() async {
        while !waiting.isEmpty {
            let batch = Array(waiting.prefix(maximumBatch))
            waiting.removeFirst(batch.count)
            do {
                let outcomes = try await commit(batch.map(\.item))
                for (waiter, outcome) in zip(batch, outcomes) { waiter.continuation.resume(returning: outcome) }
                didCommit(outcomes)
            } catch {
                for waiter in batch { waiter.continuation.resume(throwing: error) }
            }
        }
        isFlushing = false
    }
}

/// The group commit of webhook deliveries into the inbox.
public final class GroupCommitter: Sendable {
    private let batcher: BatchCommitter<InboxDelivery, InboxInsertOutcome>

    /// - Parameters:
    ///   - maximumBatch: the most deliveries in one transaction.
    ///   - didCommit: called after each commit with the number of newly stored events (to
    ///     wake the applier).
    public init(
        inbox: any InboxWriting, maximumBatch: Int = 512,
        didCommit: @escaping @Sendable (_ stored: Int) -> Void = { _ in }
    ) {
        batcher = BatchCommitter(maximumBatch: maximumBatch, commit: { try await inbox.insert($0) }) { outcomes in
            let stored = outcomes.count { if case .stored = $0 { true } else { false } }
            if stored > 0 { didCommit(stored) }
        }
    }

    /// Stores one delivery durably; returns once its transaction has committed.
    public func submit(_ delivery: InboxDelivery) async throws -> InboxInsertOutcome {
        try await batcher.submit(delivery)
    }
}
