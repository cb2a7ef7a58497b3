import BillingCore
import Foundation
import GRDB

/// Operator actions on the ledger: replay, inspect, dump.
public struct SQLiteMaintenance: LedgerMaintenanceStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Empties the ledger tables and applies every stored event again, in commit order. Since
    /// the version rule does not depend on order, the result equals the live ledger.
    @discardableResult
    public func replay(applier: any EventApplier, progress: @Sendable (Int) -> Void = { _ in }) async throws -> ApplyPass {
        try await database.writer.write { db in
            for table in LedgerRows.ledgerTables { try db.execute(sql: "DELETE FROM \(table)") }
            try db.execute(sql: MetricsFactRows.replayDeleteSQL)
            try SQLiteInbox.requeueEverything(db: db)
        }
        // Replay announces nothing, whatever store the applier came from.
        var applier = applier
        if let inboxApplier = applier as? SQLiteApplier, inboxApplier.database.outbox != nil {
            applier = SQLiteApplier(database: inboxApplier.database.announcing(nil), configuration: inboxApplier.configuration)
        }
        return try await applier.drain(now: { Int64(Date().timeIntervalSince1970 * 1000) }, progress: { progress($0.processed) })
    }

    /// The ledger's view of one object, found by id in any table, with its children, its
    /// raw JSON and the events that shaped it. Nil when the ledger has no such object.
    public func inspect(id: String) async throws -> [String: any Sendable]? {
        try await database.writer.read { db in
            for kind in LedgerObjectKind.allCases {
                let table = LedgerRows.table(kind)
                let rows = try Row.fetchAll(db, sql: LedgerRows.selectSQL(table, where: "id = ?", orderBy: "account, livemode"), arguments: [id])
                guard !rows.isEmpty else { continue }
                var views: [[String: any Sendable]] = []
                let booleans = try Self.booleanColumns(table, db: db)
                for row in rows {
                    var view = Self.dictionary(row, skipping: ["raw", "eventBody"], booleans: booleans)
                    view["kind"] = kind.rawValue
                    let cells = row.map { (name: $0, value: LedgerValue($1)) }
                    if let json = LedgerRows.json("raw", of: cells), let object = try? JSONSerialization.jsonObject(with: Data(json)) {
                        view["raw"] = LedgerJSON(object)
                    }
                    let key: StatementArguments = [row["account"] as String, row["livemode"] as Bool, id]
                    switch kind {
                    case .subscription:
                        view["items"] = try Row.fetchAll(
                            db, sql: "SELECT * FROM subscriptionItem WHERE account = ? AND livemode = ? AND subscription = ? ORDER BY id",
                            arguments: key
                        ).map { Self.dictionary($0, skipping: ["account", "livemode", "subscription"], booleans: try Self.booleanColumns("subscriptionItem", db: db)) }
                    case .invoice:
                        view["lines"] = try Row.fetchAll(
                            db, sql: "SELECT * FROM invoiceLine WHERE account = ? AND livemode = ? AND invoice = ? ORDER BY position",
                            arguments: key
                        ).map { Self.dictionary($0, skipping: ["account", "livemode", "invoice"], booleans: try Self.booleanColumns("invoiceLine", db: db)) }
                    case .entitlementSummary:
                        view["entitlements"] = try Row.fetchAll(
                            db, sql: "SELECT * FROM activeEntitlement WHERE account = ? AND livemode = ? AND customer = ? ORDER BY lookupKey",
                            arguments: key
                        ).map { Self.dictionary($0, skipping: ["account", "livemode", "customer"], booleans: try Self.booleanColumns("activeEntitlement", db: db)) }
                    default:
                        break
                    }
                    views.append(view)
                }
                let events = try SQLiteInbox.events(about: id, db: db).map { Self.dictionary($0, skipping: []) }
                return ["object": views.count == 1 ? views[0] : views, "events": events] as [String: any Sendable]
            }
            return try Self.inspectAppStore(id: id, db: db)
        }
    }

    /// An App Store purchase by original transaction id (the subscription with its transactions
    /// and owner), else one transaction by its id; nil when neither is in the ledger.
    static func inspectAppStore(id: String, db: Database) throws -> [String: any Sendable]? {
        func rows(_ table: String, where condition: String) throws -> [[String: any Sendable]] {
            let booleans = try booleanColumns(table, db: db)
            return try Row.fetchAll(db, sql: "SELECT * FROM \(table) WHERE \(condition) ORDER BY environment", arguments: [id]).map { row in
                var view = dictionary(row, skipping: ["raw", "renewalRaw"], booleans: booleans)
                for column in ["raw", "renewalRaw"] {
                    if let raw = row[column] as Data?, let json = try? StoredJSON.decode(raw),
                        let object = try? JSONSerialization.jsonObject(with: Data(json))
                    {
                        view[LedgerJSON.snakeCase(column)] = LedgerJSON(object)
                    }
                }
                return view
            }
        }
        var views = try rows("appStoreSubscription", where: "originalTransactionID = ?")
        let original: String
        if views.isEmpty {
            views = try rows("appStoreTransaction", where: "transactionID = ?")
            guard let first = views.first, let originalID = first["original_transaction_id"] as? String else { return nil }
            for index in views.indices { views[index]["kind"] = "app_store_transaction" }
            original = originalID
        } else {
            for index in views.indices {
                let environment = views[index]["environment"] as? String ?? ""
                views[index]["kind"] = "app_store_subscription"
                views[index]["transactions"] = try rows("appStoreTransaction", where: "originalTransactionID = ?")
                    .filter { $0["environment"] as? String == environment }
                    .map { transaction in transaction.filter { $0.key != "raw" } }
                views[index]["owner"] = try rows("appStoreOwner", where: "originalTransactionID = ?")
                    .first { $0["environment"] as? String == environment }
            }
            original = id
        }
        let events = try SQLiteInbox.events(about: original, db: db).map { dictionary($0, skipping: []) }
        return ["object": views.count == 1 ? views[0] : views, "events": events] as [String: any Sendable]
    }

    /// Every ledger row of every table, ordered, as text: two ledgers with the same dump hold
    /// the same state. Used by tests and by `replay --verify`.
    public func dump() async throws -> String {
        try await database.writer.read { db in
            var lines: [String] = []
            for table in LedgerRows.dumpTables {
                let columns = try db.columns(in: table).map(\.name)
                let order = columns.prefix(4).joined(separator: ", ")
                for row in try Row.fetchAll(db, sql: LedgerRows.selectSQL(table, where: nil, orderBy: order)) {
                    lines.append(LedgerRows.dumpLine(table: table, row.map { (name: $0, value: LedgerValue($1)) }))
                }
            }
            return lines.joined(separator: "\n")
        }
    }

    /// A row as the service API writes JSON: snake_case keys (`app_user_id`, `v_deleted`), and
    /// the table's BOOLEAN columns as true/false rather than SQLite's 0/1.
    static func dictionary(_ row: Row, skipping: Set<String>, booleans: Set<String> = []) -> [String: any Sendable] {
        LedgerJSON.dictionary(
            row.map { column, value -> (name: String, value: LedgerValue) in
                let value = LedgerValue(value)
                if booleans.contains(column), case .integer(let number) = value { return (column, .boolean(number != 0)) }
                return (column, value)
            },
            skipping: skipping)
    }

    /// The BOOLEAN columns of a table.
    static func booleanColumns(_ table: String, db: Database) throws -> Set<String> {
        Set(try db.columns(in: table).filter { $0.type.uppercased() == "BOOLEAN" }.map(\.name))
    }

}
