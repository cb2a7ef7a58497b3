import Logging
import PostgresNIO
import Synchronization

/// billingd's statements prepared once per pooled connection, so that the server parses and
/// plans each of them once per connection rather than on every execution.
///
/// Measured before this (10,000 events, `pg_stat_statements` with `track_planning`): PostgreSQL
/// spent as long planning billingd's statements as running them. The ledger's statements are
/// spelled at run time (a table's name, its row's columns), so there is no Swift type per
/// statement as postgres-nio's ``PostgresPreparedStatement`` expects; instead ``names`` gives each
/// distinct text a name for the life of the process, and ``Statement`` hands postgres-nio that
/// name and text through a task-local while `execute` reads them (it does so before its first
/// suspension, in the calling task).
///
/// Only statements from a bounded set of texts are prepared; the registry stops naming new texts
/// past ``PreparedNames/limit`` (every further text runs unprepared, as before), so neither
/// billingd's memory nor a server session's grows without bound. A statement whose result columns
/// could change under a migration (`SELECT *`) must not be prepared: the server would refuse a
/// cached plan whose row type changed.
///
/// Behind PgBouncer in transaction pooling mode this needs PgBouncer 1.21 or later with
/// `max_prepared_statements` above zero (it tracks protocol-level prepared statements per server
/// connection); see docs/postgresql.md.
enum PostgresPrepared {
    /// The process's names of prepared statements.
    static let names = PreparedNames(limit: 1_000)

    /// The prepared statement's text and name while postgres-nio's `execute` reads them.
    struct Text: Sendable {
        var name: String
        var sql: String
    }

    /// A statement of billingd's whose text is the task-local ``current`` (see the type's note).
    struct Statement: PostgresPreparedStatement {
        typealias Row = PostgresRow
        @TaskLocal static var current = Text(name: "", sql: "")
        static var name: String { current.name }
        static var sql: String { current.sql }

        let bindings: PostgresBindings
        func makeBindings() -> PostgresBindings { bindings }
        func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
    }
}

/// Names for statement texts. A name whose preparation failed, or whose plan the server can no
/// longer use, is retired (the next use prepares a new one), since postgres-nio keeps a failed
/// preparation's error for its name on that connection; an error of the execution itself (a
/// conflict, a deadlock) leaves the name as it is.
final class PreparedNames: Sendable {
    let limit: Int
    private struct State {
        var names: [String: String] = [:]
        var issued = 0
    }
    private let state = Mutex(State())

    init(limit: Int) { self.limit = limit }

    /// The name of a text; nil once ``limit`` texts are named.
    func name(for key: String) -> String? {
        state.withLock { state in
            if let name = state.names[key] { return name }
            guard state.names.count < limit else { return nil }
            state.issued += 1
            let name = "billingd_\(state.issued)"
            state.names[key] = name
            return name
        }
    }

    /// Gives a text a new name on its next use, on every connection, unless it was given one
    /// since `name` (by another connection's failure).
    func retire(_ key: String, name: String) {
        state.withLock { state in
            if state.names[key] == name { state.names.removeValue(forKey: key) }
        }
    }

    /// Whether an error of a prepared statement can be its preparation's, or a plan the server
    /// refuses to run again: a syntax or access rule error (class 42, e.g. a table a migration
    /// has not created yet), `0A000` (a cached plan whose row type changed), a transaction
    /// already aborted (`25P02`), or a Parse cancelled or timed out waiting for a lock.
    static func retires(_ error: PSQLError) -> Bool {
        guard error.code == .server, let state = error.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("42") || ["0A000", "25P02", "57014", "55P03"].contains(state)
    }
}

extension PostgresConnection {
    /// Runs a statement spelled with `?` placeholders (shared with SQLite), binding `values` in
    /// order, prepared on this connection (see ``PostgresPrepared``): for statements whose text
    /// comes from a bounded set and names its result columns. As for
    /// ``prepared(_:logger:)``, a value that can be NULL must stand where a column gives its type.
    @discardableResult
    package func run(_ sql: String, _ values: [LedgerValue], logger: Logger) async throws -> PostgresRows {
        var binds = PostgresBindings(capacity: values.count)
        for value in values { binds.append(value) }
        return try await prepared(PostgresQuery(unsafeSQL: numberedPlaceholders(sql), binds: binds), logger: logger)
    }

    /// Runs a query prepared on this connection; its text must come from a bounded set. The
    /// parameters' types are fixed by the first execution: a parameter bound NULL then takes the
    /// type the statement gives it, so a value that can be NULL must stand where a column gives
    /// its type (a value inserted or assigned, compared with a column, a CASE's other branch).
    /// The columns' types (`bigint`, `boolean`, `text`, `bytea`) are those Swift's values bind
    /// as, so a later execution binding a value fits.
    @discardableResult
    package func prepared(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRows {
        let key = query.sql
        guard let name = PostgresPrepared.names.name(for: key) else {
            return PostgresRows(try await self.query(query, logger: logger))
        }
        do {
            let rows = try await PostgresPrepared.Statement.$current.withValue(PostgresPrepared.Text(name: name, sql: query.sql)) {
                try await execute(PostgresPrepared.Statement(bindings: query.binds), logger: logger)
            }
            return PostgresRows(rows)
        } catch let error as PSQLError where PreparedNames.retires(error) {
            PostgresPrepared.names.retire(key, name: name)
            throw error
        }
    }

    /// Runs a statement spelled with `?` placeholders once, unprepared: for one-off statements
    /// and those whose result columns can change (`SELECT *`).
    @discardableResult
    package func runOnce(_ sql: String, _ values: [LedgerValue], logger: Logger) async throws -> PostgresRows {
        var binds = PostgresBindings(capacity: values.count)
        for value in values { binds.append(value) }
        return PostgresRows(try await query(PostgresQuery(unsafeSQL: numberedPlaceholders(sql), binds: binds), logger: logger))
    }
}

/// The rows of a statement, prepared or not.
package struct PostgresRows: AsyncSequence, Sendable {
    package typealias Element = PostgresRow
    private let rows: AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow>

    init(_ rows: AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow>) { self.rows = rows }
    init(_ rows: PostgresRowSequence) { self.rows = rows.map { $0 } }

    package func makeAsyncIterator() -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow>.AsyncIterator {
        rows.makeAsyncIterator()
    }
}
