/// Recognises a write refused because the store has no room left, whichever backend refused it:
/// SQLite's `SQLITE_FULL` (a full disk, or the `max_page_count` limit; SQLite's own VFS turns a
/// write that fails with `ENOSPC` into it) and PostgreSQL's SQLSTATE `53100` (`disk_full`).
///
/// Such a write is not the data's fault and not for good: the callers answer it 503 with
/// `Retry-After`, keep what they hold for a later try, and never count it against an event's
/// tries (an event must not die of a full disk). The backends' halves are
/// ``SQLiteDatabase/isFull(_:)`` and ``PostgresStoreError/isDiskFull(_:)``.
public enum StoreFull {
    /// Whether `error` is a write the store refused for want of space.
    public static func matches(_ error: any Error) -> Bool {
        SQLiteDatabase.isFull(error) || PostgresStoreError.isDiskFull(error)
    }

    /// What the backend said, for a log line: SQLite's code and message without the statement,
    /// PostgreSQL's message and SQLSTATE (``PostgresStoreError/reason(_:)``), never a bound value.
    public static func reason(_ error: any Error) -> String {
        SQLiteDatabase.reason(error) ?? PostgresStoreError.reason(error)
    }
}
