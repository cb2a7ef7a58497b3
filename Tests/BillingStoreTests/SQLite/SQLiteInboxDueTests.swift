import Foundation
import GRDB
import Testing

@testable import BillingStore

/// What the applier reads from the inbox on each pass (``SQLiteInbox/due(now:after:limit:)``):
/// pending events and failed events whose next try is due, merged in inbox order.
@Suite("The applier's read of due events from a SQLite inbox")
struct SQLiteInboxDueTests {
    /// An inbox of 12 events: seq 1–4 applied, 5 pending, 6 failed and due at 1,000, 7 failed and
    /// due at 5,000, 8 dead, 9 ignored, 10 pending, 11 failed with no next try set, 12 pending.
    func inbox() async throws -> SQLiteDatabase {
        let database = try SQLiteDatabase.inMemory()
        let rows: [(status: String, nextAttemptAt: Int64?)] = [
            ("applied", nil), ("applied", nil), ("applied", nil), ("applied", nil), ("pending", nil), ("failed", 1_000),
            ("failed", 5_000), ("dead", nil), ("ignored", nil), ("pending", nil), ("failed", nil), ("pending", nil),
        ]
        try await database.writer.write { db in
            for (offset, row) in rows.enumerated() {
                let seq = offset + 1
                try db.execute(
                    sql: """
                        INSERT INTO inboxEvent (seq, eventID, account, livemode, type, created, receivedAt, source, status, nextAttemptAt)
                        VALUES (?, ?, 'acct_1', 0, 'customer.updated', 1, 1, 'webhook', ?, ?)
                        """,
                    arguments: [seq, "evt_\(seq)", row.status, row.nextAttemptAt])
                try db.execute(sql: "INSERT INTO inboxBody (seq, body) VALUES (?, ?)", arguments: [seq, Data("{\"n\":\(seq)}".utf8)])
            }
        }
        return database
    }

    @Test(
        "Pending and due failed events come in inbox order after the cursor, up to the limit; failed ones not yet due, dead, applied and ignored ones never",
        arguments: [
            (now: Int64(0), after: Int64(0), limit: 100, expected: [5, 10, 11, 12] as [Int64]),
            (now: 1_000, after: 0, limit: 100, expected: [5, 6, 10, 11, 12]),
            (now: 5_000, after: 0, limit: 100, expected: [5, 6, 7, 10, 11, 12]),
            (now: 5_000, after: 6, limit: 100, expected: [7, 10, 11, 12]),
            (now: 5_000, after: 0, limit: 3, expected: [5, 6, 7]),
            (now: 5_000, after: 12, limit: 100, expected: []),
        ])
    func due(now: Int64, after: Int64, limit: Int, expected: [Int64]) async throws {
        let database = try await inbox()
        defer { try? database.close() }
        let due = try await SQLiteInbox(database: database).due(now: now, after: after, limit: limit)
        #expect(due.map(\.seq) == expected)
        #expect(due.map(\.eventID) == expected.map { "evt_\($0)" })
        #expect(due.map { String(decoding: $0.body, as: UTF8.self) } == expected.map { "{\"n\":\($0)}" })
    }
}
