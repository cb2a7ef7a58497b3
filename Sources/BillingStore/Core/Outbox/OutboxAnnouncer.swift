import BillingCore
import Foundation

/// Turns a user's view after a ledger change into outbox events: resolves the view, diffs it
/// with the last announced state (``OutboundEventRules``) and builds each event's payload.
/// Backend-neutral: a store reads the billing and the announced state, calls this, and writes
/// what it returns, all in the transaction of the change.
package enum OutboxAnnouncer {
    /// What to write for one user after a change, or after time alone may have changed their view.
    package struct Announcement {
        /// The view's state to keep.
        package var state: UserAccessState
        /// That state as the text to keep (``encode(_:)``).
        package var text: String
        /// Whether ``text`` is to be kept: the view differs from the last announced one, or that
        /// was kept in an earlier form of the text (else there is nothing to write but ``reviewAt``).
        package var changed: Bool
        /// The events to queue: none when nothing changed or the change is nothing an app acts on.
        package var events: [OutboxDraft]
        /// When time alone may next change the view (Unix ms): the end of what grants access now
        /// (the period, a scheduled cancellation, a grace period, an App Store expiry). Nil when
        /// only a ledger change can.
        package var reviewAt: Int64?
        /// Until when the resolved access holds (``PlanResolution/validUntil``, Unix seconds); nil
        /// when not entitled.
        package var validUntil: Int64? = nil
        /// Whether the access differs from the last announced (tier, entitlement, source, the
        /// deciding subscription or grant, its period end): a step of the user's timeline. A
        /// first view counts when it entitles.
        package var entitlementChanged = false
    }

    /// Resolves the user's view at the policy's time and diffs it with the state last announced
    /// (`kept`, as ``encode(_:)`` wrote it). An unchanged view is found by comparing the text,
    /// without decoding what was kept.
    package static func announce(
        billing: UserBilling, kept: String?, policy: OutboxPolicy, nowMilliseconds: Int64
    ) -> Announcement {
        let now = policy.now()
        let resolution = billing.resolve(policy.catalog, now: now)
        let state = UserAccessState(resolution)
        let text = encode(state)
        let reviewAt = reviewTime(resolution, now: now)
        let validUntil = resolution.entitled ? resolution.validUntil : nil
        if kept == text {
            return Announcement(state: state, text: text, changed: false, events: [], reviewAt: reviewAt, validUntil: validUntil)
        }
        // Changed, or kept in an earlier form of the text (key order, absent nils): then the
        // text is written again, with no event, so that the next look compares text alone.
        let previous = kept.flatMap(decode)
        var changed = Announcement(state: state, text: text, changed: true, events: [], reviewAt: reviewAt, validUntil: validUntil)
        guard state != previous else { return changed }
        changed.entitlementChanged = accessDiffers(state, from: previous)
        let types = OutboundEventRules.events(from: previous, to: state)
        guard !types.isEmpty, !policy.endpoints.isEmpty else { return changed }
        let data = policy.render(billing, resolution)
        let fields = state.changedFields(from: previous ?? UserAccessState())
        var announcement = changed
        announcement.events = types.map { type in
            let id = newEventID()
            let header = PayloadHeader(
                id: id, type: type.rawValue, created: nowMilliseconds / 1000, user: billing.user,
                livemode: billing.scope.livemode, account: billing.scope.account.isEmpty ? nil : billing.scope.account,
                source: state.source ?? previous?.source, changes: .init(fields: fields, previous: previous))
            return OutboxDraft(
                id: id, type: type.rawValue, scope: billing.scope, user: billing.user, createdAt: nowMilliseconds,
                payload: payload(header, data: data))
        }
        return announcement
    }

    /// Whether `state` gives other access than `previous`: what the timeline records as a step.
    static func accessDiffers(_ state: UserAccessState, from previous: UserAccessState?) -> Bool {
        guard let previous else { return state.entitled }
        return (state.plan, state.entitled, state.source, state.subscriptionID, state.periodEnd)
            != (previous.plan, previous.entitled, previous.source, previous.subscriptionID, previous.periodEnd)
    }

    /// When the view resolved at `now` (Unix seconds) may change by time alone, in Unix ms. Time
    /// only ever ends a grant (resolution never starts one by the clock), and the winning grant's
    /// ``PlanResolution/validUntil`` is the first moment that can change what the user sees; a
    /// grant that stays past it (a Stripe `active` subscription past its period, whose renewal
    /// Stripe announces) is looked at once then and then left to the next ledger change.
    package static func reviewTime(_ resolution: PlanResolution, now: Int64) -> Int64? {
        guard resolution.entitled, let until = resolution.validUntil, until > now else { return nil }
        let (milliseconds, overflow) = until.multipliedReportingOverflow(by: 1000)
        return overflow ? nil : milliseconds
    }

    /// The `usage.limit_reached` event of a meter's state.
    package static func limitReached(
        _ state: UsageMeterState, scope: ServiceScope, user: String, policy: OutboxPolicy, nowMilliseconds: Int64
    ) -> OutboxDraft {
        let id = newEventID()
        let header = PayloadHeader(
            id: id, type: OutboundEventType.usageLimitReached.rawValue, created: nowMilliseconds / 1000, user: user,
            livemode: scope.livemode, account: scope.account.isEmpty ? nil : scope.account, source: nil, changes: nil)
        return OutboxDraft(
            id: id, type: OutboundEventType.usageLimitReached.rawValue, scope: scope, user: user, createdAt: nowMilliseconds,
            payload: payload(header, data: policy.renderUsage(state)))
    }

    /// The `subscription.refunded` event of a refunded Stripe charge that paid an invoice of
    /// `subscription`: the user's views after it, and the refund.
    package static func refunded(
        _ refund: OutboxTouches.Refund, subscription: String, billing: UserBilling, policy: OutboxPolicy, nowMilliseconds: Int64
    ) -> OutboxDraft {
        let id = newEventID()
        let charge = refund.charge
        var header = PayloadHeader(
            id: id, type: OutboundEventType.subscriptionRefunded.rawValue, created: nowMilliseconds / 1000, user: billing.user,
            livemode: billing.scope.livemode, account: billing.scope.account.isEmpty ? nil : billing.scope.account,
            source: "stripe", changes: nil)
        header.refund = PayloadHeader.Refund(
            charge: charge.id, invoice: refund.invoice, subscription: subscription, customer: refund.customer, amount: charge.amount,
            amountRefunded: charge.amountRefunded, currency: charge.currency, fullyRefunded: charge.refunded)
        let data = policy.render(billing, billing.resolve(policy.catalog, now: policy.now()))
        return OutboxDraft(
            id: id, type: OutboundEventType.subscriptionRefunded.rawValue, scope: billing.scope, user: billing.user,
            createdAt: nowMilliseconds, payload: payload(header, data: data))
    }

    /// The fields of a payload before `data`.
    package struct PayloadHeader {
        package struct Changes {
            var fields: [String]
            var previous: UserAccessState?
        }

        var id: String
        var type: String
        var created: Int64
        var user: String
        var livemode: Bool
        var account: String?
        var source: String?
        var changes: Changes?
        /// Of `subscription.refunded` from Stripe only: the charge and what of it was refunded.
        var refund: Refund?

        /// A refunded Stripe charge, amounts in the currency's minor unit.
        package struct Refund {
            var charge: String
            var invoice: String
            var subscription: String
            var customer: String
            var amount: Int64
            /// All refunded of the charge so far.
            var amountRefunded: Int64
            var currency: String
            var fullyRefunded: Bool
        }

        package init(
            id: String, type: String, created: Int64, user: String, livemode: Bool, account: String?, source: String?,
            changes: Changes?
        ) {
            (self.id, self.type, self.created, self.user, self.livemode) = (id, type, created, user, livemode)
            (self.account, self.source, self.changes) = (account, source, changes)
        }

        /// Its fields, in the order of docs/outbound-webhooks.md, into the payload's object.
        func write(into json: inout JSONBytesWriter) {
            json.field("id", id)
            json.field("type", type)
            json.field("created", created)
            json.field("user", user)
            json.field("livemode", livemode)
            json.field("account", account)
            json.field("source", source)
            json.key("changes")
            if let changes {
                json.beginObject()
                json.strings("fields", changes.fields)
                json.key("previous")
                if let previous = changes.previous { OutboxAnnouncer.write(previous, keys: .payload, into: &json) } else { json.null() }
                json.endObject()
            } else {
                json.null()
            }
            if let refund {
                json.key("refund")
                json.beginObject()
                json.field("charge", refund.charge)
                json.field("invoice", refund.invoice)
                json.field("subscription", refund.subscription)
                json.field("customer", refund.customer)
                json.field("amount", refund.amount)
                json.field("amount_refunded", refund.amountRefunded)
                json.field("currency", refund.currency)
                json.field("fully_refunded", refund.fullyRefunded)
                json.endObject()
            }
        }
    }

    /// `{header…, "data": data}`.
    package static func payload(_ header: PayloadHeader, data: [UInt8]) -> [UInt8] {
        var json = JSONBytesWriter(capacity: 512 + data.count)
        json.beginObject()
        header.write(into: &json)
        json.key("data")
        json.json(data)
        json.endObject()
        return json.bytes
    }

    /// How a state's keys are spelled: the payload's `changes.previous` in snake case, the kept
    /// text as ``UserAccessState``'s own coding keys (so that `Codable` reads it back).
    enum StateKeys {
        case payload, kept

        var names: [String] {
            switch self {
            case .payload:
                ["plan", "entitled", "why", "source", "subscription_id", "status", "price", "period_end", "cancel_scheduled",
                 "billing_issue", "revoked", "features", "limits"]
            case .kept:
                ["plan", "entitled", "why", "source", "subscriptionID", "status", "price", "periodEnd", "cancelScheduled",
                 "billingIssue", "revoked", "features", "limits"]
            }
        }
    }

    /// Every field of `state`, nil ones as `null`, limits by key: one state, one text.
    static func write(_ state: UserAccessState, keys: StateKeys, into json: inout JSONBytesWriter) {
        let names = keys.names
        json.beginObject()
        json.field(names[0], state.plan)
        json.field(names[1], state.entitled)
        json.field(names[2], state.why)
        json.field(names[3], state.source)
        json.field(names[4], state.subscriptionID)
        json.field(names[5], state.status)
        json.field(names[6], state.price)
        json.field(names[7], state.periodEnd)
        json.field(names[8], state.cancelScheduled)
        json.field(names[9], state.billingIssue)
        json.field(names[10], state.revoked)
        json.strings(names[11], state.features)
        json.stringMap(names[12], state.limits)
        json.endObject()
    }

    private static let eventIDAlphabet: [UInt8] = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)

    /// A new `webhook-id`: `msg_` and 26 random base-32 characters.
    package static func newEventID() -> String {
        // 26 × 5 = 130 random bits from three draws (one system call each), not one per character.
        var generator = SystemRandomNumberGenerator()
        var words = (generator.next() as UInt64, generator.next() as UInt64, generator.next() as UInt64)
        var id: [UInt8] = Array("msg_".utf8)
        id.reserveCapacity(30)
        for index in 0..<26 {
            let digit: UInt64
            switch index {
            case 0..<12: digit = words.0 & 31; words.0 >>= 5
            case 12..<24: digit = words.1 & 31; words.1 >>= 5
            default: digit = words.2 & 31; words.2 >>= 5
            }
            id.append(eventIDAlphabet[Int(digit)])
        }
        return String(decoding: id, as: UTF8.self)
    }

    /// The state kept as text.
    package static func encode(_ state: UserAccessState) -> String {
        var json = JSONBytesWriter(capacity: 384)
        write(state, keys: .kept, into: &json)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    /// A kept state read back; nil for text that is not one (it is then announced again).
    package static func decode(_ text: String) -> UserAccessState? {
        try? JSONDecoder().decode(UserAccessState.self, from: Data(text.utf8))
    }

    /// The key that orders a user's events: one mode, one account, one user.
    package static func userKey(scope: ServiceScope, user: String) -> String {
        "\(scope.livemode ? "live" : "test")|\(scope.account)|\(user)"
    }
}
