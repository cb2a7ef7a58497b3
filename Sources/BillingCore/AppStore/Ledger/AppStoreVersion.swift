/// The ordering rule of App Store data. Apple delivers notifications out of order and retries
/// them for days; the app forwards transactions it may have held for a while. Every piece is
/// signed with a `signedDate` (Unix ms), and the ledger keeps, whatever the order of arrival:
///
/// 1. **A transaction's fields** come from its snapshot with the greatest `signedDate` (then the
///    greatest source id, so that exact ties resolve the same way in every order).
/// 2. **A revocation is sticky.** A transaction is revoked if any snapshot carried a
///    `revocationDate`, unless a `REFUND_REVERSED` notification signed *later* than the latest
///    revoking snapshot reinstated it. An old cached copy without the revocation never undoes it.
/// 3. **An upgrade is final.** Once a snapshot says `isUpgraded`, the transaction no longer
///    entitles.
/// 4. **A subscription's renewal state** (auto-renew, pending product, expiration intent, billing
///    retry, grace period) comes from the renewal info with the greatest `signedDate`; an older
///    one never overwrites it.
/// 5. **A subscription's current product and period** come from its transaction with the latest
///    `expiresDate` that is neither revoked nor upgraded away — computed from the set of
///    transactions, so a REFUND of an earlier period, though it is the newest notification, does
///    not move the current period back.
/// 6. **The last notification** (type, subtype, `data.status`) is the one with the greatest
///    `signedDate`.
///
/// Each rule is a maximum over the pieces received, so applying them in any order, with any
/// duplicates, gives the same ledger.
public struct AppStoreVersion: Sendable, Hashable, Comparable {
    /// Unix milliseconds at which Apple signed the piece.
    public var signedDate: Int64
    /// The inbox id of the delivery that brought it: a deterministic tie-breaker.
    public var sourceID: String

    public init(signedDate: Int64, sourceID: String) {
        self.signedDate = signedDate
        self.sourceID = sourceID
    }

    public static func < (a: AppStoreVersion, b: AppStoreVersion) -> Bool {
        (a.signedDate, a.sourceID) < (b.signedDate, b.sourceID)
    }
}

/// Rule 2: whether a transaction is revoked, from the latest revoking snapshot and the latest
/// REFUND_REVERSED one.
public struct AppStoreRevocation: Sendable, Equatable {
    /// `signedDate` of the latest snapshot that carried a revocation; nil when none did.
    public var revokedSignedDate: Int64?
    /// `signedDate` of the latest REFUND_REVERSED snapshot; nil when none came.
    public var reversedSignedDate: Int64?

    public init(revokedSignedDate: Int64? = nil, reversedSignedDate: Int64? = nil) {
        self.revokedSignedDate = revokedSignedDate
        self.reversedSignedDate = reversedSignedDate
    }

    /// Revoked, unless a reversal was signed after the latest revocation.
    public var isRevoked: Bool {
        guard let revoked = revokedSignedDate else { return false }
        guard let reversed = reversedSignedDate else { return true }
        return reversed <= revoked
    }

    /// The state after one more snapshot.
    /// - Parameter reversal: the snapshot came with a `REFUND_REVERSED` notification.
    public func merging(_ transaction: AppStoreTransaction, reversal: Bool) -> AppStoreRevocation {
        var next = self
        if transaction.isRevoked, transaction.signedDate > (revokedSignedDate ?? .min) {
            next.revokedSignedDate = transaction.signedDate
        }
        if reversal, !transaction.isRevoked, transaction.signedDate > (reversedSignedDate ?? .min) {
            next.reversedSignedDate = transaction.signedDate
        }
        return next
    }
}
