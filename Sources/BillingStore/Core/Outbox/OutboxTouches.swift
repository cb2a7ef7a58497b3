import BillingCore

/// The users a transaction may have changed the view of, gathered while it applies, so that it
/// announces their changes before it commits. Backend-neutral: each store resolves customers and
/// App Store purchases to users with its own queries.
package struct OutboxTouches: Sendable {
    package struct Customer: Hashable, Sendable {
        package var scope: ServiceScope
        package var id: String
    }

    package struct Purchase: Hashable, Sendable {
        package var environment: String
        package var originalTransactionID: String
    }

    package struct User: Hashable, Sendable {
        package var scope: ServiceScope
        package var user: String
    }

    /// A refunded charge that paid an invoice, announced as `subscription.refunded` to the users
    /// of its customer when the ledger's invoice is a subscription's.
    package struct Refund: Sendable {
        package var scope: ServiceScope
        package var charge: Charge
        package var customer: String
        package var invoice: String
    }

    package var customers: Set<Customer> = []
    package var purchases: Set<Purchase> = []
    package var users: Set<User> = []
    /// In the order the transaction applied them.
    package var refunds: [Refund] = []

    package init() {}

    package var isEmpty: Bool { customers.isEmpty && purchases.isEmpty && users.isEmpty && refunds.isEmpty }

    /// A refund of a charge that names its invoice and customer (``DecodedDelivery`` decodes no other
    /// as a refund); its customer's users' views are looked at too.
    package mutating func add(_ charge: Charge, account: String, livemode: Bool) {
        guard let customer = charge.customer?.id, let invoice = charge.invoice?.id else { return }
        let scope = ServiceScope(account: account, livemode: livemode)
        customers.insert(Customer(scope: scope, id: customer))
        refunds.append(Refund(scope: scope, charge: charge, customer: customer, invoice: invoice))
    }

    /// The users a Stripe snapshot may concern: its customer's (prices, products and payment
    /// methods change no view).
    package mutating func add(_ snapshot: LedgerSnapshot, account: String, livemode: Bool) {
        let scope = ServiceScope(account: account, livemode: livemode)
        func customer(_ id: String?) {
            if let id, !id.isEmpty { customers.insert(Customer(scope: scope, id: id)) }
        }
        switch snapshot.object {
        case .customer(let object):
            customer(object.id)
            if let user = object.appUserID, !user.isEmpty { users.insert(User(scope: scope, user: user)) }
        case .subscription(let object): customer(object.customer.id)
        case .invoice(let object): customer(object.customer?.id)
        case .entitlementSummary(let object): customer(object.customer)
        case .checkoutSession(let object):
            customer(object.customer?.id)
            if let user = object.clientReferenceID, !user.isEmpty { users.insert(User(scope: scope, user: user)) }
        case .paymentMethod, .price, .product, .invoicePayment: break
        }
    }

    /// The users an App Store delivery may concern: the purchase's owner, and the user the app
    /// reported it for.
    package mutating func add(_ delivery: AppStoreDelivery, environment: String) {
        let original: String?
        switch delivery {
        case .notification(let notification): original = notification.originalTransactionID
        case .app(let report):
            original = report.transaction.originalTransactionID
            users.insert(User(scope: ServiceScope(livemode: environment == "Production"), user: report.user))
        case .server(let snapshot): original = snapshot.transaction.originalTransactionID
        }
        if let original { purchases.insert(Purchase(environment: environment, originalTransactionID: original)) }
    }
}
