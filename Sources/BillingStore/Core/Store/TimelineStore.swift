import BillingCore

/// A user's history across both stores, newest first: the Stripe events and App Store
/// notifications and transactions of their purchases, grants made, revoked and expired, usage
/// periods begun and limits hit, outbound deliveries, reconcile's repairs, and the access each
/// step left them with. Read by user through indexes, a page at a time (``TimelineCursor``).
public protocol TimelineStore: Sendable {
    /// Up to `limit` items older than `cursor` (the newest when nil), newest first. `now` (Unix
    /// seconds) decides which grants have expired.
    func timeline(of user: String, in scope: ServiceScope, limit: Int, after cursor: TimelineCursor?, now: Int64) async throws -> TimelinePage
}
