/// The types of event billingd sends to the app's backend.
public enum OutboundEventType: String, Sendable, CaseIterable, Codable {
    /// Tier, features or limits changed.
    case entitlementUpdated = "entitlement.updated"
    /// A subscription began to grant access (a first purchase, a trial, or a return after expiry).
    case subscriptionStarted = "subscription.started"
    /// The same subscription's paid period moved forward.
    case subscriptionRenewed = "subscription.renewed"
    /// A granting subscription moved to another plan or price.
    case subscriptionPlanChanged = "subscription.plan_changed"
    /// A live subscription is set to end at a known time.
    case subscriptionCancellationScheduled = "subscription.cancellation_scheduled"
    /// A scheduled cancellation was withdrawn.
    case subscriptionUncanceled = "subscription.uncanceled"
    /// A renewal payment failed; the store retries.
    case subscriptionBillingIssue = "subscription.billing_issue"
    /// The payment went through after a billing issue.
    case subscriptionRecovered = "subscription.recovered"
    /// Access ended.
    case subscriptionExpired = "subscription.expired"
    /// The purchase was refunded or revoked.
    case subscriptionRefunded = "subscription.refunded"
    /// A meter reached its limit: once per meter and period (a gauge again after it went below).
    case usageLimitReached = "usage.limit_reached"
    /// The test event of `billingd outbox send-test`.
    case test = "billingd.test"
}

/// The rules that turn a change of a user's view into events, in the order the app gets them.
/// Pure: the stores call it inside the transaction of the ledger change, whichever backend.
public enum OutboundEventRules {
    /// The events of a change from `previous` (nil: the user was never announced) to `current`.
    public static func events(from previous: UserAccessState?, to current: UserAccessState) -> [OutboundEventType] {
        // A user seen for the first time without a subscription has nothing to announce.
        if previous == nil, current.subscriptionID == nil { return [] }
        let before = previous ?? UserAccessState()
        guard before != current else { return [] }
        let sameSubscription = before.subscriptionID != nil && before.subscriptionID == current.subscriptionID
        var events: [OutboundEventType] = []
        // 1. Access begins, or comes back after a billing issue.
        if current.entitled, !before.entitled {
            events.append(sameSubscription && before.billingIssue ? .subscriptionRecovered : .subscriptionStarted)
        } else if sameSubscription, before.billingIssue, !current.billingIssue, current.entitled {
            events.append(.subscriptionRecovered)
        }
        // 2. Changes of a subscription that keeps granting access.
        if before.entitled, current.entitled {
            if sameSubscription, let was = before.periodEnd, let now = current.periodEnd, now > was {
                events.append(.subscriptionRenewed)
            }
            if before.plan != current.plan || before.price != current.price {
                events.append(.subscriptionPlanChanged)
            }
        }
        // 3. Cancellation scheduled or withdrawn.
        if current.cancelScheduled, !(sameSubscription && before.cancelScheduled) {
            events.append(.subscriptionCancellationScheduled)
        } else if sameSubscription, before.cancelScheduled, !current.cancelScheduled, current.entitled {
            events.append(.subscriptionUncanceled)
        }
        // 4. Payment trouble, refunds, and the end of access.
        if current.billingIssue, !(sameSubscription && before.billingIssue) {
            events.append(.subscriptionBillingIssue)
        }
        if current.revoked, !(sameSubscription && before.revoked) {
            events.append(.subscriptionRefunded)
        }
        if before.entitled, !current.entitled, !current.billingIssue, !current.revoked {
            events.append(.subscriptionExpired)
        }
        // 5. What the user may do, last, after what explains it.
        let accessChanged = before.plan != current.plan || before.features != current.features || before.limits != current.limits
        if accessChanged, previous != nil || current.entitled {
            events.append(.entitlementUpdated)
        }
        return events
    }

    /// Whether a meter's state is at or past its limit (never for an unlimited meter).
    public static func limitReached(_ state: UsageMeterState) -> Bool {
        guard let limit = state.limitCount else { return false }
        return state.used >= limit
    }
}
