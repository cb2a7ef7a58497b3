/// The rule of a lease row, the same on every backend: a holder takes the lease when nobody has
/// it, when it already holds it (renewing it), or when the holder's expiry has passed; otherwise
/// the caller learns who holds it until when. A renewal keeps a lease only while its holder
/// still has the row (an expired lease nobody took yet may still be renewed).
struct LeaseRow: Sendable, Equatable {
    let holder: String
    let acquiredAt: Int64
    let expiresAt: Int64

    /// Whether `holder` may take the lease at `now` while this row stands.
    func yields(to holder: String, now: Int64) -> Bool {
        self.holder == holder || expiresAt <= now
    }

    /// The lease as held by `holder` from `now` for `ttl` seconds.
    static func taken(by holder: String, now: Int64, ttl: Int64) -> LeaseRow {
        LeaseRow(holder: holder, acquiredAt: now, expiresAt: now + ttl)
    }

    /// What a caller who may not have the lease is told; `nil` (the row went meanwhile) is told
    /// that nobody holds it.
    static func refusal(_ row: LeaseRow?) -> LeaseHeld {
        LeaseHeld(holder: row?.holder ?? "nobody", acquiredAt: row?.acquiredAt ?? 0, expiresAt: row?.expiresAt ?? 0)
    }
}
