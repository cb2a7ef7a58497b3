import BillingCore

/// Promotional grants: access to a tier given by an operator or the app, kept per mode and
/// account like the rest of a user's billing. A grant's insert and its revocation each announce
/// the user's changed view to the outbox in their own transaction; its expiry is announced by
/// the outbox's review of lapsed views, as a subscription's period end is. Grants are not
/// derived from the inbox: replay keeps them, copy and backup carry them.
public protocol GrantStore: Sendable {
    /// Gives the user a grant from `now` (Unix seconds), or, for an `Idempotency-Key` used before
    /// for the user, answers the grant it gave then (``GrantCreation/replayed(_:)``, or
    /// ``GrantCreation/keyReused(_:)`` when the request differs).
    func create(_ request: GrantRequest, for user: String, in scope: ServiceScope, now: Int64) async throws -> GrantCreation
    /// The user's grants, newest first, revoked and expired ones too.
    func grants(of user: String, in scope: ServiceScope) async throws -> [PromotionalGrant]
    /// Revokes one of the user's grants at `now` (Unix seconds) by `revoker`; a grant revoked
    /// before is answered as it is (revoking is idempotent). Nil when the user has no grant `id`.
    func revoke(_ id: String, of user: String, in scope: ServiceScope, by revoker: String, now: Int64) async throws -> PromotionalGrant?
}

/// A grant to make, checked: its tier is the catalog's, its expiry in the future and at most ten
/// years ahead, its reason given.
public struct GrantRequest: Sendable, Equatable {
    public var tier: String
    /// Unix seconds.
    public var expiresAt: Int64
    public var reason: String
    /// `api:LABEL` or `console:LABEL`.
    public var createdBy: String
    /// The client's `Idempotency-Key`, if it sent one.
    public var idempotencyKey: String?
    /// The request as sent, to tell a retry (the same) from a key used for another request.
    public var fingerprint: String

    public init(tier: String, expiresAt: Int64, reason: String, createdBy: String, idempotencyKey: String? = nil, fingerprint: String) {
        self.tier = tier
        self.expiresAt = expiresAt
        self.reason = reason
        self.createdBy = createdBy
        self.idempotencyKey = idempotencyKey
        self.fingerprint = fingerprint
    }
}

/// A grant store's failure that is no client's fault.
public enum GrantStoreError: Error, CustomStringConvertible {
    /// The insert of a grant without an idempotency key inserted nothing.
    case notInserted

    public var description: String { "the grant was not inserted" }
}

/// What ``GrantStore/create(_:for:in:now:)`` did.
public enum GrantCreation: Sendable, Equatable {
    /// A new grant.
    case created(PromotionalGrant)
    /// The idempotency key was used before for the same request: its grant, unchanged.
    case replayed(PromotionalGrant)
    /// The idempotency key was used before for a different request: that request's grant.
    case keyReused(PromotionalGrant)
}
