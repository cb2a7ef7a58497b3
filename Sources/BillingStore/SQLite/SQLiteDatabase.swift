#if canImport(Glibc)
import Glibc
#endif
import Foundation
import GRDB
import Synchronization

/// The ledger's SQLite database: one `DatabasePool` in WAL mode with `synchronous=FULL`, so a
/// committed transaction survives power loss, and migrations applied at open.
public struct SQLiteDatabase: Sendable {
    /// The GRDB writer behind every store in this module. Package, not public: nothing above
    /// BillingStore may spell SQL; the package's tests use it for raw-SQL assertions.
    package let writer: any DatabaseWriter
    /// Where the database lives; nil for an in-memory database.
    public let path: String?
    /// Set by the first ``close()``: GRDB crashes on a pool closed twice.
    private let closed = ClosedFlag()
    /// How this handle's ledger transactions announce changes of users' views to the outbox;
    /// nil announces nothing (see ``announcing(_:)``).
    package private(set) var outbox: OutboxPolicy?

    /// The same database, its ledger transactions announcing under `policy` (nil: not at all).
    public func announcing(_ policy: OutboxPolicy?) -> SQLiteDatabase {
        var copy = self
        copy.outbox = policy
        return copy
    }

    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    /// - Parameter busyTimeout: how long a writer waits for another process (a cron
    ///   `reconcile` beside `serve`) before failing.
    public static func open(path: String, busyTimeout: TimeInterval = 10) throws -> SQLiteDatabase {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            throw LedgerDatabaseError.directoryMissing(directory)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.label = "billingd"
        configuration.prepareDatabase { db in
            // A 32 MiB page cache (SQLite's default is 2 MiB): event bodies and raw objects
            // span overflow pages that the applier reads and writes in bulk.
            // Readers keep SQLite's default: a large cache on each of the pool's readers
            // tripled peak memory under load.
            if !db.configuration.readonly { try db.execute(sql: "PRAGMA cache_size = -32768") }
            // A new ledger keeps the pages retention frees apart (`auto_vacuum=INCREMENTAL`), so that
            // `billingd compact` gives them back to the file system with `PRAGMA incremental_vacuum`.
            // The mode can only be chosen before the first page is written: here, before WAL mode
            // and the migrations write any. An older ledger turns it on with `compact --full`.
            if !db.configuration.readonly, try Int.fetchOne(db, sql: "PRAGMA page_count") == 0 {
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            }
        }
        if let reason = createPrivately(path) {
            throw LedgerDatabaseError.cannotOpen(path: path, reason: reason)
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw LedgerDatabaseError.cannotOpen(path: path, reason: String(describing: error))
        }
        // GRDB sets synchronous=NORMAL when it enables WAL; a 2xx to Stripe promises more than
        // that, so the writer connection is switched back to FULL: every commit is fsynced.
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let database = SQLiteDatabase(writer: pool, path: path)
        try database.migrate()
        return database
    }

    /// Creates `path` empty with mode 0600 when it does not exist yet (SQLite takes an empty file
    /// for an empty database), so that the ledger, which holds the local webhook secret and
    /// customers' e-mail addresses, is never readable by others. SQLite creates the `-wal` and
    /// `-shm` files, at open or any time later, with the permission bits of the database file
    /// (and sets them so whatever the umask), so they are 0600 too. Changing the process-wide
    /// umask instead would race with every other thread creating files. An existing file keeps
    /// the mode its owner gave it.
    /// - Returns: why the file could not be created, nil when it was or already existed.
    static func createPrivately(_ path: String) -> String? {
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            return errno == EEXIST ? nil : String(cString: strerror(errno))
        }
        defer { Glibc.close(descriptor) }
        // The umask may have taken bits from 0600 (never added any): set exactly 0600.
        return fchmod(descriptor, 0o600) == 0 ? nil : String(cString: strerror(errno))
    }

    /// An in-memory database for tests and benchmarks of pure logic.
    public static func inMemory() throws -> SQLiteDatabase {
        let queue = try DatabaseQueue(configuration: Configuration())
        let database = SQLiteDatabase(writer: queue, path: nil)
        try database.migrate()
        return database
    }

    private init(writer: any DatabaseWriter, path: String?) {
        self.writer = writer
        self.path = path
    }

    private func migrate() throws {
        try SQLiteMigrations.migrator.migrate(writer)
    }

    /// Proves the database accepts writes (for `/readyz`): takes the write lock and commits.
    public func checkWritable() async throws {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO meta(key, value) VALUES ('ready_checked_at', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [String(Int64(Date().timeIntervalSince1970))])
        }
    }

    /// Proves the database has room for a large delivery (``LedgerStore/checkSpace()``): writes
    /// ``spaceCheckBytes`` into new pages and removes them in one committed transaction. The pages
    /// freed go to the free list, where the next write finds them.
    public func checkSpace() async throws {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO meta(key, value) VALUES ('space_checked', randomblob(?)) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [spaceCheckBytes])
            try db.execute(sql: "DELETE FROM meta WHERE key = 'space_checked'")
        }
    }

    /// How many bytes the file and each table take (``LedgerStore/sizes()``): the pages of each
    /// table and its indexes from SQLite's `dbstat` (Debian's SQLite is built with it), which
    /// reads every page, on a reader connection beside the writer.
    public func sizes() async throws -> StoreSizes {
        try await writer.read { db in
            let pageSize = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let free = try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            var tables: [String: Int64] = [:]
            // An index counts for its table; SQLite's own schema table is not in sqlite_schema.
            // A row per page, summed here in 64 bits: dbstat's own per-table row (`aggregate = 1`)
            // adds the pages' sizes in a 32-bit int, so a table past 2 GiB came out negative
            // (-1.8 GB for the 2.5 GB of bodies of a million uncompressed events).
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT lower(coalesce(s.tbl_name, d.name)) AS tableName, sum(d.pgsize) AS bytes
                    FROM dbstat AS d LEFT JOIN sqlite_schema AS s ON s.name = d.name
                    GROUP BY 1
                    """)
            {
                tables[row["tableName"]] = row["bytes"]
            }
            return StoreSizes(tables: tables, database: pages * pageSize, free: free * pageSize)
        }
    }

    /// Whether `error` is SQLite's `SQLITE_FULL` (see ``StoreFull``): a full disk, or the
    /// database at its `max_page_count`. A failed write of the unix VFS is `SQLITE_FULL` when
    /// the disk had no space (`ENOSPC`), `SQLITE_IOERR_WRITE` for any other cause.
    public static func isFull(_ error: any Error) -> Bool {
        (error as? DatabaseError)?.resultCode == .SQLITE_FULL
    }

    /// SQLite's code and message of an SQLite error ("SQLite error 13: database or disk is
    /// full"), without the statement GRDB's description adds; nil for any other error.
    static func reason(_ error: any Error) -> String? {
        guard let error = error as? DatabaseError else { return nil }
        return "SQLite error \(error.extendedResultCode.rawValue): \(error.message ?? "\(error.resultCode)")"
    }

    /// The value of `PRAGMA synchronous` on the writer connection (2 = FULL).
    public func synchronousLevel() throws -> Int {
        try writer.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Reads a value from the `meta` key-value table.
    public func metaValue(_ key: String) async throws -> String? {
        try await writer.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]) }
    }

    /// Writes a value into the `meta` key-value table.
    public func setMetaValue(_ key: String, _ value: String) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [key, value])
        }
    }

    /// Closes the database cleanly (checkpointing the WAL); later use is an error, a second close does nothing.
    public func close() throws {
        guard closed.set() else { return }
        if let pool = writer as? DatabasePool {
            _ = try? pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try pool.close()
        } else if let queue = writer as? DatabaseQueue {
            try queue.close()
        }
    }
}

/// Why the ledger database could not be opened.
public enum LedgerDatabaseError: Error, CustomStringConvertible {
    case directoryMissing(String)
    case cannotOpen(path: String, reason: String)
    case backupTargetExists(String)
    case backupCorrupt(String)
    /// The backup's directory is missing, not a directory, or not writable: `reason` says which.
    case backupTargetUnwritable(path: String, reason: String)

    public var description: String {
        switch self {
        case .directoryMissing(let directory):
            "The directory \(directory) does not exist: create it, or set BILLINGD_DATABASE to a file in an existing directory."
        case .cannotOpen(let path, let reason):
            "Cannot open the ledger database at \(path): \(reason). Check the path and its permissions (BILLINGD_DATABASE)."
        case .backupTargetExists(let path):
            "\(path) already exists: choose a new file name, or pass --force to replace it."
        case .backupCorrupt(let report):
            "The backup copy failed SQLite's integrity check (\(report)); nothing was written. Check the disk."
        case .backupTargetUnwritable(let path, let reason):
            "Cannot write the backup \(path): \(reason). Nothing was written."
        }
    }
}

extension SQLiteDatabase {
    /// Copies the live database to `path` with SQLite's online backup (consistent while
    /// `serve` keeps writing), checks the copy's integrity, fsyncs it and only then renames it
    /// into place, so `path` is never a partial backup.
    public func backup(to path: String, overwrite: Bool) async throws -> LedgerBackup {
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: path), !overwrite {
            throw LedgerDatabaseError.backupTargetExists(path)
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            throw LedgerDatabaseError.backupTargetUnwritable(path: path, reason: "the directory \(directory) does not exist; create it first")
        }
        guard isDirectory.boolValue else {
            throw LedgerDatabaseError.backupTargetUnwritable(path: path, reason: "\(directory) is not a directory")
        }
        guard fileManager.isWritableFile(atPath: directory) else {
            throw LedgerDatabaseError.backupTargetUnwritable(
                path: path, reason: "this user cannot write in \(directory); choose a directory it owns, or fix the permissions")
        }
        let temporary = path + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
        try? fileManager.removeItem(atPath: temporary)
        do {
            // 0600 before the first byte of the copy is written (and its journal with it).
            if let reason = Self.createPrivately(temporary) {
                throw LedgerDatabaseError.backupTargetUnwritable(path: path, reason: reason)
            }
            let copy = try DatabaseQueue(path: temporary)
            try await writer.backup(to: copy)
            let (check, events) = try await copy.read { db in
                (try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? "",
                 try SQLiteInbox.count(db: db))
            }
            try copy.close()
            guard check == "ok" else { throw LedgerDatabaseError.backupCorrupt(check) }
            // The copy holds customer e-mails: readable by its owner only.
            try fileManager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: temporary)
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: temporary))
            try handle.synchronize()
            try handle.close()
            if fileManager.fileExists(atPath: path) { try fileManager.removeItem(atPath: path) }
            try fileManager.moveItem(atPath: temporary, toPath: path)
            let bytes = (try fileManager.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            return LedgerBackup(path: path, bytes: bytes, events: events)
        } catch {
            try? fileManager.removeItem(atPath: temporary)
            throw error
        }
    }
}

/// Whether a database was closed, shared by the copies of its ``SQLiteDatabase``.
private final class ClosedFlag: Sendable {
    private let value = Atomic<Bool>(false)

    /// Marks it closed; true the first time only.
    func set() -> Bool {
        !value.exchange(true, ordering: .acquiringAndReleasing)
    }
}
