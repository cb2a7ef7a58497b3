import BillingCore
import Foundation
import Testing

@testable import BillingStore

/// The set-wise plan PostgreSQL's group commit executes (``LedgerBatch``), tested without a
/// database: it must decide each snapshot as the row-by-row apply would, against the held
/// version or an earlier write of the same batch, and write each object once, as its last write.
/// The contract suite's ordering tests check that a backend runs it to the same ledger.
@Suite("The ledger batch: a group commit's snapshots decided set-wise, as one after another")
struct LedgerBatchTests {
    static func snapshot(_ name: String, kind: LedgerObjectKind, event: String, created: Int64, edit: (inout [String: Any]) -> Void = { _ in })
        throws -> LedgerSnapshot
    {
        var object = EventFactory.object(name)
        edit(&object)
        return try LedgerSnapshot.decode(
            kind: kind, deletion: false, eventType: nil, eventID: event, eventCreated: created,
            objectJSON: Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))[...])
    }

    static func item(_ snapshot: LedgerSnapshot) -> LedgerBatch.Item {
        LedgerBatch.Item(snapshot: snapshot, account: "", livemode: false)
    }

    @Test("Two snapshots of one object, newer first: the older is stale, and the one row written is the newer's")
    func olderAfterNewer() throws {
        let newer = try Self.snapshot("customer", kind: .customer, event: "evt_2", created: 2_000) { $0["email"] = "new@example.com" }
        let older = try Self.snapshot("customer", kind: .customer, event: "evt_1", created: 1_000) { $0["email"] = "old@example.com" }
        let plan = LedgerBatch([Self.item(newer), Self.item(older)], held: [:])
        #expect(plan.effects == [.applied, .stale])
        #expect(plan.upserts.map(\.table) == ["customer"])
        let rows = try #require(plan.upserts.first).rows
        #expect(rows.count == 1)
        #expect(rows[0].contains(.text("new@example.com")))
        #expect(!rows[0].contains(.text("old@example.com")))
    }

    @Test("Older first, then newer: both apply, and the row written is the later one's")
    func newerAfterOlder() throws {
        let older = try Self.snapshot("customer", kind: .customer, event: "evt_1", created: 1_000) { $0["email"] = "old@example.com" }
        let newer = try Self.snapshot("customer", kind: .customer, event: "evt_2", created: 2_000) { $0["email"] = "new@example.com" }
        let plan = LedgerBatch([Self.item(older), Self.item(newer)], held: [:])
        #expect(plan.effects == [.applied, .applied])
        #expect(plan.upserts.first?.rows.count == 1)
        #expect(plan.upserts.first?.rows.first?.contains(.text("new@example.com")) == true)
    }

    @Test("A snapshot older than the version held writes nothing; the same event again is unchanged")
    func heldVersionWins() throws {
        let held = try Self.snapshot("customer", kind: .customer, event: "evt_9", created: 9_000)
        let older = try Self.snapshot("customer", kind: .customer, event: "evt_1", created: 1_000)
        let key = LedgerBatch.key(Self.item(held))
        #expect(LedgerBatch.keys([Self.item(older), Self.item(held)]) == [key])
        let plan = LedgerBatch([Self.item(older), Self.item(held)], held: [key: held.version])
        #expect(plan.effects == [.stale, .unchanged])
        #expect(plan.upserts.isEmpty)
        #expect(plan.replacedParents.isEmpty)
    }

    @Test("An invoice written twice replaces its lines once, with the last write's lines")
    func childrenOfLastWrite() throws {
        let first = try Self.snapshot("invoice", kind: .invoice, event: "evt_1", created: 1_000)
        let second = try Self.snapshot("invoice", kind: .invoice, event: "evt_2", created: 2_000) { invoice in
            var lines = invoice["lines"] as! [String: Any]
            var data = lines["data"] as! [[String: Any]]
            var extra = data[0]
            extra["id"] = "il_second"
            data.append(extra)
            lines["data"] = data
            invoice["lines"] = lines
        }
        let plan = LedgerBatch([Self.item(first), Self.item(second)], held: [:])
        #expect(plan.effects == [.applied, .applied])
        #expect(plan.replacedParents.count == 1)
        #expect(plan.replacedParents.first?.id == first.objectID)
        let lines = plan.children.flatMap(\.rows)
        #expect(lines.count == 2)
        #expect(lines.contains { $0.contains(.text("il_second")) })
    }

    @Test("Payment method links keep the first customer and the earliest sighting")
    func paymentMethodLinks() throws {
        let later = try Self.snapshot("payment_method", kind: .paymentMethod, event: "evt_2", created: 2_000)
        let earlier = try Self.snapshot("payment_method", kind: .paymentMethod, event: "evt_1", created: 1_000)
        let plan = LedgerBatch([Self.item(later), Self.item(earlier)], held: [:])
        #expect(plan.effects == [.applied, .stale])
        let links = plan.paymentMethodLinks
        #expect(links.count == 1)
        let single = ReconcileRepairRows.linkArguments(
            earlier, customer: try #require(ReconcileRepairRows.paymentMethodLink(earlier)), account: "", livemode: false)
        #expect(links.first?[4] == single[4])
    }
}
