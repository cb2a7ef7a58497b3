import BillingCore
@testable import BillingStore
import Foundation
import Testing

@Suite("The raw-JSON migration keeps a Stripe object's JSON once, whichever billingd wrote the row")
struct LedgerJSONMigrationTests {
    static let subscriptions = LedgerJSONCompression.columns.first { $0.table == "subscription" }!
    static let appStoreTransactions = LedgerJSONCompression.columns.first { $0.table == "appStoreTransaction" }!

    /// An event carrying `object`, its body as the inbox stores it (compressed), and the object's JSON.
    static func event(_ id: String, status: String) -> (body: [UInt8], json: [UInt8]) {
        var object = EventFactory.object("subscription")
        object["id"] = "sub_\(id)"
        object["status"] = status
        let body = EventFactory.event(id: id, type: "customer.subscription.updated", created: 1_000, object: object)
        return (StoredBody(compressing: body).bytes, Array(RawObjectLocator.object(in: body)!))
    }

    /// A row as the batch query reads a subscription: key, stored raw, vEventID, its event's stored body.
    static func row(_ id: String, raw: [UInt8], eventID: String, body: [UInt8]?) -> [LedgerValue] {
        [.text(""), .boolean(false), .text("sub_\(id)"), .blob(raw[...]), .text(eventID), body.map { .blob($0[...]) } ?? .null]
    }

    @Test("JSON its event's body holds, verbatim (before 7a3280a) or compressed (b8c6ddd to 9486685), is dropped from the row; other JSON is compressed; each update checks the bytes read and the event named")
    func rewrites() throws {
        let verbatim = Self.event("evt_m1", status: "active")
        let compressed = Self.event("evt_m2", status: "past_due")
        let differs = Self.event("evt_m3", status: "trialing")
        let fetched = Array(try JSONSerialization.data(withJSONObject: EventFactory.object("subscription"))) + Array(repeating: 0x20, count: 400)
        let rows = [
            Self.row("m1", raw: verbatim.json, eventID: "evt_m1", body: verbatim.body),
            Self.row("m2", raw: StoredJSON.encode(compressed.json), eventID: "evt_m2", body: compressed.body),
            // The row's JSON is not its event's data.object (a repair since): kept, compressed.
            Self.row("m3", raw: Array(differs.json.dropLast()) + Array(" }".utf8), eventID: "evt_m3", body: differs.body),
            // Read from the API: no body; compressed.
            Self.row("m4", raw: fetched, eventID: "fetch:req_1", body: nil),
            // Already kept once, or already compressed with no body: nothing to do.
            Self.row("m5", raw: StoredJSON.inEventBody, eventID: "evt_m5", body: verbatim.body),
            Self.row("m6", raw: StoredJSON.encode(fetched), eventID: "fetch:req_2", body: nil),
        ]

        var dry = LedgerJSONCompressResult()
        #expect(LedgerJSONCompression.rewrites(rows, column: Self.subscriptions, dryRun: true, tally: &dry).isEmpty, "a dry run writes nothing")
        #expect(dry.inEventBodies == 2 && dry.objects == 2 && dry.compressed == 0, "\(dry)")

        var tally = LedgerJSONCompressResult()
        let updates = LedgerJSONCompression.rewrites(rows, column: Self.subscriptions, dryRun: false, tally: &tally)
        #expect(tally.inEventBodies == 2 && tally.objects == 2 && tally.compressed == 2, "\(tally)")
        #expect(updates.map { $0[3] } == [.text("sub_m1"), .text("sub_m2"), .text("sub_m3"), .text("sub_m4")])
        // New bytes, the key, then the bytes read and the event named: a row serve rewrote meanwhile is left alone.
        #expect(updates[0] == [.blob([][...]), .text(""), .boolean(false), .text("sub_m1"), .blob(verbatim.json[...]), .text("evt_m1")])
        #expect(updates[1].first == .blob([][...]) && updates[1].last == .text("evt_m2"))
        for update in updates[2...] {
            guard case .blob(let stored) = update[0], case .blob(let read) = update[4] else { Issue.record("\(update)"); continue }
            #expect(StoredJSON.isCompressed(stored) && stored.count < read.count)
            #expect(try StoredJSON.decode(stored) == Array(read), "compressed JSON decodes to the bytes read")
        }
        #expect(LedgerJSONCompression.updateSQL(Self.subscriptions).hasSuffix("AND raw = ? AND vEventID = ?"))
    }

    @Test("App Store rows have no event body: their JSON is compressed, and the update checks only the bytes")
    func appStoreRowsCompressed() throws {
        let json = Array(#"{"transactionId":"2000000001","productId":"pro.monthly","note":"\#(String(repeating: "a", count: 300))"}"#.utf8)
        var tally = LedgerJSONCompressResult()
        let updates = LedgerJSONCompression.rewrites(
            [[.text("Sandbox"), .text("2000000001"), .blob(json[...])]], column: Self.appStoreTransactions, dryRun: false, tally: &tally)
        #expect(tally.objects == 1 && tally.compressed == 1 && tally.inEventBodies == 0)
        #expect(updates.count == 1 && updates[0].count == 4 && updates[0].last == .blob(json[...]))
        #expect(!LedgerJSONCompression.batchSQL(Self.appStoreTransactions, after: false).contains("vEventID"))
    }

    @Test("A row that keeps its JSON in its event's body reads it from that body, and says so when the body is missing")
    func readsFromTheBody() throws {
        let event = Self.event("evt_m7", status: "active")
        #expect(try StoredJSON.json(stored: StoredJSON.inEventBody, eventBody: event.body) == event.json)
        #expect(try StoredJSON.json(stored: StoredJSON.encode(event.json), eventBody: nil) == event.json)
        #expect(try StoredJSON.json(stored: event.json, eventBody: nil) == event.json)
        #expect(throws: StoredBodyError.self) { try StoredJSON.json(stored: StoredJSON.inEventBody, eventBody: nil) }
        #expect(throws: StoredBodyError.self) { try StoredJSON.json(stored: StoredJSON.inEventBody, eventBody: Array(#"{"id":"evt"}"#.utf8)) }
    }
}
