/// An object's raw JSON as the ledger keeps it (`raw` of the Stripe tables, `raw` and `renewalRaw`
/// of the App Store's), on both backends: one zstd frame as ``StoredBody`` writes it (level 3, a
/// checksum of the content) when that is smaller, else the JSON itself.
///
/// No column says which, unlike the inbox's bodies: these columns only ever hold a JSON object
/// billingd parsed, which begins with `{`, and a zstd frame begins with its magic number
/// `28 B5 2F FD` (`(`, which cannot begin JSON), so the first bytes tell. Rows written before
/// raw JSON was compressed read as they are; `billingd compact` compresses them in batches
/// (``BodyRetentionStore/compressLedgerJSON(batchSize:dryRun:progress:)``).
package enum StoredJSON {
    /// The first four bytes of every zstd frame (RFC 8878, 3.1.1).
    package static let frameMagic: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]

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
}
