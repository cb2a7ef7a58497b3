import BillingCore
import Foundation
import GRDB

/// Writes snapshots into the SQLite ledger tables under the version guard. What a snapshot makes
/// of the rows is decided in ``LedgerRows`` (shared with the PostgreSQL writer); this type runs
/// the statements. Every method runs inside the caller's transaction.
enum SQLiteLedgerWriter {
    /// Applies one snapshot for an account ('' = platform) and mode. A subscription's snapshot is
    /// also kept as a metrics fact, and an attached payment method's customer as a link,
    /// whatever the guard decides (``MetricsFactRows``, ``ReconcileRepairRows``).
    static func apply(_ snapshot: LedgerSnapshot, account: String, livemode: Bool, db: Database) throws -> ApplyEffect {
        if let fact = MetricsFactRows.subscriptionFact(snapshot, account: account, livemode: livemode) {
            try db.cachedStatement(sql: MetricsFactRows.insertSubscriptionFactSQL).execute(arguments: StatementArguments(fact.map(\.databaseValue)))
        }
        // A payment method seen attached keeps its customer after it is detached (the timeline's link).
        if let customer = ReconcileRepairRows.paymentMethodLink(snapshot) {
            let link = ReconcileRepairRows.linkArguments(snapshot, customer: customer, account: account, livemode: livemode)
            try db.cachedStatement(sql: ReconcileRepairRows.linkPaymentMethodSQL).execute(arguments: StatementArguments(link.map(\.databaseValue)))
        }
        let table = LedgerRows.table(snapshot.kind)
        let key: StatementArguments = [account, livemode, snapshot.objectID]
        let decision = LedgerRows.decide(snapshot, held: try heldVersion(table: table, key: key, db: db))
        switch decision {
        case .unchanged, .stale:
            break
        case .markForRefetch:
            try db.execute(sql: "UPDATE \(table) SET needsRefetch = 1 WHERE account = ? AND livemode = ? AND id = ?", arguments: key)
        case .write(let needsRefetch, _):
            try write(snapshot, account: account, livemode: livemode, needsRefetch: needsRefetch, db: db)
        }
        return decision.effect
    }

    /// The version of the snapshot the ledger holds for a key, nil when it holds none.
    static func heldVersion(table: String, key: StatementArguments, db: Database) throws -> SnapshotVersion? {
        let statement = try db.cachedStatement(
            sql: "SELECT \(LedgerRows.versionColumns) FROM \(table) WHERE account = ? AND livemode = ? AND id = ?")
        guard let row = try Row.fetchOne(statement, arguments: key) else { return nil }
        return SnapshotVersion(
            deleted: row[0], terminal: row[1], eventCreated: row[2], transitionAt: row[3], statusRank: row[4], eventID: row[5])
    }


    /// The typed columns a snapshot fills (raw JSON and version excluded), in table order, as
    /// SQLite values. Reconcile compares these with the ledger's row to say which fields drifted.
    static func typedFields(of object: LedgerObject) -> [(column: String, value: DatabaseValue)] {
        LedgerRows.typedFields(of: object).map { ($0.column, $0.value.databaseValue) }
    }

    private static func write(_ snapshot: LedgerSnapshot, account: String, livemode: Bool, needsRefetch: Bool, db: Database) throws {
        if let children = LedgerRows.children(of: snapshot, account: account, livemode: livemode) {
            try db.cachedStatement(sql: children.deleteSQL).execute(arguments: [account, livemode, children.parentID])
            let insert = try db.cachedStatement(sql: children.insertSQL)
            for row in children.rows { try insert.execute(arguments: StatementArguments(row.map { $0.databaseValue })) }
        }
        let row = LedgerRows.row(snapshot, account: account, livemode: livemode, needsRefetch: needsRefetch)
        let statement = try db.cachedStatement(sql: LedgerRows.upsertSQL(table: LedgerRows.table(snapshot.kind), columns: row.map { $0.column }))
        try statement.execute(arguments: StatementArguments(row.map { $0.value.databaseValue }))
    }

    /// Keeps a refund's newest snapshot: applied when it replaced the held one (or was the
    /// first), stale when the ledger holds a newer one.
    static func applyRefund(_ refund: RefundSnapshot, account: String, livemode: Bool, db: Database) throws -> ApplyEffect {
        let row = MetricsFactRows.refundRow(refund, account: account, livemode: livemode)
        try db.cachedStatement(sql: MetricsFactRows.upsertRefundSQL(byteOrder: "")).execute(arguments: StatementArguments(row.map(\.databaseValue)))
        return db.changesCount > 0 ? .applied : .stale
    }

    /// Ties the app user of a completed Checkout session to its customer. Links are only added,
    /// so the result does not depend on the order of events.
    static func linkCheckoutUser(_ snapshot: LedgerSnapshot, account: String, livemode: Bool, db: Database) throws {
        guard let link = LedgerRows.checkoutLink(snapshot) else { return }
        try db.cachedStatement(sql: LedgerRows.checkoutLinkSQL).execute(arguments: [account, livemode, link.user, link.customer])
    }
}

extension LedgerValue {
    /// The value as SQLite stores it (booleans as 0 and 1).
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let number): number.databaseValue
        case .boolean(let flag): flag.databaseValue
        case .text(let text): text.databaseValue
        case .blob(let bytes): Data(bytes).databaseValue
        }
    }

    /// A value SQLite returned (a boolean column reads as its 0 or 1).
    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .text(String(number))
        case .string(let text): self = .text(text)
        case .blob(let data): self = .blob(ArraySlice(data))
        }
    }
}
