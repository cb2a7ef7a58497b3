import Logging
import NIOCore
import PostgresNIO
import Synchronization

extension PostgresClient {
    /// One transaction on a pooled connection (``PostgresConnection/transaction(logger:_:)``).
    func transaction<Result: Sendable>(
        logger: Logger, genericPlans: Bool = false, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withConnection { connection in try await connection.transaction(logger: logger, genericPlans: genericPlans, body) }
    }
}

extension PostgresConnection {
    /// One transaction: BEGIN, the body, COMMIT; ROLLBACK when the body throws, and the body's
    /// own error rethrown as thrown (``LeaseHeld``, a refusal), so callers catch the same errors
    /// as on SQLite.
    ///
    /// Not postgres-nio's `withTransaction`, and each step ends when the connection closes
    /// (``untilClosed(_:)``): postgres-nio 1.33 loses a query written to a connection whose
    /// channel has already closed (it writes it with no promise, so its result never comes), and
    /// its caller then waits forever, deaf to cancellation. That is how a transaction whose
    /// connection the server cut (a restart, a failover, a dropped database) used to end: the
    /// ROLLBACK after the body's failed query, or the body's next query after the server closed
    /// the session between two of them, went to the closed channel — holding up a group commit,
    /// an applier pass, the revenue gauges, and then `serve`'s stop.
    ///
    /// `genericPlans`: the transaction's prepared statements run their generic plans. The
    /// group commit's and the drain's statements bind arrays whose length varies with the batch;
    /// PostgreSQL's default then plans them again on every run (a custom plan for a few rows
    /// looks cheaper than the generic one, which assumes ten), and planning was 39 % of the
    /// database's CPU at full ingest (perf, 2026-11-29, docs/benchmarks.md). Their generic plans
    /// (index lookups per key) are the right ones whatever the batch; a plan is made again when
    /// ANALYZE updates a table's statistics. Elsewhere custom plans stay: a range over the
    /// metrics index, say, is planned with its bounds.
    func transaction<Result: Sendable>(
        logger: Logger, genericPlans: Bool = false, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await untilClosed { try await self.query("BEGIN", logger: logger) }
        if genericPlans {
            do {
                try await untilClosed { try await self.query("SET LOCAL plan_cache_mode = force_generic_plan", logger: logger) }
            } catch {
                try? await untilClosed { try await self.query("ROLLBACK", logger: logger) }
                throw error
            }
        }
        let value: Result
        do {
            value = try await untilClosed { try await body(self) }
        } catch {
            // The body's error is the one to report; a failed ROLLBACK (a closed connection)
            // leaves nothing behind, since the server ends an open transaction with its session.
            try? await untilClosed { try await self.query("ROLLBACK", logger: logger) }
            throw error
        }
        try await untilClosed { try await self.query("COMMIT", logger: logger) }
        return value
    }

    /// Runs `work` on this connection and returns its result, or throws
    /// ``PostgresConnectionClosed`` as soon as the connection closes, whether or not postgres-nio
    /// ever answers `work`'s query (see ``transaction(logger:_:)``). `work` runs in a task of its
    /// own, cancelled with the caller; one left waiting on a lost query is left behind.
    func untilClosed<Value: Sendable>(_ work: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let waiting = Mutex<CheckedContinuation<Value, any Error>?>(nil)
        let worker = Mutex<Task<Void, Never>?>(nil)
        let finish: @Sendable (Result<Value, any Error>) -> Void = { result in
            waiting.withLock { continuation in
                continuation?.resume(with: result)
                continuation = nil
            }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                waiting.withLock { $0 = continuation }
                closeFuture.whenComplete { _ in finish(.failure(PostgresConnectionClosed())) }
                let task = Task {
                    do { finish(.success(try await work())) } catch { finish(.failure(error)) }
                }
                worker.withLock { $0 = task }
            }
        } onCancel: {
            worker.withLock { $0 }?.cancel()
        }
    }
}

/// Work on a connection that closed before it ended.
struct PostgresConnectionClosed: Error, CustomStringConvertible {
    var description: String { "the connection to PostgreSQL closed" }
}

extension PostgresConnection {
    /// The first column of the first row, if any.
    func single<Value: PostgresDecodable>(_ query: PostgresQuery, as type: Value.Type, logger: Logger) async throws -> Value? {
        for try await value in try await self.query(query, logger: logger).decode(Value.self) { return value }
        return nil
    }
}

extension PostgresClient {
    /// The first column of the first row, if any.
    func single<Value: PostgresDecodable>(_ query: PostgresQuery, as type: Value.Type, logger: Logger) async throws -> Value? {
        for try await value in try await self.query(query, logger: logger).decode(Value.self) { return value }
        return nil
    }
}
