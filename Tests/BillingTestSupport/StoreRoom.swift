import BillingStore
import GRDB
import PostgresNIO

/// Makes a store full, and gives it room again, the way each backend can in a test: SQLite at its
/// `max_page_count` (SQLite answers `SQLITE_FULL`, exactly as on a full disk); PostgreSQL through
/// triggers that raise SQLSTATE 53100 `disk_full`, the error of a data file that cannot grow (a
/// real full disk cannot be made here), on the inbox's inserts, the ledger's subscriptions and the
/// space check's row.
public struct StoreRoom: Sendable {
    public let fill: @Sendable () async throws -> Void
    public let makeRoom: @Sendable () async throws -> Void

    /// SQLite: no page beyond those the file has, and the free list's pages taken by filler rows,
    /// so that the next page a write needs is one too many. `max_page_count` belongs to a
    /// connection: the pool's one writer connection makes every write.
    public static func sqlite(_ database: SQLiteDatabase) -> StoreRoom {
        StoreRoom(
            fill: {
                try await database.writer.writeWithoutTransaction { db in
                    let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                    let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
                    try db.execute(sql: "PRAGMA max_page_count = \(pages)")
                    for index in 0... {
                        do {
                            try db.execute(
                                sql: "INSERT INTO meta(key, value) VALUES (?, zeroblob(?))", arguments: ["test_fill_\(index)", pageSize])
                        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL {
                            break
                        }
                    }
                }
            },
            makeRoom: {
                try await database.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA max_page_count = 1073741823") }
            })
    }

    /// PostgreSQL: `disk_full` raised by triggers, dropped again to make room.
    public static func postgres(_ store: PostgresLedgerStore) -> StoreRoom {
        let execute: @Sendable (String) async throws -> Void = { sql in
            // The test's own statements.
            try await store.client.query(PostgresQuery(unsafeSQL: sql), logger: PostgresTestDatabase.logger)
        }
        return StoreRoom(
            fill: {
                try await execute(
                    """
                    CREATE OR REPLACE FUNCTION test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$
                    """)
                try await execute("CREATE TRIGGER test_disk_full BEFORE INSERT ON inboxEvent FOR EACH ROW EXECUTE FUNCTION test_disk_full()")
                try await execute("CREATE TRIGGER test_disk_full BEFORE INSERT ON subscription FOR EACH ROW EXECUTE FUNCTION test_disk_full()")
                try await execute(
                    "CREATE TRIGGER test_disk_full BEFORE INSERT ON meta FOR EACH ROW WHEN (NEW.key = 'space_checked') EXECUTE FUNCTION test_disk_full()")
            },
            makeRoom: {
                for table in ["inboxEvent", "subscription", "meta"] { try await execute("DROP TRIGGER test_disk_full ON \(table)") }
            })
    }
}
