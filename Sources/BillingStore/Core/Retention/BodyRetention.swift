import Foundation
import BillingCore

/// Retention of the inbox's stored bodies (issue 38): which bodies may go, how many events each
/// store holds, and giving the freed pages back. Two backends implement it alike; the decisions
/// are ``BodyRetentionRows``'s, written once.
///
/// A body is pruned only when it no longer determines any state: a Stripe event (never an App
/// Store one, whose notification UUIDs and small bodies stay) older than the window, already
/// applied or ignored, about an object whose ledger row holds a *newer* snapshot, carried by another
/// event whose body is still stored. The event's row stays, so dedupe of a redelivery still answers
/// duplicate, and replay, which applies only events with bodies, rebuilds the same row (the winner
/// is still there) and keeps the pruned events' subscription facts (``MetricsFactRows/replayDeleteSQL``).
public protocol BodyRetentionStore: Sendable {
    /// Events in the inbox per store (`stripe`, `appstore`), with how many still have their body.
    func eventCounts() async throws -> [String: InboxEventCount]
    /// Prunes (or, with `dryRun`, only counts) the bodies ``BodyRetentionRows`` allows, in
    /// transactions of `batchSize`, telling `progress` the running total after each.
    func pruneBodies(olderThan cutoff: Int64, batchSize: Int, dryRun: Bool, progress: @Sendable (BodyPruneResult) -> Void) async throws
        -> BodyPruneResult
    /// Gives freed space back: on SQLite `PRAGMA incremental_vacuum` (or, `full`, a `VACUUM` that
    /// also turns incremental auto-vacuum on for a ledger created before it), on PostgreSQL a
    /// `VACUUM` of the inbox's bodies (`full`: `VACUUM FULL`, which locks the table while it runs).
    func reclaimSpace(full: Bool) async throws
    /// Compresses the bodies stored verbatim (``BodyEncoding/verbatim``: written before bodies
    /// were compressed) in transactions of `batchSize`, each row rewritten only if it is still
    /// verbatim, telling `progress` the running total after each; with `dryRun`, only counts them.
    /// Resumable: a run stopped half-way leaves the rows it did compressed and the others as
    /// they were, both readable.
    func compressBodies(batchSize: Int, dryRun: Bool, progress: @Sendable (BodyCompressResult) -> Void) async throws -> BodyCompressResult
    /// Compresses the objects' raw JSON stored verbatim (rows written before it was compressed,
    /// see ``StoredJSON``) in transactions of at most `batchSize` rows, telling `progress` the
    /// running total after each batch read; with `dryRun`, only counts them. Resumable, and done
    /// once: see ``LedgerJSONCompression``.
    func compressLedgerJSON(batchSize: Int, dryRun: Bool, progress: @Sendable (LedgerJSONCompressResult) -> Void) async throws
        -> LedgerJSONCompressResult
}

/// What one run of ``BodyRetentionStore/compressBodies(batchSize:dryRun:progress:)`` did.
public struct BodyCompressResult: Sendable, Equatable {
    /// Verbatim bodies read (dry run: found).
    public var bodies = 0
    /// Those of them now compressed; a body compressing would not shrink stays verbatim.
    public var compressed = 0
    /// The bodies' bytes before, and after (dry run: before).
    public var bytesBefore: Int64 = 0
    public var bytesAfter: Int64 = 0

    public init() {}

    /// Compresses one batch's `(seq, body)` rows in memory: the rows to rewrite, with the tally.
    mutating func compress(_ rows: [(seq: Int64, body: [UInt8])], dryRun: Bool) -> [(seq: Int64, stored: StoredBody)] {
        bodies += rows.count
        var rewrites: [(seq: Int64, stored: StoredBody)] = []
        for row in rows {
            bytesBefore += Int64(row.body.count)
            let stored = dryRun ? StoredBody(bytes: row.body, encoding: .verbatim) : StoredBody(compressing: row.body)
            bytesAfter += Int64(stored.bytes.count)
            if stored.encoding != .verbatim { rewrites.append((row.seq, stored)) }
        }
        compressed += rewrites.count
        return rewrites
    }
}

/// The events of one store in the inbox.
public struct InboxEventCount: Sendable, Equatable {
    public var events: Int
    /// Events whose body is still stored; the others were pruned.
    public var bodies: Int

    public init(events: Int, bodies: Int) {
        self.events = events
        self.bodies = bodies
    }

    public var pruned: Int { events - bodies }
}

/// What one pruning did (or, in a dry run, would do).
public struct BodyPruneResult: Sendable, Equatable {
    /// Bodies removed (dry run: that would be removed).
    public var bodies = 0
    /// Their bytes as stored.
    public var bytes: Int64 = 0

    public init(bodies: Int = 0, bytes: Int64 = 0) {
        self.bodies = bodies
        self.bytes = bytes
    }
}

/// The retention window: the accepted range and the spelling `400d`, shared by the setting and
/// `billingd compact --older-than`.
public enum BodyRetentionWindow {
    /// Days a body is kept at least: Stripe retries for 3 days and its `/v1/events` keeps 30, so
    /// event ids and bodies stay well past both. At most 100 years.
    public static let days: ClosedRange<Int> = 35...36_500
    /// What a setting or option accepts, for messages.
    public static let accepted = "a number of days from 35 to 36500 written with d, such as 400d (unset: bodies are kept forever)"

    /// The days in `400d`, nil for any other spelling or a number outside ``days``.
    public static func parseDays(_ text: String) -> Int? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasSuffix("d"), let number = Int(trimmed.dropLast()), trimmed.first?.isNumber == true,
            days.contains(number)
        else { return nil }
        return number
    }

    /// The cutoff in Unix seconds: events created before it are outside a window of `days` at `now`.
    public static func cutoff(days: Int, now: Int64) -> Int64 { now - Int64(days) * 86_400 }
}

/// The retention's SQL, the same on both backends (`?` placeholders, which PostgreSQL's side numbers).
enum BodyRetentionRows {
    /// The Stripe object types whose ledger row says which event's snapshot it holds
    /// (`vEventID`), with that table. An event about any other object (a charge, an unknown type)
    /// keeps its body: nothing proves it superseded.
    static let supersedable: [(objectType: String, table: String)] = [
        ("customer", "customer"), ("subscription", "subscription"), ("invoice", "invoice"), ("payment_method", "paymentMethod"),
        ("price", "price"), ("product", "product"), ("checkout.session", "checkoutSession"), ("invoice_payment", "invoicePayment"),
        ("refund", "stripeRefund"),
    ]

    /// The bodies of events about objects of type `?` in `table`, created before `?` (cutoff), that
    /// may go: seq and bytes, in inbox order. Without `seqs`, a scan: up to `?` (limit) of them after
    /// inbox position `?`, read outside any write. With `seqs` (integers a scan gave, never input),
    /// the same conditions checked again for those alone, inside the transaction that deletes them:
    /// so the write holds its lock only for a short look-up, and a body is deleted only if it may
    /// still go (a replay run meanwhile may have queued its event again).
    static func candidatesSQL(table: String, among seqs: [Int64]? = nil) -> String {
        let position = seqs.map { "e.seq IN (\($0.map(String.init).joined(separator: ", ")))" } ?? "e.seq > ?"
        return """
            SELECT e.seq AS seq, length(b.body) AS bytes
            FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
            WHERE e.objectType = ? AND e.created < ? AND \(position)
                AND e.source IN ('\(InboxSource.webhook.rawValue)', '\(InboxSource.api.rawValue)')
                AND e.status IN (\(InboxStatus.sqlList([.applied, .ignored])))
                AND EXISTS (
                    SELECT 1 FROM \(table) r
                    JOIN inboxEvent w ON w.eventID = r.vEventID AND w.account = r.account AND w.livemode = r.livemode
                    JOIN inboxBody wb ON wb.seq = w.seq
                    WHERE r.account = e.account AND r.livemode = e.livemode AND r.id = e.objectID AND r.vEventID <> e.eventID)
            ORDER BY e.seq\(seqs == nil ? " LIMIT ?" : "")
            """
    }

    /// Up to `?` (limit) bodies stored verbatim after inbox position `?`, in order: seq, body.
    static let verbatimSQL = "SELECT seq, body FROM inboxBody WHERE encoding = \(BodyEncoding.verbatim.rawValue) AND seq > ? ORDER BY seq LIMIT ?"

    /// Rewrites one body compressed (`?` the bytes, `?` the encoding, `?` the seq), if it is still
    /// verbatim.
    static let compressSQL = "UPDATE inboxBody SET body = ?, encoding = ? WHERE seq = ? AND encoding = \(BodyEncoding.verbatim.rawValue)"

    /// Removes the bodies of the given inbox positions (integers the candidates gave, never input).
    static func deleteSQL(_ seqs: [Int64]) -> String {
        "DELETE FROM inboxBody WHERE seq IN (\(seqs.map(String.init).joined(separator: ", ")))"
    }

    /// Events and bodies per store: App Store rows are those of its sources.
    static let countsSQL = """
        SELECT CASE WHEN e.source IN ('\(InboxSource.webhook.rawValue)', '\(InboxSource.api.rawValue)') THEN 'stripe' ELSE 'appstore' END AS store,
            count(*) AS events, count(b.seq) AS bodies
        FROM inboxEvent e LEFT JOIN inboxBody b ON b.seq = e.seq
        GROUP BY 1
        """

    /// Both stores, zero when the inbox holds none of one.
    static func counts(_ rows: [(store: String, events: Int, bodies: Int)]) -> [String: InboxEventCount] {
        var counts = ["stripe": InboxEventCount(events: 0, bodies: 0), "appstore": InboxEventCount(events: 0, bodies: 0)]
        for row in rows { counts[row.store] = InboxEventCount(events: row.events, bodies: row.bodies) }
        return counts
    }

}
