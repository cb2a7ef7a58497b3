/// What the app acts on in a user's view, kept per user as the last view announced to the app:
/// the outbox diffs the view after a ledger change against it to say what happened. Codable so
/// that any store keeps it as one JSON text; Equatable so that an unchanged view costs nothing.
public struct UserAccessState: Codable, Equatable, Sendable {
    /// The granted tier's id; the default tier's when nothing grants access; nil for an unmapped price.
    public var plan: String?
    public var entitled: Bool
    /// ``AccessReason``'s raw value.
    public var why: String
    /// `stripe`, `app_store` or `grant`; nil without a subscription or grant.
    public var source: String?
    /// The deciding Stripe subscription, App Store original transaction, or grant.
    public var subscriptionID: String?
    /// Its status (Stripe's, or the App Store status by date).
    public var status: String?
    /// The Stripe price id, or the App Store product id.
    public var price: String?
    /// End of the paid period, Unix seconds.
    public var periodEnd: Int64?
    /// A live subscription set to end (`cancel_at_period_end`, `cancel_at`, App Store auto-renew off).
    public var cancelScheduled: Bool
    /// A payment failed and the store retries (`past_due`, `unpaid`, App Store grace or billing retry).
    public var billingIssue: Bool
    /// Refunded or revoked (App Store).
    public var revoked: Bool
    public var features: [String]
    /// Each limit as text: a count, or `unlimited`.
    public var limits: [String: String]

    public init(
        plan: String? = nil, entitled: Bool = false, why: String = AccessReason.free.rawValue, source: String? = nil,
        subscriptionID: String? = nil, status: String? = nil, price: String? = nil, periodEnd: Int64? = nil,
        cancelScheduled: Bool = false, billingIssue: Bool = false, revoked: Bool = false, features: [String] = [],
        limits: [String: String] = [:]
    ) {
        self.plan = plan
        self.entitled = entitled
        self.why = why
        self.source = source
        self.subscriptionID = subscriptionID
        self.status = status
        self.price = price
        self.periodEnd = periodEnd
        self.cancelScheduled = cancelScheduled
        self.billingIssue = billingIssue
        self.revoked = revoked
        self.features = features
        self.limits = limits
    }

    /// The state of a resolution, with the fields the subscription view shows.
    public init(_ resolution: PlanResolution) {
        self.init(
            plan: resolution.plan, entitled: resolution.entitled, why: resolution.why.rawValue, source: resolution.source?.rawValue,
            features: resolution.features.sorted(),
            limits: Dictionary(resolution.limits.map { limit -> (String, String) in
                switch limit.value {
                case .count(let count): (limit.key, String(count))
                case .unlimited: (limit.key, "unlimited")
                }
            }, uniquingKeysWith: { first, _ in first }))
        if let record = resolution.appStoreSubscription {
            let status = resolution.appStoreStatus ?? .expired
            subscriptionID = record.originalTransactionID
            self.status = status.rawValue
            price = record.productID
            periodEnd = record.expiresDate.map { $0 / 1000 }
            cancelScheduled = !record.isLifetime && record.autoRenewStatus == false && [.active, .gracePeriod].contains(status)
            billingIssue = status == .gracePeriod || status == .billingRetry
            revoked = record.revoked
        } else if let grant = resolution.grant {
            // A grant is announced like a subscription that ends at its expiry; a revoked one
            // simply ends (no refund: nothing was paid).
            subscriptionID = grant.id
            status = resolution.grantStatus
            periodEnd = grant.expiresAt
        } else if let subscription = resolution.subscription {
            let item = resolution.item
            subscriptionID = subscription.id
            status = subscription.status.rawValue
            price = item?.price ?? item?.lookupKey
            periodEnd = item?.currentPeriodEnd ?? subscription.currentPeriodEnd
            let live = [.active, .trialing, .pastDue].contains(subscription.status) && subscription.endedAt == nil
            cancelScheduled = live && (subscription.cancelAtPeriodEnd || subscription.cancelAt != nil)
            billingIssue = [.pastDue, .unpaid].contains(subscription.status)
        }
    }

    /// The fields that differ from `other`, by their names in the payload's `changes`.
    public func changedFields(from other: UserAccessState) -> [String] {
        var fields: [String] = []
        if plan != other.plan { fields.append("plan") }
        if entitled != other.entitled { fields.append("entitled") }
        if why != other.why { fields.append("why") }
        if source != other.source { fields.append("source") }
        if subscriptionID != other.subscriptionID { fields.append("subscription_id") }
        if status != other.status { fields.append("status") }
        if price != other.price { fields.append("price") }
        if periodEnd != other.periodEnd { fields.append("period_end") }
        if cancelScheduled != other.cancelScheduled { fields.append("cancel_scheduled") }
        if billingIssue != other.billingIssue { fields.append("billing_issue") }
        if revoked != other.revoked { fields.append("revoked") }
        if features != other.features { fields.append("features") }
        if limits != other.limits { fields.append("limits") }
        return fields
    }
}
