/// Shares one transaction, and so one fsync, among all deliveries that arrive while the
/// previous commit is on disk. Each caller returns only after the commit holding its delivery.
///
/// Throughput comes from batching, never from weakening durability: `synchronous=FULL` stays.
public actor GroupCommitter {
    private struct Waiter {
        let delivery: InboxDelivery
        let continuation: CheckedContinuation<InboxInsertOutcome, any Error>
    }

    private let inbox: any InboxWriting
    private let maximumBatch: Int
    private let didCommit: @Sendable (_ stored: Int) -> Void
    private var waiting: [Waiter] = []
    private var isFlushing = false

    /// - Parameters:
    ///   - maximumBatch: the most deliveries in one transaction.
    ///   - didCommit: called after each commit with the number of newly stored events (to
    ///     wake the applier).
    public init(
        inbox: any InboxWriting, maximumBatch: Int = 512,
        didCommit: @escaping @Sendable (_ stored: Int) -> Void = { _ in }
    ) {
        self.inbox = inbox
        self.maximumBatch = maximumBatch
        self.didCommit = didCommit
    }

    /// Stores one delivery durably; returns once its transaction has committed.
    public func submit(_ delivery: InboxDelivery) async throws -> InboxInsertOutcome {
        try await withCheckedThrowingContinuation { continuation in
            waiting.append(Waiter(delivery: delivery, continuation: continuation))
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
                let outcomes = try await inbox.insert(batch.map(\.delivery))
                var stored = 0
                for (waiter, outcome) in zip(batch, outcomes) {
                    if case .stored = outcome { stored += 1 }
                    waiter.continuation.resume(returning: outcome)
                }
                if stored > 0 { didCommit(stored) }
            } catch {
                for waiter in batch { waiter.continuation.resume(throwing: error) }
            }
        }
        isFlushing = false
    }
}
