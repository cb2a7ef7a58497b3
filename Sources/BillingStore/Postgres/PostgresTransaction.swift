import Logging
import PostgresNIO

extension PostgresClient {
    /// One transaction on a pooled connection, as `withTransaction`, but rethrowing the body's
    /// own error as thrown (``LeaseHeld``, a refusal) rather than wrapped in postgres-nio's
    /// `PostgresTransactionError`, so callers catch the same errors as on SQLite. The transaction
    /// is rolled back either way.
    func transaction<Result: Sendable>(
        logger: Logger, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        do {
            return try await withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PostgresTransactionError {
            if let thrown = error.closureError, error.rollbackError == nil { throw thrown }
            throw error
        }
    }
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
