/// Why a user has the access they have, in one word the app can switch on.
public enum AccessReason: String, Sendable, Hashable, CaseIterable {
    /// No subscription at all: the default tier.
    case free
    /// In a trial (`trialing`).
    case trialing
    /// Paid and renewing (`active`).
    case active
    /// Paid, and set to end at a known time (`cancel_at_period_end` or `cancel_at`); access
    /// lasts until ``PlanResolution/endsAt``.
    case canceling
    /// A renewal payment failed (`past_due`) and the tier's grace period still runs.
    case grace
    /// The first payment is not complete yet (`incomplete`, e.g. awaiting 3-D Secure).
    case incomplete
    /// Collection is paused (`paused`, e.g. a trial ended without a payment method).
    case paused
    /// Had a subscription, none grants access now: canceled, ended at its period end, unpaid,
    /// `incomplete_expired`, or `past_due` beyond the grace period.
    case expired
    /// An App Store renewal failed and Apple keeps retrying without a grace period: no access
    /// until the payment goes through.
    case billingRetry = "billing_retry"
    /// The App Store purchase was refunded or its family sharing revoked.
    case revoked
    /// A promotional grant gives the tier until its expiry (``PromotionalGrant``).
    case granted

    /// Whether a subscription in this state grants its tier.
    public var grantsAccess: Bool {
        switch self {
        case .trialing, .active, .canceling, .grace, .granted: true
        case .free, .incomplete, .paused, .expired, .billingRetry, .revoked: false
        }
    }
}

/// What a user may do right now, derived from their subscriptions and the plan catalog.
public struct PlanResolution: Sendable, Equatable {
    /// The tier whose features and limits apply: the granted tier, else the default tier.
    public var tier: PlanTier
    /// The granted tier's id; the default tier's when nothing grants access; nil when the
    /// granting subscription's price is in no tier of the catalog (see ``unmappedPrice``).
    public var plan: String?
    /// Whether a subscription grants access now (``why`` is trialing, active, canceling or grace).
    public var entitled: Bool
    public var why: AccessReason
    /// Which store the deciding subscription is in; nil when the user has none.
    public var source: EntitlementSource?
    /// The Stripe subscription that decided: the granting one, else the most relevant of the
    /// others (a live one before an ended one, then the newest); nil when the user has none or
    /// an App Store purchase decided.
    public var subscription: LedgerSubscription?
    /// The App Store subscription (or one-time purchase) that decided, when one did.
    public var appStoreSubscription: AppStoreSubscriptionRecord?
    /// Its status at the time of resolution.
    public var appStoreStatus: AppStoreStatus?
    /// The promotional grant that decided, when one did.
    public var grant: PromotionalGrant?
    /// The item of ``subscription`` that granted the tier (or its first item).
    public var item: LedgerSubscription.Item?
    /// The quantity that per-seat limits counted: the granting item's quantity (1 when it has none).
    public var quantity: Int64?
    /// Until when the answer holds if nothing else happens: the end of the period or trial, the
    /// scheduled cancellation, or the end of the grace period. Nil when no subscription grants access.
    public var validUntil: Int64?
    /// When the `past_due` grace period ends; nil outside grace or for unlimited grace.
    public var graceUntil: Int64?
    /// When access ends or ended: the scheduled cancellation, or when the subscription ended.
    public var endsAt: Int64?
    public var features: [String]
    public var limits: [ResolvedLimit]
    /// The customer's active Stripe Entitlements (feature lookup keys), sorted.
    public var stripeEntitlements: [String]
    /// The price (id, else lookup key) of a granting subscription that no tier names; the app
    /// then gets ``plan`` nil with the default tier's features and limits.
    public var unmappedPrice: String?

    /// The deciding grant's status: `active` while it grants the tier, else `revoked` or
    /// `expired`; nil when no grant decided.
    public var grantStatus: String? {
        grant.map { entitled ? "active" : $0.revokedAt != nil ? "revoked" : "expired" }
    }

    /// One limit with the tier's rule applied to the subscription's quantity.
    public struct ResolvedLimit: Sendable, Equatable {
        public var key: String
        public var value: EntitlementLimit

        public init(key: String, value: EntitlementLimit) {
            self.key = key
            self.value = value
        }
    }
}

/// Where the deciding access comes from: the store a subscription was bought in, or a grant.
public enum EntitlementSource: String, Sendable, Hashable {
    case stripe
    case appStore = "app_store"
    /// A promotional grant (``PromotionalGrant``).
    case grant
}

extension PlanCatalog {
    /// Resolves a user's access from all their subscriptions (of one mode and account), in
    /// Stripe and in the App Store, and their promotional grants.
    ///
    /// Each subscription is judged alone: `trialing` and `active` grant their tier (until
    /// `cancel_at`, or the period end with `cancel_at_period_end`: past it nothing is granted
    /// even before Stripe's `customer.subscription.deleted` arrives); `past_due` grants it for the
    /// tier's grace days counted from when the unpaid invoice fell due (its due date, else its
    /// creation, else the start of the current period: Stripe starts the new period when it
    /// creates the renewal invoice); `unpaid`, `incomplete`, `incomplete_expired`, `canceled`,
    /// `paused` and statuses Stripe may add later grant nothing. Among granting subscriptions
    /// the highest-ranked tier wins, then the later `validUntil`; a price that no tier names
    /// ranks below every tier. App Store purchases are judged by ``AppStoreSubscriptionRecord/status(now:)``
    /// and ranked with the Stripe subscriptions: the highest tier any entitled source grants wins.
    /// A grant counts like a subscription of its tier from its start until its expiry (by date:
    /// past it, or once revoked, it grants nothing); a grant of a tier the catalog no longer has
    /// grants nothing.
    /// - Parameter now: Unix seconds.
    public func resolve(
        _ subscriptions: [LedgerSubscription], appStore: [AppStoreSubscriptionRecord] = [], grants: [PromotionalGrant] = [],
        stripeEntitlements: [String] = [], now: Int64
    ) -> PlanResolution {
        let evaluations = subscriptions.map { evaluate($0, now: now) } + appStore.map { evaluate($0, now: now) }
            + grants.map { evaluate($0, now: now) }
        let entitlements = Array(Set(stripeEntitlements)).sorted()

        if let winner = evaluations.filter({ $0.why.grantsAccess }).max(by: Evaluation.ranksBelow) {
            let tier = winner.tier ?? defaultTier
            return PlanResolution(
                tier: tier, plan: winner.tier?.id, entitled: true, why: winner.why, source: winner.source,
                subscription: winner.subscription, appStoreSubscription: winner.appStore, appStoreStatus: winner.appStoreStatus,
                grant: winner.grant, item: winner.item, quantity: winner.quantity, validUntil: winner.validUntil, graceUntil: winner.graceUntil,
                endsAt: winner.endsAt, features: tier.features, limits: Self.limits(of: tier, quantity: winner.quantity ?? 1),
                stripeEntitlements: entitlements,
                unmappedPrice: winner.tier == nil ? winner.item.flatMap { $0.price ?? $0.lookupKey } ?? winner.appStore?.productID : nil)
        }
        let deciding = evaluations.max(by: Evaluation.isLessRelevant)
        return PlanResolution(
            tier: defaultTier, plan: defaultTier.id, entitled: false, why: deciding?.why ?? .free, source: deciding?.source,
            subscription: deciding?.subscription, appStoreSubscription: deciding?.appStore,
            appStoreStatus: deciding?.appStoreStatus, grant: deciding?.grant, item: deciding?.item, quantity: nil, validUntil: nil, graceUntil: nil,
            endsAt: deciding?.endsAt, features: defaultTier.features, limits: Self.limits(of: defaultTier, quantity: 1),
            stripeEntitlements: entitlements, unmappedPrice: nil)
    }

    /// One subscription judged alone.
    struct Evaluation {
        var subscription: LedgerSubscription?
        var appStore: AppStoreSubscriptionRecord?
        var appStoreStatus: AppStoreStatus?
        var grant: PromotionalGrant?
        var tier: PlanTier?
        var item: LedgerSubscription.Item?
        var quantity: Int64?
        var why: AccessReason
        var validUntil: Int64?
        var graceUntil: Int64?
        var endsAt: Int64?

        var source: EntitlementSource { grant != nil ? .grant : appStore == nil ? .stripe : .appStore }
        /// Unix seconds: a Stripe subscription's creation, an App Store purchase's current period
        /// start, a grant's start.
        var created: Int64 { subscription?.created ?? appStore?.purchaseDate.map { $0 / 1000 } ?? grant?.startsAt ?? 0 }
        var id: String { subscription?.id ?? appStore?.originalTransactionID ?? grant?.id ?? "" }

        /// Order of granting subscriptions: a catalog tier before an unmapped price, then the
        /// higher rank, the later validity (none = open-ended), the newer subscription, the smaller id.
        static func ranksBelow(_ a: Evaluation, _ b: Evaluation) -> Bool {
            if (a.tier == nil) != (b.tier == nil) { return a.tier == nil }
            if let ra = a.tier?.rank, let rb = b.tier?.rank, ra != rb { return ra < rb }
            let va = a.validUntil ?? .max
            let vb = b.validUntil ?? .max
            if va != vb { return va < vb }
            if a.created != b.created { return a.created < b.created }
            return a.id > b.id
        }

        /// Order of subscriptions that grant nothing: one that may still come back (incomplete,
        /// paused, past_due, unpaid) before one that is over, then the newer, then the smaller id.
        static func isLessRelevant(_ a: Evaluation, _ b: Evaluation) -> Bool {
            let la = a.isLive
            let lb = b.isLive
            if la != lb { return !la }
            if a.created != b.created { return a.created < b.created }
            return a.id > b.id
        }

        /// Whether it may still come back without a new purchase.
        var isLive: Bool {
            if let subscription {
                return ![.canceled, .incompleteExpired].contains(subscription.status) && subscription.endedAt == nil
            }
            return appStoreStatus == .billingRetry
        }
    }

    func evaluate(_ subscription: LedgerSubscription, now: Int64) -> Evaluation {
        // The highest tier any item grants, and of its items the one with the largest quantity.
        var tier: PlanTier?
        var item: LedgerSubscription.Item?
        for candidate in subscription.items {
            guard let granted = self.tier(price: candidate.price, lookupKey: candidate.lookupKey, product: candidate.product) else { continue }
            if let current = tier, granted.rank < current.rank { continue }
            if let current = tier, granted.rank == current.rank, (candidate.quantity ?? 1) <= (item?.quantity ?? 1) { continue }
            tier = granted
            item = candidate
        }
        if item == nil { item = subscription.items.first }
        let periodStart = item?.currentPeriodStart ?? subscription.currentPeriodStart
        let periodEnd = item?.currentPeriodEnd ?? subscription.currentPeriodEnd
        let scheduledEnd = subscription.cancelAt ?? (subscription.cancelAtPeriodEnd ? periodEnd : nil)
        var evaluation = Evaluation(
            subscription: subscription, tier: tier, item: item, quantity: item.map { $0.quantity ?? 1 }, why: .expired,
            validUntil: nil, graceUntil: nil, endsAt: scheduledEnd)

        switch subscription.status {
        case .trialing, .active:
            if let end = scheduledEnd {
                // Stripe keeps the status until the end, then sends customer.subscription.deleted;
                // past the end nothing is granted even if that event is late.
                if now < end {
                    evaluation.why = .canceling
                    evaluation.validUntil = end
                }
            } else if subscription.status == .trialing {
                evaluation.why = .trialing
                evaluation.validUntil = subscription.trialEnd ?? periodEnd
            } else {
                evaluation.why = .active
                evaluation.validUntil = periodEnd
            }
        case .pastDue:
            if let end = scheduledEnd, now >= end { break }
            switch tier?.pastDueGrace ?? .days(0) {
            case .days(let days):
                guard days > 0, let since = subscription.unpaidInvoiceDueAt ?? periodStart else { break }
                let until = since + days * 86_400
                if now < until {
                    evaluation.why = .grace
                    evaluation.graceUntil = until
                    evaluation.validUntil = min(until, scheduledEnd ?? .max)
                }
            case .unlimited:
                evaluation.why = .grace
                evaluation.validUntil = scheduledEnd ?? periodEnd
            }
        case .incomplete:
            evaluation.why = .incomplete
        case .paused:
            evaluation.why = .paused
        case .canceled, .incompleteExpired:
            evaluation.endsAt = subscription.endedAt ?? subscription.canceledAt ?? scheduledEnd
        default:
            // unpaid, and statuses Stripe may add later: nothing is granted.
            break
        }
        return evaluation
    }

    /// An App Store purchase judged alone, by its dates (see ``AppStoreSubscriptionRecord/status(now:)``).
    func evaluate(_ record: AppStoreSubscriptionRecord, now: Int64) -> Evaluation {
        let status = record.status(now: now * 1000)
        let expires = record.expiresDate.map { $0 / 1000 }
        var evaluation = Evaluation(
            subscription: nil, appStore: record, appStoreStatus: status, tier: tier(appStoreProduct: record.productID), item: nil,
            quantity: 1, why: .expired, validUntil: nil, graceUntil: nil, endsAt: nil)
        switch status {
        case .active:
            if record.isLifetime {
                evaluation.why = .active
            } else if record.willRenew {
                evaluation.why = .active
                evaluation.validUntil = expires
            } else {
                evaluation.why = .canceling
                evaluation.validUntil = expires
                evaluation.endsAt = expires
            }
        case .gracePeriod:
            let grace = record.gracePeriodExpiresDate.map { $0 / 1000 }
            evaluation.why = .grace
            evaluation.graceUntil = grace
            evaluation.validUntil = grace
        case .billingRetry:
            evaluation.why = .billingRetry
        case .expired:
            evaluation.endsAt = expires
        case .revoked:
            evaluation.why = .revoked
            evaluation.endsAt = record.revocationDate.map { $0 / 1000 }
        }
        return evaluation
    }

    /// A promotional grant judged alone, by its dates: its tier from its start until its expiry,
    /// nothing once revoked.
    func evaluate(_ grant: PromotionalGrant, now: Int64) -> Evaluation {
        var evaluation = Evaluation(
            subscription: nil, appStore: nil, appStoreStatus: nil, grant: grant, tier: tier(id: grant.tier), item: nil, quantity: 1,
            why: .expired, validUntil: nil, graceUntil: nil, endsAt: grant.revokedAt.map { min($0, grant.expiresAt) } ?? grant.expiresAt)
        if grant.isActive(now: now), evaluation.tier != nil {
            evaluation.why = .granted
            evaluation.validUntil = grant.expiresAt
        }
        return evaluation
    }

    /// The tier's limits for a subscription of `quantity` units.
    static func limits(of tier: PlanTier, quantity: Int64) -> [PlanResolution.ResolvedLimit] {
        tier.limits.map { limit in
            switch limit.value {
            case .count(let count):
                return .init(key: limit.key, value: .count(count))
            case .unlimited:
                return .init(key: limit.key, value: .unlimited)
            case .perQuantity(let factor):
                let (product, overflow) = factor.multipliedReportingOverflow(by: max(quantity, 0))
                return .init(key: limit.key, value: .count(overflow ? .max : product))
            }
        }
    }
}
