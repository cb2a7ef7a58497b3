import BillingCore

/// The repair log and the payment-method link, written once for both backends: what reconcile
/// changed (one `reconcileRepair` row per object it repaired, in the repair's transaction) and
/// which customer each payment method was first seen attached to (`paymentMethodCustomer`, never
/// removed on detach), so that a user's timeline can name both after the ledger moved on.
package enum ReconcileRepairRows {
    /// One repair. The customer is the one given, else the customer the payment method was seen
    /// attached to, else the invoice's (an invoice payment). Arguments: ``arguments(_:)``.
    package static let insertSQL = """
        INSERT INTO reconcileRepair (account, livemode, run, at, kind, objectID, customer, drift, summary)
        VALUES (?, ?, ?, ?, ?, ?, COALESCE(?,
            (SELECT customer FROM paymentMethodCustomer WHERE account = ? AND livemode = ? AND paymentMethod = ?),
            (SELECT customer FROM invoice WHERE account = ? AND livemode = ? AND id = ?)), ?, ?)
        """

    /// What one repair row says.
    package struct Repair: Sendable, Equatable {
        var account: String
        var livemode: Bool
        var run: Int64
        /// Unix seconds: when Stripe answered with the state written.
        var at: Int64
        var kind: LedgerObjectKind
        var objectID: String
        /// The customer the object names, when it names one.
        var customer: String?
        /// The invoice an invoice payment belongs to, whose customer it concerns.
        var invoice: String?
        var drift: DriftKind
        var summary: String
    }

    package static func arguments(_ repair: Repair) -> [LedgerValue] {
        let key: [LedgerValue] = [.text(repair.account), .boolean(repair.livemode)]
        let paymentMethod: LedgerValue = repair.kind == .paymentMethod ? .text(repair.objectID) : .null
        return key + [.integer(repair.run), .integer(repair.at), .text(repair.kind.rawValue), .text(repair.objectID)]
            + [repair.customer.map(LedgerValue.text) ?? .null] + key + [paymentMethod] + key + [repair.invoice.map(LedgerValue.text) ?? .null]
            + [.text(repair.drift.rawValue), .text(repair.summary)]
    }

    /// The row of a snapshot reconcile wrote over the ledger's (or into it).
    package static func repair(
        _ snapshot: LedgerSnapshot, drift: DriftKind, fields: [String], account: String, livemode: Bool, run: Int64
    ) -> Repair {
        var customer: String?
        var invoice: String?
        var now = ""
        switch snapshot.object {
        case .customer(let object): customer = object.id
        case .subscription(let subscription):
            customer = subscription.customer.id
            now = " (now \(subscription.status.rawValue))"
        case .invoice(let object): customer = object.customer?.id
        case .paymentMethod(let method):
            customer = method.customer?.id
            if method.customer == nil { now = " (now detached)" }
        case .checkoutSession(let session): customer = session.customer?.id
        case .entitlementSummary(let summary): customer = summary.customer
        case .invoicePayment(let payment): invoice = payment.invoice?.id
        case .price, .product: break
        }
        let name = "\(noun(snapshot.kind)) \(snapshot.objectID)"
        let summary: String
        switch drift {
        case .missingLocally: summary = "\(name) was missing from the ledger; added from Stripe's API\(now)"
        case .fieldDiffers: summary = "\(name) repaired from Stripe's API: \(fields.joined(separator: ", ")) differed\(now)"
        case .goneInStripe: summary = "\(name) is gone from Stripe; marked deleted"
        }
        return Repair(
            account: account, livemode: livemode, run: run, at: snapshot.version.eventCreated, kind: snapshot.kind, objectID: snapshot.objectID,
            customer: customer, invoice: invoice, drift: drift, summary: summary)
    }

    /// The row of an object reconcile tombstoned because Stripe answered 404; `customer` is the
    /// one the ledger's row named.
    package static func gone(
        _ kind: LedgerObjectKind, id: String, customer: String?, account: String, livemode: Bool, run: Int64, fetchedAt: Int64
    ) -> Repair {
        Repair(
            account: account, livemode: livemode, run: run, at: fetchedAt, kind: kind, objectID: id, customer: customer, invoice: nil,
            drift: .goneInStripe, summary: "\(noun(kind)) \(id) is gone from Stripe; marked deleted")
    }

    /// The statement reading the customer a tombstoned object's row names, nil for kinds whose
    /// rows name none (the customer's own id is the customer).
    package static func heldCustomerSQL(_ kind: LedgerObjectKind) -> String? {
        switch kind {
        case .subscription, .invoice, .paymentMethod, .checkoutSession:
            "SELECT customer FROM \(LedgerRows.table(kind)) WHERE account = ? AND livemode = ? AND id = ?"
        case .customer, .entitlementSummary, .price, .product, .invoicePayment: nil
        }
    }

    /// The customer a tombstoned object concerns without reading its row.
    package static func ownCustomer(_ kind: LedgerObjectKind, id: String) -> String? {
        kind == .customer || kind == .entitlementSummary ? id : nil
    }

    static func noun(_ kind: LedgerObjectKind) -> String {
        switch kind {
        case .customer: "Customer"
        case .subscription: "Subscription"
        case .invoice: "Invoice"
        case .paymentMethod: "Payment method"
        case .price: "Price"
        case .product: "Product"
        case .checkoutSession: "Checkout session"
        case .entitlementSummary: "Active entitlements of customer"
        case .invoicePayment: "Invoice payment"
        }
    }

    // MARK: - Payment methods' customers

    /// The customer a payment method snapshot shows it attached to; nil when detached or not a payment method.
    package static func paymentMethodLink(_ snapshot: LedgerSnapshot) -> String? {
        guard case .paymentMethod(let method) = snapshot.object else { return nil }
        return method.customer?.id
    }

    /// Records a payment method seen attached, keeping the earliest sighting. Arguments: account,
    /// livemode, payment method, customer, first seen (Unix seconds).
    package static let linkPaymentMethodSQL =
        "INSERT INTO paymentMethodCustomer (\(linkColumns.joined(separator: ", "))) VALUES (?, ?, ?, ?, ?) \(linkConflict)"

    /// The columns of a payment method's link, in ``linkArguments(_:customer:account:livemode:)``'s order.
    static let linkColumns = ["account", "livemode", "paymentMethod", "customer", "firstSeen"]

    /// A link already held keeps its customer and takes the earlier sighting.
    static let linkConflict = """
        ON CONFLICT (account, livemode, paymentMethod) DO UPDATE SET firstSeen = excluded.firstSeen
        WHERE excluded.firstSeen < paymentMethodCustomer.firstSeen
        """

    package static func linkArguments(_ snapshot: LedgerSnapshot, customer: String, account: String, livemode: Bool) -> [LedgerValue] {
        [.text(account), .boolean(livemode), .text(snapshot.objectID), .text(customer), .integer(snapshot.version.eventCreated)]
    }

    /// The migration's backfill (both dialects): the payment methods the ledger holds attached
    /// today. Those detached before it name no customer any more and get no link.
    package static let backfillLinksSQL = """
        INSERT INTO paymentMethodCustomer (account, livemode, paymentMethod, customer, firstSeen)
        SELECT account, livemode, id, customer, vCreated FROM paymentMethod WHERE customer IS NOT NULL
        """

    /// The migration's backfill (both dialects): subscriptions reconcile fetched before repairs
    /// were logged, as the timeline showed them from the metrics facts (no run was recorded).
    package static let backfillSubscriptionRepairsSQL = """
        INSERT INTO reconcileRepair (account, livemode, run, at, kind, objectID, customer, drift, summary)
        SELECT f.account, f.livemode, NULL, f.vCreated, 'subscription', f.subscription, s.customer, 'field_differs',
            'Subscription ' || f.subscription || ' repaired from Stripe''s API (now ' || f.status || ')'
        FROM stripeSubscriptionFact f
        JOIN subscription s ON s.account = f.account AND s.livemode = f.livemode AND s.id = f.subscription
        WHERE f.vEventID LIKE 'fetch:%'
        ORDER BY f.vCreated, f.subscription
        """
}
