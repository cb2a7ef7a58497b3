import BillingCore
import Foundation
import GRDB

/// How an object fetched from Stripe differs from the ledger.
public enum DriftKind: String, Sendable, Codable, CaseIterable {
    /// Stripe has it; the ledger does not.
    case missingLocally = "missing_locally"
    /// The ledger has it (not deleted); Stripe no longer does.
    case goneInStripe = "gone_in_stripe"
    /// Both have it; typed fields or children differ.
    case fieldDiffers = "field_differs"
}

/// What reconcile did about one drifted object.
public enum RepairOutcome: String, Sendable, Codable {
    /// The ledger now holds Stripe's state.
    case repaired
    /// Not written: a dry run.
    case dryRun = "dry_run"
    /// Not written: the ledger holds a newer snapshot (or a tombstone) under the version rule.
    case keptNewer = "kept_newer"
}

/// One drifted object.
public struct ObjectDrift: Sendable, Equatable, Codable {
    public let kind: LedgerObjectKind
    public let id: String
    public let drift: DriftKind
    /// For `field_differs`, the ledger columns (or `items`, `lines`, `entitlements`) that differ.
    public let fields: [String]
    public let outcome: RepairOutcome

    public init(kind: LedgerObjectKind, id: String, drift: DriftKind, fields: [String], outcome: RepairOutcome) {
        self.kind = kind
        self.id = id
        self.drift = drift
        self.fields = fields
        self.outcome = outcome
    }
}

/// The result of reconciling one page of objects.
public struct PageReconciliation: Sendable {
    /// Objects that matched the ledger.
    public var matched = 0
    public var drifts: [ObjectDrift] = []
    /// Objects whose re-fetch mark was cleared because Stripe's state is now in the ledger.
    public var refetchCleared = 0

    public init() {}
}

/// The SQLite ``LedgerReconciliationStore``: compares objects fetched from Stripe with the ledger
/// and repairs the ledger through the same version guard as webhooks. Each page is one write
/// transaction, so the applier never sees a half-repaired page and a repair never races an event
/// for the same object.
public struct SQLiteLedgerReconciliation: LedgerReconciliationStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Starts tracking which objects of the given kinds Stripe listed, for ``goneCandidates``.
    /// The ids go to a temporary table (on disk, not in the process's memory, whatever the size
    /// of the account).
    public func beginListing(_ kinds: [LedgerObjectKind]) async throws {
        try await database.writer.writeWithoutTransaction { db in
            try db.execute(sql: """
                CREATE TEMP TABLE IF NOT EXISTS reconcileSeen (kind TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID
                """)
            for kind in kinds {
                try db.execute(sql: "DELETE FROM temp.reconcileSeen WHERE kind = ?", arguments: [kind.rawValue])
            }
        }
    }

    /// Compares one page of snapshots with the ledger and, unless `dryRun`, applies each that
    /// differs under the version guard and logs the repair under `run`. With `trackSeen`, the
    /// ids are noted for gone detection.
    public func reconcile(
        _ snapshots: [LedgerSnapshot], account: String, livemode: Bool, dryRun: Bool, trackSeen: Bool, run: Int64
    ) async throws -> PageReconciliation {
        let outbox = database.outbox
        return try await database.writer.write { db in
            var result = PageReconciliation()
            var touches = OutboxTouches()
            let seen = trackSeen ? try db.cachedStatement(sql: "INSERT OR IGNORE INTO temp.reconcileSeen (kind, id) VALUES (?, ?)") : nil
            for snapshot in snapshots {
                try seen?.execute(arguments: [snapshot.kind.rawValue, snapshot.objectID])
                let held = try Self.heldState(of: snapshot, account: account, livemode: livemode, db: db)
                let drift: DriftKind
                var fields: [String] = []
                switch held {
                case nil:
                    drift = .missingLocally
                case let held?:
                    fields = held.differingFields
                    if fields.isEmpty {
                        result.matched += 1
                        if held.needsRefetch && !dryRun && !snapshot.truncated {
                            try db.execute(
                                sql: "UPDATE \(LedgerRows.table(snapshot.kind)) SET needsRefetch = 0 WHERE account = ? AND livemode = ? AND id = ?",
                                arguments: [account, livemode, snapshot.objectID])
                            result.refetchCleared += 1
                        }
                        continue
                    }
                    drift = .fieldDiffers
                }
                let outcome: RepairOutcome
                if dryRun {
                    outcome = .dryRun
                } else {
                    switch try SQLiteLedgerWriter.apply(snapshot, account: account, livemode: livemode, db: db) {
                    case .applied, .ambiguous:
                        outcome = .repaired
                        touches.add(snapshot, account: account, livemode: livemode)
                        let repair = ReconcileRepairRows.repair(snapshot, drift: drift, fields: fields, account: account, livemode: livemode, run: run)
                        try db.cachedStatement(sql: ReconcileRepairRows.insertSQL)
                            .execute(arguments: StatementArguments(ReconcileRepairRows.arguments(repair).map(\.databaseValue)))
                        if case .checkoutSession = snapshot.object {
                            try SQLiteLedgerWriter.linkCheckoutUser(snapshot, account: account, livemode: livemode, db: db)
                        }
                    case .stale, .unchanged, .recorded:
                        outcome = .keptNewer
                    }
                }
                result.drifts.append(ObjectDrift(kind: snapshot.kind, id: snapshot.objectID, drift: drift, fields: fields, outcome: outcome))
            }
            if let outbox { try SQLiteOutbox.announce(touches, policy: outbox, now: Int64(Date().timeIntervalSince1970 * 1000), db: db) }
            return result
        }
    }

    /// Ids the ledger holds (not deleted) of a kind that the listing since ``beginListing`` did
    /// not see, in id order, `limit` at a time after `after`.
    public func goneCandidates(
        _ kind: LedgerObjectKind, account: String, livemode: Bool, after: String?, limit: Int
    ) async throws -> [String] {
        try await database.writer.writeWithoutTransaction { db in
            // On the writer: the temp table lives on that connection.
            try String.fetchAll(
                db,
                sql: """
                    SELECT l.id FROM \(LedgerRows.table(kind)) l
                    WHERE l.account = ? AND l.livemode = ? AND l.vDeleted = 0 AND l.id > ?
                      AND NOT EXISTS (SELECT 1 FROM temp.reconcileSeen s WHERE s.kind = ? AND s.id = l.id)
                    ORDER BY l.id LIMIT ?
                    """,
                arguments: [account, livemode, after ?? "", kind.rawValue, limit])
        }
    }

    /// Tombstones an object Stripe answers 404 for, under the version guard (a deletion beats
    /// every live snapshot), and logs it under `run`. Returns whether the ledger changed.
    public func markGone(
        _ kind: LedgerObjectKind, id: String, account: String, livemode: Bool, fetchedAt: Int64, fetchID: String, run: Int64
    ) async throws -> Bool {
        let outbox = database.outbox
        return try await database.writer.write { db in
            try db.execute(
                sql: """
                    UPDATE \(LedgerRows.table(kind)) SET vDeleted = 1, vCreated = ?, vEventID = ?, needsRefetch = 0
                    WHERE account = ? AND livemode = ? AND id = ? AND vDeleted = 0
                    """,
                arguments: [fetchedAt, fetchID, account, livemode, id])
            let changed = db.changesCount > 0
            if changed, kind == .subscription {
                try db.execute(sql: MetricsFactRows.goneSubscriptionFactSQL, arguments: [fetchID, fetchedAt, account, livemode, id])
            }
            guard changed else { return false }
            // The customer the tombstoned object concerns, as its row names it.
            let customer = try ReconcileRepairRows.ownCustomer(kind, id: id)
                ?? ReconcileRepairRows.heldCustomerSQL(kind).flatMap { sql in
                    try String.fetchOne(db, sql: sql, arguments: [account, livemode, id])
                }
            let repair = ReconcileRepairRows.gone(kind, id: id, customer: customer, account: account, livemode: livemode, run: run, fetchedAt: fetchedAt)
            try db.cachedStatement(sql: ReconcileRepairRows.insertSQL)
                .execute(arguments: StatementArguments(ReconcileRepairRows.arguments(repair).map(\.databaseValue)))
            if let outbox {
                // The customer whose users' view a tombstone may change.
                let announced = kind == .customer || kind == .subscription || kind == .invoice ? customer : nil
                var touches = OutboxTouches()
                if let customer = announced { touches.customers.insert(.init(scope: ServiceScope(account: account, livemode: livemode), id: customer)) }
                try SQLiteOutbox.announce(touches, policy: outbox, now: Int64(Date().timeIntervalSince1970 * 1000), db: db)
            }
            return changed
        }
    }

    /// Objects the applier marked for re-fetch (ties on all evidence, lists Stripe cut short).
    public func refetchQueue(account: String, livemode: Bool, limit: Int) async throws -> [(kind: LedgerObjectKind, id: String)] {
        try await database.writer.read { db in
            var queue: [(kind: LedgerObjectKind, id: String)] = []
            for kind in LedgerObjectKind.allCases where queue.count < limit {
                let ids = try String.fetchAll(
                    db,
                    sql: "SELECT id FROM \(LedgerRows.table(kind)) WHERE needsRefetch = 1 AND account = ? AND livemode = ? ORDER BY id LIMIT ?",
                    arguments: [account, livemode, limit - queue.count])
                queue += ids.map { (kind, $0) }
            }
            return queue
        }
    }

    /// Customer ids in the ledger (not deleted), in id order, `limit` at a time after `after`:
    /// the customers whose payment methods and entitlements reconcile lists.
    public func customerIDs(account: String, livemode: Bool, after: String?, limit: Int) async throws -> [String] {
        try await database.writer.read { db in
            try String.fetchAll(
                db,
                sql: "SELECT id FROM customer WHERE account = ? AND livemode = ? AND vDeleted = 0 AND id > ? ORDER BY id LIMIT ?",
                arguments: [account, livemode, after ?? "", limit])
        }
    }

    /// Payment methods the ledger holds as attached to a customer.
    public func attachedPaymentMethods(customer: String, account: String, livemode: Bool) async throws -> [String] {
        try await database.writer.read { db in
            try String.fetchAll(
                db,
                sql: "SELECT id FROM paymentMethod WHERE account = ? AND livemode = ? AND customer = ? AND vDeleted = 0 AND vTerminal = 0 ORDER BY id",
                arguments: [account, livemode, customer])
        }
    }

    // MARK: Comparison

    private struct HeldState {
        var differingFields: [String]
        var needsRefetch: Bool
    }

    /// The ledger's row for the snapshot's object compared with the snapshot; nil when absent.
    private static func heldState(of snapshot: LedgerSnapshot, account: String, livemode: Bool, db: Database) throws -> HeldState? {
        let table = LedgerRows.table(snapshot.kind)
        let fields = SQLiteLedgerWriter.typedFields(of: snapshot.object)
        let columns = fields.map(\.column).joined(separator: ", ")
        let statement = try db.cachedStatement(
            sql: "SELECT vDeleted, needsRefetch\(columns.isEmpty ? "" : ", " + columns) FROM \(table) WHERE account = ? AND livemode = ? AND id = ?")
        guard let row = try Row.fetchOne(statement, arguments: [account, livemode, snapshot.objectID]) else { return nil }
        var differing: [String] = []
        let heldDeleted: Bool = row[0]
        if heldDeleted != snapshot.version.deleted { differing.append("deleted") }
        // Booleans are stored as integers, and so are the fetched values: compare storage values.
        for (index, field) in fields.enumerated() where (row[index + 2] as DatabaseValue) != field.value {
            differing.append(field.column)
        }
        let key: StatementArguments = [account, livemode, snapshot.objectID]
        switch snapshot.object {
        case .subscription(let subscription):
            let held = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT id, price, quantity FROM subscriptionItem WHERE account = ? AND livemode = ? AND subscription = ? ORDER BY id"),
                arguments: key
            ).map { "\($0["id"] as String)|\(($0["price"] as String?) ?? "")|\(($0["quantity"] as Int64?).map(String.init) ?? "")" }
            let fetched = subscription.items.map { "\($0.id)|\($0.price?.id ?? "")|\($0.quantity.map(String.init) ?? "")" }.sorted()
            if held != fetched { differing.append("items") }
        case .invoice(let invoice):
            let held = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT id, amount FROM invoiceLine WHERE account = ? AND livemode = ? AND invoice = ? ORDER BY position"),
                arguments: key
            ).map { "\($0["id"] as String)|\($0["amount"] as Int64)" }
            if held != invoice.lines.map({ "\($0.id)|\($0.amount)" }) { differing.append("lines") }
        case .entitlementSummary(let summary):
            let held = try String.fetchAll(
                db.cachedStatement(sql: "SELECT lookupKey FROM activeEntitlement WHERE account = ? AND livemode = ? AND customer = ? ORDER BY lookupKey"),
                arguments: key)
            if held != summary.entitlements.map(\.lookupKey).sorted() { differing.append("entitlements") }
        default:
            break
        }
        return HeldState(differingFields: differing, needsRefetch: row[1])
    }
}

extension SQLiteLedgerReconciliation {
    /// Whether the ledger holds an entitlement summary for the customer.
    public func hasEntitlementSummary(customer: String, account: String, livemode: Bool) async throws -> Bool {
        try await database.writer.read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM entitlementSummary WHERE account = ? AND livemode = ? AND id = ?)",
                arguments: [account, livemode, customer]) ?? false
        }
    }
}

extension SQLiteLedgerReconciliation {
    /// Applies one object Stripe just answered with (a created customer, a canceled
    /// subscription) under the version guard, so that a read right after sees it.
    @discardableResult
    public func applyFetched(_ snapshot: LedgerSnapshot, account: String, livemode: Bool) async throws -> ApplyEffect {
        let outbox = database.outbox
        return try await database.writer.write { db in
            let effect = try SQLiteLedgerWriter.apply(snapshot, account: account, livemode: livemode, db: db)
            if effect == .applied || effect == .ambiguous, case .checkoutSession = snapshot.object {
                try SQLiteLedgerWriter.linkCheckoutUser(snapshot, account: account, livemode: livemode, db: db)
            }
            if let outbox, effect == .applied || effect == .ambiguous {
                var touches = OutboxTouches()
                touches.add(snapshot, account: account, livemode: livemode)
                try SQLiteOutbox.announce(touches, policy: outbox, now: Int64(Date().timeIntervalSince1970 * 1000), db: db)
            }
            return effect
        }
    }
}

extension SQLiteLedgerReconciliation {
    /// The objects of a page whose JSON is byte for byte the JSON the ledger holds: Stripe's
    /// state is already in the ledger, so they need no decoding or comparison. (A daily run over
    /// an unchanged account is mostly this.) Returns the indexes of the others — missing, changed,
    /// or marked for re-fetch — for ``reconcile(_:account:livemode:dryRun:trackSeen:)``. With
    /// `trackSeen`, every id is noted for gone detection.
    public func unchanged(
        _ kind: LedgerObjectKind, objects: [(id: String, json: ArraySlice<UInt8>)], account: String, livemode: Bool, trackSeen: Bool
    ) async throws -> (matched: Int, changed: [Int]) {
        try await database.writer.write { db in
            let seen = trackSeen ? try db.cachedStatement(sql: "INSERT OR IGNORE INTO temp.reconcileSeen (kind, id) VALUES (?, ?)") : nil
            for object in objects { try seen?.execute(arguments: [kind.rawValue, object.id]) }
            guard kind.keepsRawJSON else { return (0, Array(objects.indices)) }
            let held = try db.cachedStatement(
                sql: """
                    SELECT r.raw, \(StoredJSON.eventBodyColumn(of: "r")) FROM \(LedgerRows.table(kind)) r
                    WHERE r.account = ? AND r.livemode = ? AND r.id = ? AND r.needsRefetch = 0 AND r.vDeleted = 0
                    """)
            var changed: [Int] = []
            var matched = 0
            for (index, object) in objects.enumerated() {
                // Rows written before raw JSON was compressed compare as they are; a row an event
                // wrote compares its event's data.object.
                var same = false
                if let row = try Row.fetchOne(held, arguments: [account, livemode, object.id]), let stored = row[0] as Data? {
                    let json = try? StoredJSON.json(stored: stored, eventBody: (row[1] as Data?).map { Array($0) })
                    same = json?.elementsEqual(object.json) ?? false
                }
                if same { matched += 1 } else { changed.append(index) }
            }
            return (matched, changed)
        }
    }
}
