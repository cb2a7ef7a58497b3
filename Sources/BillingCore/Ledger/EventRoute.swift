/// The kinds of object the ledger keeps.
public enum LedgerObjectKind: String, Sendable, CaseIterable, Codable {
    case customer, subscription, invoice, paymentMethod, price, product, checkoutSession
    case entitlementSummary, invoicePayment
}

/// What an event type does to the ledger.
public enum EventRoute: Sendable, Equatable {
    /// The event carries a new snapshot of the object.
    case snapshot(LedgerObjectKind)
    /// The object was deleted: the snapshot becomes a tombstone that nothing overwrites.
    case deletion(LedgerObjectKind)
    /// Stored and acknowledged, but nothing in the ledger changes (e.g. `invoice.upcoming`,
    /// which describes an invoice that does not exist yet).
    case recordOnly
    /// A charge was refunded: nothing in the ledger changes (it keeps no charges), but the app
    /// hears of it (`subscription.refunded`) when the charge paid a subscription's invoice.
    case refund
    /// A refund's state (`refund.created` …): kept for the revenue metrics, which count refunds
    /// at their own time; the newest snapshot of a refund wins.
    case refundSnapshot
    /// A type billingd does not model; kept in the inbox as `ignored`.
    case ignored

    /// The route of an event type. Unknown types are ignored, never rejected.
    public init(eventType type: String) {
        switch type {
        case "customer.created", "customer.updated":
            self = .snapshot(.customer)
        case "customer.deleted":
            self = .deletion(.customer)
        case "customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted",
            "customer.subscription.paused", "customer.subscription.resumed", "customer.subscription.trial_will_end",
            "customer.subscription.pending_update_applied", "customer.subscription.pending_update_expired":
            // A deleted subscription is a canceled one: Stripe keeps it and so does the ledger.
            // Its terminal status already makes it final (see SnapshotVersion).
            self = .snapshot(.subscription)
        case "invoice.upcoming":
            self = .recordOnly
        case "charge.refunded":
            self = .refund
        case "refund.created", "refund.updated", "refund.failed", "charge.refund.updated":
            self = .refundSnapshot
        case "invoice.deleted":
            self = .deletion(.invoice)
        case "invoice_payment.paid":
            self = .snapshot(.invoicePayment)
        case "entitlements.active_entitlement_summary.updated":
            self = .snapshot(.entitlementSummary)
        case "price.deleted":
            self = .deletion(.price)
        case "product.deleted":
            self = .deletion(.product)
        default:
            if type.hasPrefix("invoice.") {
                self = .snapshot(.invoice)
            } else if type.hasPrefix("payment_method.") {
                self = .snapshot(.paymentMethod)
            } else if type.hasPrefix("checkout.session.") {
                self = .snapshot(.checkoutSession)
            } else if type.hasPrefix("price.") {
                self = .snapshot(.price)
            } else if type.hasPrefix("product.") {
                self = .snapshot(.product)
            } else {
                self = .ignored
            }
        }
    }
}
