import BillingCore
import BillingStore
import Foundation
import GRDB
import Testing

/// Builds Stripe events from the committed fixtures and runs them through the real inbox and
/// applier.
enum EventFactory {
    /// The repository, four levels above this file (Tests/BillingStoreTests/Support/).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `Fixtures/objects/<name>.json` as a mutable JSON object.
    static func object(_ name: String) -> [String: Any] {
        let data = try! Data(contentsOf: root.appendingPathComponent("Fixtures/objects/\(name).json"))
        return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    /// A complete event body around `object`.
    static func event(
        id: String, type: String, created: Int64, object: [String: Any], account: String? = nil, livemode: Bool = false,
        apiVersion: String = StripeAPIVersion.pinned
    ) -> [UInt8] {
        var envelope: [String: Any] = [
            "id": id, "object": "event", "api_version": apiVersion, "created": created, "livemode": livemode,
            "pending_webhooks": 1, "type": type, "data": ["object": object],
            "request": ["id": NSNull(), "idempotency_key": NSNull()],
        ]
        if let account { envelope["account"] = account }
        return Array(try! JSONSerialization.data(withJSONObject: envelope, options: [.sortedKeys]))
    }

    static func delivery(_ body: [UInt8]) throws -> InboxDelivery {
        InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
    }
}

/// An in-memory ledger with the real inbox and applier.
struct TestLedger {
    let database: SQLiteDatabase
    let inbox: SQLiteInbox
    let applier: SQLiteApplier

    init(configuration: ApplierConfiguration = .init(firstRetryDelay: .zero)) throws {
        database = try SQLiteDatabase.inMemory()
        inbox = SQLiteInbox(database: database)
        applier = SQLiteApplier(database: database, configuration: configuration)
    }

    /// Stores the bodies as deliveries and applies everything due.
    @discardableResult
    func deliver(_ bodies: [[UInt8]]) async throws -> ApplyPass {
        _ = try await inbox.insert(bodies.map(EventFactory.delivery))
        return try await applier.drain()
    }

    func row(_ table: String, id: String) async throws -> Row? {
        try await database.writer.read { db in try Row.fetchOne(db, sql: "SELECT * FROM \(table) WHERE id = ?", arguments: [id]) }
    }

    func rows(_ sql: String, _ arguments: StatementArguments = []) async throws -> [Row] {
        try await database.writer.read { db in try Row.fetchAll(db, sql: sql, arguments: arguments) }
    }

    func dump() async throws -> String {
        try await SQLiteMaintenance(database: database).dump()
    }
}
