import BillingCore

/// The `promotionalGrant` table's statements and rows, shared by both backends (`?` placeholders;
/// PostgreSQL numbers them). One owner of the table's SQL: SQLite/SQLiteGrants.swift and
/// Postgres/PostgresGrants.swift execute these.
package enum GrantRows {
    /// The columns ``grant(from:)`` reads, in order.
    static let columns = "id, tier, startsAt, expiresAt, reason, createdBy, revokedAt, revokedBy"

    /// A user's grants in one scope, newest first. Arguments: account, livemode, user.
    static let userSQL = """
        SELECT \(columns) FROM promotionalGrant WHERE account = ? AND livemode = ? AND appUserID = ?
        ORDER BY startsAt DESC, id DESC
        """

    /// One grant of a user. Arguments: account, livemode, id, user.
    static let oneSQL = """
        SELECT \(columns) FROM promotionalGrant WHERE account = ? AND livemode = ? AND id = ? AND appUserID = ?
        """

    /// The grant an idempotency key made for a user, with the request it was made for.
    /// Arguments: account, livemode, user, key.
    static let byKeySQL = """
        SELECT \(columns), requestFingerprint FROM promotionalGrant
        WHERE account = ? AND livemode = ? AND appUserID = ? AND idempotencyKey = ?
        """

    /// A new grant; a key used before for the user inserts nothing (the unique index decides,
    /// also between two replicas). Returns the id when inserted.
    static let insertSQL = """
        INSERT INTO promotionalGrant (account, livemode, id, appUserID, tier, startsAt, expiresAt, reason, createdBy,
            idempotencyKey, requestFingerprint)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (account, livemode, appUserID, idempotencyKey) WHERE idempotencyKey IS NOT NULL DO NOTHING
        RETURNING id
        """

    /// Marks a grant revoked unless it was. Returns the id when it changed.
    /// Arguments: revokedAt, revokedBy, account, livemode, id, user.
    static let revokeSQL = """
        UPDATE promotionalGrant SET revokedAt = ?, revokedBy = ?
        WHERE account = ? AND livemode = ? AND id = ? AND appUserID = ? AND revokedAt IS NULL
        RETURNING id
        """

    static func userArguments(_ user: String, in scope: ServiceScope) -> [LedgerValue] {
        [.text(scope.account), .boolean(scope.livemode), .text(user)]
    }

    static func insertArguments(_ grant: PromotionalGrant, request: GrantRequest, user: String, in scope: ServiceScope) -> [LedgerValue] {
        [
            .text(scope.account), .boolean(scope.livemode), .text(grant.id), .text(user), .text(grant.tier), .integer(grant.startsAt),
            .integer(grant.expiresAt), .text(grant.reason), .text(grant.createdBy),
            request.idempotencyKey.map(LedgerValue.text) ?? .null, .text(request.fingerprint),
        ]
    }

    static func grant(from row: some LedgerColumnReading) -> PromotionalGrant {
        PromotionalGrant(
            id: row.string(0) ?? "", tier: row.string(1) ?? "", startsAt: row.int64(2) ?? 0, expiresAt: row.int64(3) ?? 0,
            reason: row.string(4) ?? "", createdBy: row.string(5) ?? "", revokedAt: row.int64(6), revokedBy: row.string(7))
    }

    /// The grant a request makes at `now`.
    static func newGrant(_ request: GrantRequest, now: Int64) -> PromotionalGrant {
        PromotionalGrant(
            id: newID(), tier: request.tier, startsAt: now, expiresAt: request.expiresAt, reason: request.reason,
            createdBy: request.createdBy)
    }

    /// What a key's earlier grant means for this request.
    static func replay(_ existing: PromotionalGrant, fingerprint: String?, request: GrantRequest) -> GrantCreation {
        fingerprint == request.fingerprint ? .replayed(existing) : .keyReused(existing)
    }

    private static let alphabet: [UInt8] = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)

    /// `grant_` and 24 random base-32 characters (120 bits).
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        var words = (generator.next() as UInt64, generator.next() as UInt64)
        var id: [UInt8] = Array("grant_".utf8)
        for index in 0..<24 {
            let digit: UInt64
            if index < 12 {
                digit = words.0 & 31
                words.0 >>= 5
            } else {
                digit = words.1 & 31
                words.1 >>= 5
            }
            id.append(alphabet[Int(digit)])
        }
        return String(decoding: id, as: UTF8.self)
    }
}
