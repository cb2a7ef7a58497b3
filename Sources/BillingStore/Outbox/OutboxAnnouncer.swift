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
        /// Whether it differs from the last announced state (else there is nothing to write but
        /// ``reviewAt``).
        package var changed: Bool
        /// The events to queue: none when nothing changed or the change is nothing an app acts on.
        package var events: [OutboxDraft]
        /// When time alone may next change the view (Unix ms): the end of what grants access now
        /// (the period, a scheduled cancellation, a grace period, an App Store expiry). Nil when
        /// only a ledger change can.
        package var reviewAt: Int64?
    }

    /// Resolves the user's view at the policy's time and diffs it with `previous`.
    package static func announce(
        billing: UserBilling, previous: UserAccessState?, policy: OutboxPolicy, nowMilliseconds: Int64
    ) -> Announcement {
        let now = policy.now()
        let resolution = billing.resolve(policy.catalog, now: now)
        let state = UserAccessState(resolution)
        let reviewAt = reviewTime(resolution, now: now)
        guard state != previous else { return Announcement(state: state, changed: false, events: [], reviewAt: reviewAt) }
        let types = OutboundEventRules.events(from: previous, to: state)
        guard !types.isEmpty, !policy.endpoints.isEmpty else { return Announcement(state: state, changed: true, events: [], reviewAt: reviewAt) }
        let data = policy.render(billing, resolution)
        let fields = state.changedFields(from: previous ?? UserAccessState())
        let events = types.map { type in
            let id = newEventID()
            let header = PayloadHeader(
                id: id, type: type.rawValue, created: nowMilliseconds / 1000, user: billing.user,
                livemode: billing.scope.livemode, account: billing.scope.account.isEmpty ? nil : billing.scope.account,
                source: state.source ?? previous?.source, changes: .init(fields: fields, previous: previous))
            return OutboxDraft(
                id: id, type: type.rawValue, scope: billing.scope, user: billing.user, createdAt: nowMilliseconds,
                payload: payload(header, data: data))
        }
        return Announcement(state: state, changed: true, events: events, reviewAt: reviewAt)
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
    package struct PayloadHeader: Encodable {
        package struct Changes: Encodable {
            var fields: [String]
            var previous: UserAccessState?

            package func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(fields, forKey: .fields)
                try container.encode(previous, forKey: .previous)
            }

            enum CodingKeys: String, CodingKey { case fields, previous }
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
        package struct Refund: Encodable {
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

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(type, forKey: .type)
            try container.encode(created, forKey: .created)
            try container.encode(user, forKey: .user)
            try container.encode(livemode, forKey: .livemode)
            try container.encode(account, forKey: .account)
            try container.encode(source, forKey: .source)
            try container.encode(changes, forKey: .changes)
            try container.encodeIfPresent(refund, forKey: .refund)
        }

        enum CodingKeys: String, CodingKey { case id, type, created, user, livemode, account, source, changes, refund }
    }

    /// `{header…, "data": data}`.
    package static func payload(_ header: PayloadHeader, data: [UInt8]) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.withoutEscapingSlashes]
        var bytes = Array((try? encoder.encode(header)) ?? Data("{}".utf8))
        bytes.removeLast()
        bytes.append(contentsOf: Array(#","data":"#.utf8))
        bytes.append(contentsOf: data.isEmpty ? Array("null".utf8) : data)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// A new `webhook-id`: `msg_` and 26 random base-32 characters.
    package static func newEventID() -> String {
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz")
        var generator = SystemRandomNumberGenerator()
        return "msg_" + String((0..<26).map { _ in alphabet[Int(generator.next() % 32)] })
    }

    /// The state kept as text.
    package static func encode(_ state: UserAccessState) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(state)) ?? Data(), as: UTF8.self)
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
