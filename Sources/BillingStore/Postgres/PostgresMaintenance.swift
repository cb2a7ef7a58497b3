import BillingCore
import Foundation
import Logging
import PostgresNIO

/// Operator actions on the PostgreSQL ledger: replay, inspect, dump. The dump is line for line
/// what the dump of SQLite/SQLiteMaintenance.swift prints for the same ledger on SQLite (same tables, columns,
/// names, row order and value spelling), so that the two backends can be compared.
struct PostgresMaintenance: LedgerMaintenanceStore {
    let client: PostgresClient
    let logger: Logger

    /// Empties the ledger tables and applies every stored event again. The version guard does
    /// not depend on order, so the result equals the live ledger.
    func replay(applier: any EventApplier, progress: @Sendable (Int) -> Void) async throws -> ApplyPass {
        try await client.transaction(logger: logger) { connection in
            for table in LedgerRows.ledgerTables {
                try await connection.query(PostgresQuery(unsafeSQL: "DELETE FROM \(table)"), logger: logger)
            }
            try await connection.query(PostgresQuery(unsafeSQL: MetricsFactRows.replayDeleteSQL), logger: logger)
            try await PostgresInbox.requeueEverything(connection: connection, logger: logger)
        }
        // Replay announces nothing, whatever store the applier came from.
        var applier = applier
        if var postgresApplier = applier as? PostgresApplier, postgresApplier.outbox != nil {
            postgresApplier.outbox = nil
            applier = postgresApplier
        }
        return try await applier.drain(now: { Int64(Date().timeIntervalSince1970 * 1000) }, progress: { progress($0.processed) })
    }

    /// The ledger's view of one object, found by id in any table, with its children, its raw
    /// JSON and the events that shaped it, as on SQLite. Nil when the ledger has no such object.
    func inspect(id: String) async throws -> [String: any Sendable]? {
        for kind in LedgerObjectKind.allCases {
            let table = LedgerRows.table(kind)
            let rows = try await self.rows(table, where: "id = ?", [.text(id)], orderBy: "account, livemode")
            guard !rows.isEmpty else { continue }
            var views: [[String: any Sendable]] = []
            for row in rows {
                var view = LedgerJSON.dictionary(row.filter { !LedgerRows.isEventBody($0.name) }, skipping: ["raw"])
                view["kind"] = kind.rawValue
                if let json = LedgerRows.json("raw", of: row), let object = try? JSONSerialization.jsonObject(with: Data(json)) {
                    view["raw"] = LedgerJSON(object)
                }
                let key: [LedgerValue] = row.prefix(2).map { $0.value } + [.text(id)]
                let children: (table: String, parent: String, order: String)? =
                    switch kind {
                    case .subscription: ("subscriptionItem", "subscription", "id")
                    case .invoice: ("invoiceLine", "invoice", "position")
                    case .entitlementSummary: ("activeEntitlement", "customer", "lookupKey")
                    default: nil
                    }
                if let children {
                    let name = switch kind {
                        case .subscription: "items"
                        case .invoice: "lines"
                        default: "entitlements"
                        }
                    view[name] = try await self.rows(
                        children.table, where: "account = ? AND livemode = ? AND \(children.parent) = ?", key, orderBy: children.order
                    ).map { LedgerJSON.dictionary($0, skipping: ["account", "livemode", children.parent]) }
                }
                views.append(view)
            }
            let events = try await PostgresInbox.events(about: id, client: client, logger: logger)
            return ["object": views.count == 1 ? views[0] : views, "events": events] as [String: any Sendable]
        }
        return try await inspectAppStore(id: id)
    }

    /// An App Store purchase by original transaction id (the subscription with its transactions
    /// and owner), else one transaction by its id, as on SQLite; nil when neither is in the ledger.
    private func inspectAppStore(id: String) async throws -> [String: any Sendable]? {
        func views(_ table: String, where column: String) async throws -> [[String: any Sendable]] {
            try await rows(table, where: "\(column) = ?", [.text(id)], orderBy: "environment").map { row in
                var view = LedgerJSON.dictionary(row, skipping: ["raw", "renewalRaw"])
                for cell in row where cell.name == "raw" || cell.name == "renewalRaw" {
                    if case .blob(let bytes) = cell.value, let json = try? StoredJSON.decode(bytes),
                        let object = try? JSONSerialization.jsonObject(with: Data(json))
                    {
                        view[LedgerJSON.snakeCase(cell.name)] = LedgerJSON(object)
                    }
                }
                return view
            }
        }
        var subscriptions = try await views("appStoreSubscription", where: "originalTransactionID")
        let original: String
        if subscriptions.isEmpty {
            subscriptions = try await views("appStoreTransaction", where: "transactionID")
            guard let first = subscriptions.first, let originalID = first["original_transaction_id"] as? String else { return nil }
            for index in subscriptions.indices { subscriptions[index]["kind"] = "app_store_transaction" }
            original = originalID
        } else {
            let transactions = try await views("appStoreTransaction", where: "originalTransactionID")
            let owners = try await views("appStoreOwner", where: "originalTransactionID")
            for index in subscriptions.indices {
                let environment = subscriptions[index]["environment"] as? String ?? ""
                subscriptions[index]["kind"] = "app_store_subscription"
                subscriptions[index]["transactions"] = transactions.filter { $0["environment"] as? String == environment }
                    .map { transaction in transaction.filter { $0.key != "raw" } }
                subscriptions[index]["owner"] = owners.first { $0["environment"] as? String == environment }
            }
            original = id
        }
        let events = try await PostgresInbox.events(about: original, client: client, logger: logger)
        return ["object": subscriptions.count == 1 ? subscriptions[0] : subscriptions, "events": events] as [String: any Sendable]
    }

    /// Every ledger row of every table, ordered, as text, in SQLite's spelling: two ledgers with
    /// the same dump hold the same state, whichever backends hold them.
    func dump() async throws -> String {
        var lines: [String] = []
        for table in LedgerRows.dumpTables {
            let columns = try await self.columns(table)
            // SQLite orders text bytewise and NULL first: the C collation and NULLS FIRST do the same.
            let order = columns.prefix(4).map { "\($0.name) \($0.isText ? "COLLATE \"C\" " : "")NULLS FIRST" }
            for row in try await rows(table, where: nil, [], orderBy: order.joined(separator: ", ")) {
                lines.append(LedgerRows.dumpLine(table: table, row))
            }
        }
        return lines.joined(separator: "\n")
    }

    // MARK: Rows

    /// A table's columns in order, named as on SQLite (PostgreSQL folds unquoted names to lower case).
    private func columns(_ table: String) async throws -> [(name: String, isText: Bool)] {
        let rows = try await client.query(
            """
            SELECT column_name::text, data_type::text FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = \(table.lowercased())
            ORDER BY ordinal_position
            """,
            logger: logger)
        var columns: [(name: String, isText: Bool)] = []
        for try await (name, type) in rows.decode((String, String).self) {
            columns.append((PostgresSchema.spelling(of: name), type == "text"))
        }
        return columns
    }

    /// Every row of a table matching a condition (with `?` placeholders), as named values.
    private func rows(
        _ table: String, where condition: String?, _ values: [LedgerValue], orderBy order: String
    ) async throws -> [[(name: String, value: LedgerValue)]] {
        let sql = LedgerRows.selectSQL(table, where: condition, orderBy: order)
        return try await client.withConnection { connection in
            var result: [[(name: String, value: LedgerValue)]] = []
            for try await row in try await connection.runOnce(sql, values, logger: logger) {
                result.append(try row.map { cell -> (name: String, value: LedgerValue) in (PostgresSchema.spelling(of: cell.columnName), try LedgerValue(cell)) })
            }
            return result
        }
    }
}

extension PostgresSchema {
    /// Every identifier the schema spells, by its lower-case form: PostgreSQL returns column
    /// names folded, and the dump and `inspect` name them as SQLite does (`appUserID`).
    private static let spellings: [String: String] = {
        var spellings: [String: String] = [:]
        for statement in inbox + ledger + reconcile + appStore + usage + metrics {
            var word = ""
            for character in statement + " " {
                if character.isLetter || character.isNumber || character == "_" {
                    word.append(character)
                } else if !word.isEmpty {
                    if word != word.lowercased(), word != word.uppercased() { spellings[word.lowercased()] = word }
                    word = ""
                }
            }
        }
        return spellings
    }()

    /// A folded column name as the schema spells it.
    static func spelling(of folded: String) -> String { spellings[folded] ?? folded }
}
