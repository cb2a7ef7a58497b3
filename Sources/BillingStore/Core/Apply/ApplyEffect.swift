/// What applying one snapshot did to the ledger.
public enum ApplyEffect: String, Sendable, Codable {
    /// The snapshot was newer and is now the ledger's state of the object.
    case applied
    /// The ledger already held a newer snapshot; nothing changed.
    case stale
    /// The same event had already shaped the object.
    case unchanged
    /// Tied with the held snapshot on all evidence; the ledger chose by event id and marked the
    /// object for re-fetch.
    case ambiguous
    /// Stored for the record, nothing in the ledger to change (`invoice.upcoming`).
    case recorded
}
