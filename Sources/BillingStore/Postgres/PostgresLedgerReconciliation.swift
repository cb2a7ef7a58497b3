import BillingCore
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Stripe reconcile's side of the PostgreSQL ledger: the twin of SQLite/SQLiteLedgerReconciliation.swift, with
/// its comparison (``LedgerRows/typedFields(of:)``) and its repairs through the PostgreSQL ledger
/// writer under the version guard and the objects' locks, each page one transaction.
///
/// The ids a listing saw go to `reconcileSeen` under this value's own listing id rather than to a
/// temporary table: a pool hands each statement any connection, and a replica's run must not see
/// another's listing. A listing's rows go when it begins again, and any run's rows when a later
/// listing begins six hours on (the table is UNLOGGED: scratch, not ledger).
package struct PostgresLedgerReconciliation: LedgerReconciliationStore {
    let client: PostgresClient
    let logger: Logger
    let outbox: OutboxPolicy?
    /// This run's name in `reconcileSeen`: one per ``PostgresLedgerStore/reconciliation`` vended.
    let listing = UUID().uuidString

    /// The migration adding the table of listed ids.
    static let seenMigration = PostgresMigrations.Migration(
        version: "v4-reconcile-seen",
        statements: [
            """
            CREATE UNLOGGED TABLE reconcileSeen (
                listing text NOT NULL, kind text NOT NULL, id text NOT NULL, seenAt bigint NOT NULL,
                PRIMARY KEY (listing, kind, id)
            )
            """,
            "CREATE INDEX reconcileSeen_age ON reconcileSeen (seenAt)",
        ])

    private static var nowMilliseconds: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    package func beginListing(_ kinds: [LedgerObjectKind]) async throws {
        let now = Self.nowMilliseconds
        try await client.query(
            """
            DELETE FROM reconcileSeen
            WHERE (listing = \(listing) AND kind = ANY(\(kinds.map(\.rawValue)))) OR seenAt < \(now - 6 * 3_600_000)
            """, logger: logger)
    }

    /// Notes ids as listed, inside the caller's transaction.
    private func noteSeen(_ kind: LedgerObjectKind, ids: [String], connection: PostgresConnection) async throws {
        guard !ids.isEmpty else { return }
        try await connection.query(
            """
            INSERT INTO reconcileSeen (listing, kind, id, seenAt)
            SELECT \(listing), \(kind.rawValue), id, \(Self.nowMilliseconds) FROM unnest(\(ids)::text[]) AS id
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    package func unchanged(
        _ kind: LedgerObjectKind, objects: [(id: String, json: ArraySlice<UInt8>)], account: String, livemode: Bool, trackSeen: Bool
    ) async throws -> (matched: Int, changed: [Int]) {
        try await client.transaction(logger: logger) { connection in
            if trackSeen { try await noteSeen(kind, ids: objects.map(\.id), connection: connection) }
            guard kind.keepsRawJSON else { return (0, Array(objects.indices)) }
            var held: [String: [UInt8]] = [:]
            let rows = try await connection.query(
                """
                SELECT r.id, r.raw, \(unescaped: StoredJSON.eventBodyColumn(of: "r")) FROM \(unescaped: LedgerRows.table(kind)) r
                WHERE r.account = \(account) AND r.livemode = \(livemode) AND r.id = ANY(\(objects.map(\.id))) AND NOT r.needsRefetch
                    AND NOT r.vDeleted
                """, logger: logger)
            for try await (id, raw, eventBody) in rows.decode((String, ByteBuffer?, ByteBuffer?).self) {
                // A row an event wrote compares its event's data.object.
                if let raw, let json = try? StoredJSON.json(stored: raw.readableBytesView, eventBody: eventBody.map { Array($0.readableBytesView) }) {
                    held[id] = json
                }
            }
            var changed: [Int] = []
            var matched = 0
            for (index, object) in objects.enumerated() {
                if let json = held[object.id], json.elementsEqual(object.json) {
                    matched += 1
                } else {
                    changed.append(index)
                }
            }
            return (matched, changed)
        }
    }

    package func reconcile(
        _ snapshots: [LedgerSnapshot], account: String, livemode: Bool, dryRun: Bool, trackSeen: Bool, run: Int64
    ) async throws -> PageReconciliation {
        try await client.transaction(logger: logger) { connection in
            var result = PageReconciliation()
            var touches = OutboxTouches()
            if trackSeen {
                for kind in Set(snapshots.map(\.kind)) {
                    try await noteSeen(kind, ids: snapshots.filter { $0.kind == kind }.map(\.objectID), connection: connection)
                }
            }
            if !dryRun {
                try await PostgresObjectLock.lock(
                    snapshots.map { PostgresObjectLock.key($0, account: account, livemode: livemode) }, connection, logger)
            }
            for snapshot in snapshots {
                let held = try await heldState(of: snapshot, account: account, livemode: livemode, connection: connection)
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
                            try await connection.query(
                                """
                                UPDATE \(unescaped: LedgerRows.table(snapshot.kind)) SET needsRefetch = false
                                WHERE account = \(account) AND livemode = \(livemode) AND id = \(snapshot.objectID)
                                """, logger: logger)
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
                    switch try await PostgresLedgerWriter.apply(snapshot, account: account, livemode: livemode, connection: connection, logger: logger) {
                    case .applied, .ambiguous:
                        outcome = .repaired
                        touches.add(snapshot, account: account, livemode: livemode)
                        let repair = ReconcileRepairRows.repair(snapshot, drift: drift, fields: fields, account: account, livemode: livemode, run: run)
                        try await connection.run(ReconcileRepairRows.insertSQL, ReconcileRepairRows.arguments(repair), logger: logger)
                    case .stale, .unchanged, .recorded:
                        outcome = .keptNewer
                    }
                }
                result.drifts.append(ObjectDrift(kind: snapshot.kind, id: snapshot.objectID, drift: drift, fields: fields, outcome: outcome))
            }
            if let outbox {
                try await PostgresOutbox.announce(touches, policy: outbox, now: Self.nowMilliseconds, connection: connection, logger: logger)
            }
            return result
        }
    }

    package func goneCandidates(
        _ kind: LedgerObjectKind, account: String, livemode: Bool, after: String?, limit: Int
    ) async throws -> [String] {
        let table = LedgerRows.table(kind)
        return try await ids(
            """
            SELECT l.id FROM \(unescaped: table) l
            WHERE l.account = \(account) AND l.livemode = \(livemode) AND NOT l.vDeleted AND l.id > \(after ?? "") COLLATE "C"
                AND NOT EXISTS (SELECT 1 FROM reconcileSeen s WHERE s.listing = \(listing) AND s.kind = \(kind.rawValue) AND s.id = l.id)
            ORDER BY l.id COLLATE "C" LIMIT \(limit)
            """)
    }

    package func markGone(
        _ kind: LedgerObjectKind, id: String, account: String, livemode: Bool, fetchedAt: Int64, fetchID: String, run: Int64
    ) async throws -> Bool {
        let table = LedgerRows.table(kind)
        let snapshotKey = "stripe/\(table)/\(account)/\(livemode)/\(id)"
        return try await client.transaction(logger: logger) { connection in
            try await PostgresObjectLock.lock([snapshotKey], connection, logger)
            let changed = try await connection.single(
                """
                UPDATE \(unescaped: table) SET vDeleted = true, vCreated = \(fetchedAt), vEventID = \(fetchID), needsRefetch = false
                WHERE account = \(account) AND livemode = \(livemode) AND id = \(id) AND NOT vDeleted
                RETURNING 1
                """, as: Int.self, logger: logger) != nil
            if changed, kind == .subscription {
                try await connection.run(
                    MetricsFactRows.goneSubscriptionFactSQL, [.text(fetchID), .integer(fetchedAt), .text(account), .boolean(livemode), .text(id)],
                    logger: logger)
            }
            guard changed else { return false }
            // The customer the tombstoned object concerns, as its row names it.
            var customer = ReconcileRepairRows.ownCustomer(kind, id: id)
            if customer == nil, let sql = ReconcileRepairRows.heldCustomerSQL(kind) {
                for try await row in try await connection.run(sql, [.text(account), .boolean(livemode), .text(id)], logger: logger) {
                    customer = try row.decode(String?.self)
                }
            }
            let repair = ReconcileRepairRows.gone(kind, id: id, customer: customer, account: account, livemode: livemode, run: run, fetchedAt: fetchedAt)
            try await connection.run(ReconcileRepairRows.insertSQL, ReconcileRepairRows.arguments(repair), logger: logger)
            if let outbox {
                // The customer whose users' view a tombstone may change.
                let announced = kind == .customer || kind == .subscription || kind == .invoice ? customer : nil
                var touches = OutboxTouches()
                if let customer = announced { touches.customers.insert(.init(scope: ServiceScope(account: account, livemode: livemode), id: customer)) }
                try await PostgresOutbox.announce(touches, policy: outbox, now: Self.nowMilliseconds, connection: connection, logger: logger)
            }
            return changed
        }
    }

    @discardableResult
    package func applyFetched(_ snapshot: LedgerSnapshot, account: String, livemode: Bool) async throws -> ApplyEffect {
        try await client.transaction(logger: logger) { connection in
            let effect = try await PostgresLedgerWriter.apply(snapshot, account: account, livemode: livemode, connection: connection, logger: logger)
            if let outbox, effect == .applied || effect == .ambiguous {
                var touches = OutboxTouches()
                touches.add(snapshot, account: account, livemode: livemode)
                try await PostgresOutbox.announce(touches, policy: outbox, now: Self.nowMilliseconds, connection: connection, logger: logger)
            }
            return effect
        }
    }

    // MARK: Comparison

    private struct HeldState {
        var differingFields: [String]
        var needsRefetch: Bool
    }

    /// The ledger's row for the snapshot's object compared with the snapshot; nil when absent.
    private func heldState(
        of snapshot: LedgerSnapshot, account: String, livemode: Bool, connection: PostgresConnection
    ) async throws -> HeldState? {
        let table = LedgerRows.table(snapshot.kind)
        let fields = LedgerRows.typedFields(of: snapshot.object)
        let columns = fields.map(\.column).joined(separator: ", ")
        let key: [LedgerValue] = [.text(account), .boolean(livemode), .text(snapshot.objectID)]
        var held: [LedgerValue]?
        for try await row in try await connection.run(
            "SELECT vDeleted, needsRefetch\(columns.isEmpty ? "" : ", " + columns) FROM \(table) WHERE account = ? AND livemode = ? AND id = ?",
            key, logger: logger)
        {
            held = try row.map(LedgerValue.init)
        }
        guard let held else { return nil }
        var differing: [String] = []
        if held[0] != .boolean(snapshot.version.deleted) { differing.append("deleted") }
        for (index, field) in fields.enumerated() where held[index + 2] != field.value {
            differing.append(field.column)
        }
        switch snapshot.object {
        case .subscription(let subscription):
            let rows = try await strings(
                "SELECT id || '|' || COALESCE(price, '') || '|' || COALESCE(quantity::text, '') FROM subscriptionItem WHERE account = ? AND livemode = ? AND subscription = ? ORDER BY id COLLATE \"C\"",
                key, connection)
            let fetched = subscription.items.map { "\($0.id)|\($0.price?.id ?? "")|\($0.quantity.map(String.init) ?? "")" }.sorted()
            if rows != fetched { differing.append("items") }
        case .invoice(let invoice):
            let rows = try await strings(
                "SELECT id || '|' || amount::text FROM invoiceLine WHERE account = ? AND livemode = ? AND invoice = ? ORDER BY position", key, connection)
            if rows != invoice.lines.map({ "\($0.id)|\($0.amount)" }) { differing.append("lines") }
        case .entitlementSummary(let summary):
            let rows = try await strings(
                "SELECT lookupKey FROM activeEntitlement WHERE account = ? AND livemode = ? AND customer = ? ORDER BY lookupKey COLLATE \"C\"",
                key, connection)
            if rows != summary.entitlements.map(\.lookupKey).sorted() { differing.append("entitlements") }
        default:
            break
        }
        return HeldState(differingFields: differing, needsRefetch: held[1] == .boolean(true))
    }

    private func strings(_ sql: String, _ values: [LedgerValue], _ connection: PostgresConnection) async throws -> [String] {
        var strings: [String] = []
        for try await row in try await connection.run(sql, values, logger: logger) { strings.append(try row.decode(String.self)) }
        return strings
    }

    /// Customer ids in the ledger (not deleted), in id order, `limit` at a time after `after`.
    package func customerIDs(account: String, livemode: Bool, after: String?, limit: Int) async throws -> [String] {
        try await ids(
            """
            SELECT id FROM customer WHERE account = \(account) AND livemode = \(livemode) AND NOT vDeleted
                AND id > \(after ?? "") COLLATE "C"
            ORDER BY id COLLATE "C" LIMIT \(limit)
            """)
    }

    /// Payment methods the ledger holds as attached to a customer.
    package func attachedPaymentMethods(customer: String, account: String, livemode: Bool) async throws -> [String] {
        try await ids(
            """
            SELECT id FROM paymentMethod WHERE account = \(account) AND livemode = \(livemode) AND customer = \(customer)
                AND NOT vDeleted AND NOT vTerminal
            ORDER BY id COLLATE "C"
            """)
    }

    /// Whether the ledger holds an entitlement summary for the customer.
    package func hasEntitlementSummary(customer: String, account: String, livemode: Bool) async throws -> Bool {
        try await client.single(
            "SELECT EXISTS (SELECT 1 FROM entitlementSummary WHERE account = \(account) AND livemode = \(livemode) AND id = \(customer))",
            as: Bool.self, logger: logger) ?? false
    }

    /// Objects the applier marked for re-fetch, kind by kind, at most `limit`.
    package func refetchQueue(account: String, livemode: Bool, limit: Int) async throws -> [(kind: LedgerObjectKind, id: String)] {
        var queue: [(kind: LedgerObjectKind, id: String)] = []
        for kind in LedgerObjectKind.allCases where queue.count < limit {
            let ids = try await ids(
                """
                SELECT id FROM \(unescaped: LedgerRows.table(kind)) WHERE needsRefetch AND account = \(account) AND livemode = \(livemode)
                ORDER BY id COLLATE "C" LIMIT \(limit - queue.count)
                """)
            queue += ids.map { (kind, $0) }
        }
        return queue
    }

    private func ids(_ query: PostgresQuery) async throws -> [String] {
        var ids: [String] = []
        for try await id in try await client.query(query, logger: logger).decode(String.self) { ids.append(id) }
        return ids
    }
}
