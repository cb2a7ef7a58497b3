import BillingCore

/// An object's raw JSON as the ledger keeps it (`raw` of the Stripe tables, `raw` and `renewalRaw`
/// of the App Store's), on both backends: one zstd frame as ``StoredBody`` writes it (level 3, a
/// checksum of the content) when that is smaller, else the JSON itself; or, for a Stripe object
/// whose row an event wrote, nothing at all: its JSON is `data.object` of that event's body, which
/// the inbox keeps (``inEventBody``).
///
/// Kept once: the object's JSON is the exact bytes of `data.object` in the body of the event that
/// wrote the row (the row's `vEventID`), and retention never prunes the body of the event a row
/// names (``BodyRetentionRows/candidatesSQL(table:among:)``), so that body is the copy. Objects
/// read from Stripe's API (reconcile, re-fetches; `vEventID` `fetch:…`) have no such body and keep
/// their JSON in the row.
///
/// No column says which, unlike the inbox's bodies: these columns only ever hold a JSON object
/// billingd parsed, which begins with `{`, and a zstd frame begins with its magic number
/// `28 B5 2F FD` (`(`, which cannot begin JSON), so the first bytes tell. Rows written before
/// raw JSON was compressed read as they are; `billingd compact` compresses them in batches
/// (``BodyRetentionStore/compressLedgerJSON(batchSize:dryRun:progress:)``).
package enum StoredJSON {
    /// The first four bytes of every zstd frame (RFC 8878, 3.1.1).
    package static let frameMagic: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]

    /// What a Stripe object's row stores when its JSON is `data.object` of the body of the event
    /// the row names (`vEventID`, with the row's account and livemode). Never a JSON object, nor a frame.
    package static let inEventBody: [UInt8] = []

    /// `json` as the ledger stores it.
    package static func encode(_ json: some Collection<UInt8>) -> [UInt8] {
        StoredBody(compressing: Array(json)).bytes
    }

    package static func isCompressed(_ stored: some Collection<UInt8>) -> Bool {
        stored.starts(with: frameMagic)
    }

    /// The JSON a stored column holds.
    package static func decode(_ stored: some Collection<UInt8>) throws(StoredBodyError) -> [UInt8] {
        isCompressed(stored) ? try StoredBody.decompress(Array(stored)) : Array(stored)
    }

    /// The JSON of a Stripe object's row: its stored `raw`, or, when that is ``inEventBody``,
    /// `data.object` of `eventBody` (the stored body of the event the row names, as
    /// ``eventBodyColumn(of:)`` reads it; nil when the inbox holds none).
    package static func json(stored: some Collection<UInt8>, eventBody: [UInt8]?) throws(StoredBodyError) -> [UInt8] {
        guard stored.isEmpty else { return try decode(stored) }
        guard let eventBody else { throw StoredBodyError("the row's JSON is in the body of its event, and the inbox holds no body for that event") }
        let body = try decode(eventBody)
        guard let object = RawObjectLocator.object(in: body) else { throw StoredBodyError("the body of the row's event has no data.object") }
        return Array(object)
    }

    /// A column, named `eventBody`, of a query on a Stripe object table `alias`: the stored body of
    /// the event its row names when the row keeps its JSON there (``inEventBody``), NULL otherwise.
    /// A body is told from its encoding by its bytes (a zstd frame's magic number, or JSON), as
    /// ``decode(_:)`` does. Both dialects read it alike; the inbox's `(eventID, account,
    /// livemode)` is unique and indexed.
    package static func eventBodyColumn(of alias: String) -> String {
        """
        (SELECT b.body FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
            WHERE length(\(alias).raw) = 0 AND e.eventID = \(alias).vEventID AND e.account = \(alias).account
                AND e.livemode = \(alias).livemode) AS eventBody
        """
    }
}
