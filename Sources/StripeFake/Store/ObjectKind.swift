/// The kinds of Stripe object the fake keeps, each in its own ordered table per account.
public enum ObjectKind: String, Sendable, Hashable, CaseIterable {
    case customer
    case subscription
    case invoice
    case paymentMethod = "payment_method"
    case price
    case product
    case checkoutSession = "checkout.session"
    case event
    case billingMeter = "billing.meter"

    /// The id prefix Stripe uses (test mode), e.g. `cus_`.
    var idPrefix: String {
        switch self {
        case .customer: "cus_"
        case .subscription: "sub_"
        case .invoice: "in_"
        case .paymentMethod: "pm_"
        case .price: "price_"
        case .product: "prod_"
        case .checkoutSession: "cs_test_"
        case .event: "evt_"
        case .billingMeter: "mtr_test_"
        }
    }

    /// The name in `No such customer: '…'`.
    var displayName: String {
        switch self {
        case .paymentMethod: "PaymentMethod"
        case .checkoutSession: "checkout.session"
        default: rawValue
        }
    }

    /// The path of the list endpoint, the `url` of a list envelope.
    var listURL: String {
        switch self {
        case .customer: "/v1/customers"
        case .subscription: "/v1/subscriptions"
        case .invoice: "/v1/invoices"
        case .paymentMethod: "/v1/payment_methods"
        case .price: "/v1/prices"
        case .product: "/v1/products"
        case .checkoutSession: "/v1/checkout/sessions"
        case .event: "/v1/events"
        case .billingMeter: "/v1/billing/meters"
        }
    }

    /// The kind an id belongs to, judged by its prefix, for `expand[]`.
    init?(id: String) {
        // `cs_test_` before the shorter prefixes; none is a prefix of another otherwise.
        guard let kind = ObjectKind.allCases.first(where: { id.hasPrefix($0.idPrefix) }) else { return nil }
        self = kind
    }
}
