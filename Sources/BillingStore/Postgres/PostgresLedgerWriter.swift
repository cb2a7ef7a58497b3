import BillingCore
import Logging
import NIOCore
import PostgresNIO

/// Writes Stripe snapshots into the PostgreSQL ledger under the version guard, inside the
/// caller's transaction: the PostgreSQL twin of SQLite/SQLiteLedgerWriter.swift. What a snapshot makes of the
/// rows (the guard's decision, the typed row, the child rows) comes from ``LedgerRows``; this
/// type only runs the statements.
///
/// Several replicas apply at once, so the guard's read and the write must see a serial history
/// of the object: the writer first takes the object's transaction-scoped lock
/// (``PostgresObjectLock``), which a row lock could not give for an object not yet in the ledger.
enum PostgresLedgerWriter {
    /// Applies one snapshot for an account ('' = platform) and mode. A subscription's snapshot is
    /// also kept as a metrics fact, and an attached payment method's customer as a link,
    /// whatever the guard decides (``MetricsFactRows``, ``ReconcileRepairRows``).
    static func apply(
        _ snapshot: LedgerSnapshot, account: String, livemode: Bool, connection: PostgresConnection, logger: Logger
    ) async throws -> ApplyEffect {
        try await PostgresObjectLock.lock([PostgresObjectLock.key(snapshot, account: account, livemode: livemode)], connection, logger)
        if let fact = MetricsFactRows.subscriptionFact(snapshot, account: account, livemode: livemode) {
            try await connection.run(MetricsFactRows.insertSubscriptionFactSQL, fact, logger: logger)
        }
        // A payment method seen attached keeps its customer after it is detached (the timeline's link).
        if let customer = ReconcileRepairRows.paymentMethodLink(snapshot) {
            try await connection.run(
                ReconcileRepairRows.linkPaymentMethodSQL,
                ReconcileRepairRows.linkArguments(snapshot, customer: customer, account: account, livemode: livemode), logger: logger)
        }
        let table = LedgerRows.table(snapshot.kind)
        let key: [LedgerValue] = [.text(account), .boolean(livemode), .text(snapshot.objectID)]
        let held = try await heldVersion(table: table, key: key, connection: connection, logger: logger)
        let decision = LedgerRows.decide(snapshot, held: held)
        switch decision {
        case .unchanged, .stale:
            break
        case .markForRefetch:
            try await connection.run(
                "UPDATE \(table) SET needsRefetch = true WHERE account = ? AND livemode = ? AND id = ?", key, logger: logger)
        case .write(let needsRefetch, _):
            try await write(snapshot, account: account, livemode: livemode, needsRefetch: needsRefetch, connection: connection, logger: logger)
        }
        if let link = LedgerRows.checkoutLink(snapshot) {
            try await connection.run(
                LedgerRows.checkoutLinkSQL, [.text(account), .boolean(livemode), .text(link.user), .text(link.customer)], logger: logger)
        }
        return decision.effect
    }

    /// Keeps a refund's newest snapshot: applied when it replaced the held one (or was the
    /// first), stale when the ledger holds a newer one. The conditional upsert locks the row, so
    /// replicas writing one refund at once keep the newest.
    static func applyRefund(
        _ refund: RefundSnapshot, account: String, livemode: Bool, connection: PostgresConnection, logger: Logger
    ) async throws -> ApplyEffect {
        let rows = try await connection.run(
            MetricsFactRows.upsertRefundSQL(byteOrder: #" COLLATE "C""#) + " RETURNING 1", MetricsFactRows.refundRow(refund, account: account, livemode: livemode),
            logger: logger)
        var written = false
        for try await _ in rows { written = true }
        return written ? .applied : .stale
    }

    /// The version of the snapshot the ledger holds for a key, nil when it holds none.
    static func heldVersion(table: String, key: [LedgerValue], connection: PostgresConnection, logger: Logger) async throws -> SnapshotVersion? {
        let rows = try await connection.run(
            "SELECT \(LedgerRows.versionColumns) FROM \(table) WHERE account = ? AND livemode = ? AND id = ?", key, logger: logger)
        for try await row in rows {
            let (deleted, terminal, created, transition, rank, eventID) = try row.decode((Bool, Bool, Int64, Int64, Int, String).self)
            return SnapshotVersion(
                deleted: deleted, terminal: terminal, eventCreated: created, transitionAt: transition, statusRank: rank, eventID: eventID)
        }
        return nil
    }

    private static func write(
        _ snapshot: LedgerSnapshot, account: String, livemode: Bool, needsRefetch: Bool, connection: PostgresConnection, logger: Logger
    ) async throws {
        if let children = LedgerRows.children(of: snapshot, account: account, livemode: livemode) {
            try await connection.run(children.deleteSQL, [.text(account), .boolean(livemode), .text(children.parentID)], logger: logger)
            for row in children.rows { try await connection.run(children.insertSQL, row, logger: logger) }
        }
        let row = LedgerRows.row(snapshot, account: account, livemode: livemode, needsRefetch: needsRefetch)
        try await connection.run(
            LedgerRows.upsertSQL(table: LedgerRows.table(snapshot.kind), columns: row.map { $0.column }), row.map { $0.value }, logger: logger)
    }
}

/// Transaction-scoped advisory locks, one per ledger object, so that two replicas (or two
/// transactions of one) never apply events of one object at the same time. They are released
/// by the transaction's own COMMIT or ROLLBACK, so they hold behind PgBouncer's transaction
/// pooling, and a replica that dies mid-transaction releases them with its connection.
/// Taking a lock the transaction already holds succeeds at once, so a batch can take all its
/// objects' locks up front, in one global order (no deadlock between batches), and the writers
/// take each again.
enum PostgresObjectLock {
    static func key(_ snapshot: LedgerSnapshot, account: String, livemode: Bool) -> String {
        "stripe/\(LedgerRows.table(snapshot.kind))/\(account)/\(livemode)/\(snapshot.objectID)"
    }

    static func key(appStoreEnvironment environment: String, originalTransactionID: String) -> String {
        "appstore/\(environment)/\(originalTransactionID)"
    }

    /// The lock of the object a decoded event writes, if it writes one.
    static func key(_ decoded: DecodedDelivery, account: String, livemode: Bool) -> String? {
        switch decoded {
        case .snapshot(let snapshot):
            return key(snapshot, account: account, livemode: livemode)
        case .appStore(let delivery):
            guard let original = delivery.originalTransactionID else { return nil }
            return key(appStoreEnvironment: AppStoreDelivery.environment(inboxAccount: account), originalTransactionID: original)
        case .refund, .refundSnapshot, .recordOnly, .ignored, .failure:
            return nil
        }
    }

    /// Takes the locks of `keys` for the rest of the transaction, in the order of their hashes
    /// (the same order in every transaction); a hash two objects share only serialises them.
    static func lock(_ keys: [String], _ connection: PostgresConnection, _ logger: Logger) async throws {
        guard !keys.isEmpty else { return }
        try await connection.prepared(
            """
            SELECT count(pg_advisory_xact_lock(h)) FROM (
                SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest(\(keys)::text[]) AS k ORDER BY h) AS ordered
            """,
            logger: logger)
    }
}

extension PostgresBindings {
    /// Binds a ledger value in its PostgreSQL type (a boolean as a boolean, a blob as bytea).
    mutating func append(_ value: LedgerValue) {
        switch value {
        case .null: appendNull()
        case .integer(let number): append(number)
        case .boolean(let flag): append(flag)
        case .text(let text): append(text)
        case .blob(let bytes): append(ByteBuffer(bytes: bytes))
        }
    }
}

extension LedgerValue {
    /// A cell PostgreSQL returned, by its column's type.
    package init(_ cell: PostgresCell) throws {
        guard cell.bytes != nil else {
            self = .null
            return
        }
        switch cell.dataType {
        case .bool: self = .boolean(try cell.decode(Bool.self))
        case .int2, .int4, .int8: self = .integer(try cell.decode(Int64.self))
        case .bytea: self = .blob(ArraySlice(try cell.decode(ByteBuffer.self).readableBytesView))
        default: self = .text(try cell.decode(String.self))
        }
    }
}
