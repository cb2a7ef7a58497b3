import BillingCore

/// The service API's reads of a user, shared by both backends: each statement (spelled with `?`
/// placeholders, which the PostgreSQL reader numbers), its bindings, and the decoding of its rows
/// through ``LedgerColumnReading``. A backend only runs them.
enum UserQueries {
    /// The console's search: customers by e-mail (whatever its case, through the
    /// `customer_email` index on `lower(email)`), id or subscription, tied to users by metadata
    /// or Checkout link; users by their own id; with `appStore` (the platform account), owners of
    /// an original transaction of the mode's environment. Rows are (appUserID, field).
    static func matchingUsersSQL(appStore: Bool, livemode: Bool, limit: Int) -> String {
        let environment = livemode ? "environment = 'Production'" : "environment <> 'Production'"
        let appStoreSQL = appStore ? """

            UNION
            SELECT appUserID, 'original_transaction_id' FROM appStoreOwner WHERE originalTransactionID = ? AND \(environment)
            UNION
            SELECT appUserID, 'app_user_id' FROM appStoreOwner WHERE appUserID = ? AND \(environment)
            """ : ""
        return """
            WITH matched (customer, field) AS (
                SELECT id, 'email' FROM customer WHERE account = ? AND livemode = ? AND lower(email) = lower(?)
                UNION ALL SELECT id, 'stripe_customer' FROM customer WHERE account = ? AND livemode = ? AND id = ?
                UNION ALL SELECT customer, 'subscription' FROM subscription WHERE account = ? AND livemode = ? AND id = ?
            )
            SELECT c.appUserID, m.field FROM matched m JOIN customer c ON c.account = ? AND c.livemode = ? AND c.id = m.customer
            WHERE c.appUserID IS NOT NULL
            UNION
            SELECT u.appUserID, m.field FROM matched m JOIN userLink u ON u.account = ? AND u.livemode = ? AND u.customer = m.customer
            UNION
            SELECT appUserID, 'app_user_id' FROM customer WHERE appUserID = ? AND account = ? AND livemode = ?
            UNION
            SELECT appUserID, 'app_user_id' FROM userLink WHERE account = ? AND livemode = ? AND appUserID = ?\(appStoreSQL)
            ORDER BY 1, 2 LIMIT \(limit)
            """
    }

    /// The bindings of ``matchingUsersSQL(appStore:livemode:limit:)``.
    static func matchingUsersArguments(_ term: String, in scope: ServiceScope, appStore: Bool) -> [LedgerValue] {
        let key: [LedgerValue] = [.text(scope.account), .boolean(scope.livemode)]
        let term = LedgerValue.text(term)
        var values = key + [term] + key + [term] + key + [term] + key + key + [term] + key + key + [term]
        if appStore { values += [term, term] }
        return values
    }

    /// The matches of the rows of ``matchingUsersSQL(appStore:livemode:limit:)``.
    static func userMatch(_ row: some LedgerColumnReading) -> UserMatch? {
        guard let user = row.string(0), let field = row.string(1).flatMap(UserMatch.Field.init(rawValue:)) else { return nil }
        return UserMatch(user: user, field: field)
    }

    /// Customers by metadata (the `customer_appUser_scope` covering index) and by Checkout link
    /// (`userLink`'s key).
    static let customersSQL = """
        SELECT id, created, defaultPaymentMethod, vDeleted, 1 FROM customer
        WHERE appUserID = ? AND account = ? AND livemode = ?
        UNION ALL
        SELECT u.customer, c.created, c.defaultPaymentMethod, COALESCE(c.vDeleted, FALSE), 0 FROM userLink u
        LEFT JOIN customer c ON c.account = u.account AND c.livemode = u.livemode AND c.id = u.customer
        WHERE u.account = ? AND u.livemode = ? AND u.appUserID = ?
        """

    /// The bindings of ``customersSQL``.
    static func customersArguments(of user: String, in scope: ServiceScope) -> [LedgerValue] {
        [.text(user), .text(scope.account), .boolean(scope.livemode), .text(scope.account), .boolean(scope.livemode), .text(user)]
    }

    /// A user's customers from the rows of ``customersSQL``: each once, deleted ones left out,
    /// preferred first.
    struct CustomerList {
        private var found: [LinkedCustomer] = []
        private var deleted: [String] = []

        mutating func add(_ row: some LedgerColumnReading) {
            guard let id = row.string(0) else { return }
            if row.bool(3) {
                deleted.append(id)
                return
            }
            let byMetadata = row.bool(4)
            if let index = found.firstIndex(where: { $0.id == id }) {
                if byMetadata { found[index].byMetadata = true } else { found[index].byCheckout = true }
                return
            }
            found.append(LinkedCustomer(
                id: id, byMetadata: byMetadata, byCheckout: !byMetadata, created: row.int64(1), defaultPaymentMethod: row.string(2)))
        }

        var customers: [LinkedCustomer] {
            var customers = found
            if !deleted.isEmpty { customers.removeAll { deleted.contains($0.id) } }
            if customers.count > 1 { customers.sort(by: LinkedCustomer.isPreferred) }
            return customers
        }
    }

    /// A customer's subscriptions with their items, one row per item (items in id order).
    static let subscriptionsSQL = """
        SELECT s.id, s.status, s.currency, s.cancelAtPeriodEnd, s.cancelAt, s.canceledAt, s.endedAt, s.trialStart,
            s.trialEnd, s.currentPeriodStart, s.currentPeriodEnd, s.created, s.latestInvoice, s.defaultPaymentMethod,
            i.id, i.price, i.product, i.lookupKey, i.quantity, i.unitAmount, i.currency, i.interval, i.intervalCount,
            i.currentPeriodStart, i.currentPeriodEnd
        FROM subscription s
        LEFT JOIN subscriptionItem i ON i.account = s.account AND i.livemode = s.livemode AND i.subscription = s.id
        WHERE s.account = ? AND s.livemode = ? AND s.customer = ?
        """

    static let invoiceDueSQL = "SELECT status, dueDate, created FROM invoice WHERE account = ? AND livemode = ? AND id = ?"

    static let entitlementsSQL = "SELECT lookupKey FROM activeEntitlement WHERE account = ? AND livemode = ? AND customer = ?"

    /// Adds one row of ``subscriptionsSQL`` (a subscription and one of its items) to the
    /// customer's subscriptions, which start at `first`.
    static func appendSubscriptionRow(
        _ row: some LedgerColumnReading, customer: String, first: Int, to subscriptions: inout [LedgerSubscription]
    ) {
        guard let id = row.string(0) else { return }
        // One row per item; a subscription's rows normally come together.
        var index = subscriptions.endIndex - 1
        if index < first || subscriptions[index].id != id {
            index = subscriptions[first...].firstIndex { $0.id == id } ?? subscriptions.endIndex
        }
        if index == subscriptions.endIndex {
            subscriptions.append(LedgerSubscription(
                id: id, customer: customer, status: SubscriptionStatus(rawValue: row.string(1) ?? ""), created: row.int64(11),
                currency: row.string(2), cancelAtPeriodEnd: row.bool(3), cancelAt: row.int64(4), canceledAt: row.int64(5),
                endedAt: row.int64(6), trialStart: row.int64(7), trialEnd: row.int64(8), currentPeriodStart: row.int64(9),
                currentPeriodEnd: row.int64(10), latestInvoice: row.string(12), defaultPaymentMethod: row.string(13)))
        }
        guard let itemID = row.string(14) else { return }
        subscriptions[index].items.append(LedgerSubscription.Item(
            id: itemID, price: row.string(15), product: row.string(16), lookupKey: row.string(17), quantity: row.int64(18),
            unitAmount: row.int64(19), currency: row.string(20), interval: row.string(21).map(RecurringInterval.init(rawValue:)),
            intervalCount: row.int64(22), currentPeriodStart: row.int64(23), currentPeriodEnd: row.int64(24)))
    }

    /// The due date a past_due subscription's grace counts from, from a row of ``invoiceDueSQL``.
    static func unpaidInvoiceDueAt(_ row: some LedgerColumnReading) -> Int64? {
        row.string(0) == "open" ? row.int64(1) ?? row.int64(2) : nil
    }

    /// Where a page starting after an invoice of the user's customers starts: its `created`
    /// (0 when unset); no row when the invoice is not theirs.
    static func invoiceCursorSQL(customers: Int) -> String {
        let placeholders = Array(repeating: "?", count: customers).joined(separator: ",")
        return "SELECT COALESCE(created, 0) FROM invoice WHERE account = ? AND livemode = ? AND id = ? AND customer IN (\(placeholders))"
    }

    static func invoiceCursorArguments(_ invoice: String, of customers: [String], in scope: ServiceScope) -> [LedgerValue] {
        [.text(scope.account), .boolean(scope.livemode), .text(invoice)] + customers.map(LedgerValue.text)
    }

    /// A page of invoices of `customers` customers (one row more than the page, to tell whether
    /// there is more). The lines' periods are the service billed; the invoice's own
    /// period_start/period_end are Stripe's bookkeeping (for a renewal, the period that just ended).
    static func invoicesSQL(customers: Int, paged: Bool) -> String {
        let placeholders = Array(repeating: "?", count: customers).joined(separator: ",")
        let after = paged ? "AND (COALESCE(created, 0) < ? OR (COALESCE(created, 0) = ? AND id < ?))" : ""
        return """
            SELECT id, number, customer, subscription, status, currency, subtotal, discount, tax, total, amountDue,
                amountPaid, amountRemaining, created, finalizedAt, paidAt, voidedAt, dueDate, billingReason,
                collectionMethod, hostedInvoiceURL, invoicePDF,
                (SELECT MIN(l.periodStart) FROM invoiceLine l WHERE l.account = invoice.account AND l.livemode = invoice.livemode AND l.invoice = invoice.id),
                (SELECT MAX(l.periodEnd) FROM invoiceLine l WHERE l.account = invoice.account AND l.livemode = invoice.livemode AND l.invoice = invoice.id),
                periodStart, periodEnd
            FROM invoice
            WHERE account = ? AND livemode = ? AND customer IN (\(placeholders)) AND status IS NOT NULL AND status <> 'draft'
                AND vDeleted = FALSE \(after)
            ORDER BY COALESCE(created, 0) DESC, id DESC
            LIMIT ?
            """
    }

    static func invoicesArguments(of customers: [String], in scope: ServiceScope, limit: Int, after cursor: (created: Int64, id: String)?) -> [LedgerValue] {
        var arguments: [LedgerValue] = [.text(scope.account), .boolean(scope.livemode)] + customers.map(LedgerValue.text)
        if let cursor { arguments += [.integer(cursor.created), .integer(cursor.created), .text(cursor.id)] }
        return arguments + [.integer(Int64(limit + 1))]
    }

    /// An invoice from a row of ``invoicesSQL(customers:paged:)``.
    static func invoice(from row: some LedgerColumnReading) -> UserInvoice {
        UserInvoice(
            id: row.string(0) ?? "", number: row.string(1), customer: row.string(2), subscription: row.string(3), status: row.string(4),
            currency: row.string(5) ?? "", subtotal: row.int64(6) ?? 0, discount: row.int64(7) ?? 0, tax: row.int64(8) ?? 0,
            total: row.int64(9) ?? 0, amountDue: row.int64(10) ?? 0, amountPaid: row.int64(11) ?? 0,
            amountRemaining: row.int64(12) ?? 0, created: row.int64(13), finalizedAt: row.int64(14), paidAt: row.int64(15),
            voidedAt: row.int64(16), dueDate: row.int64(17), periodStart: row.int64(22) ?? row.int64(24),
            periodEnd: row.int64(23) ?? row.int64(25), billingReason: row.string(18), collectionMethod: row.string(19),
            hostedInvoiceURL: row.string(20), invoicePDF: row.string(21))
    }

    static let paymentMethodsSQL = """
        SELECT id, type, brand, last4, expMonth, expYear, created FROM paymentMethod
        WHERE account = ? AND livemode = ? AND customer = ? AND vDeleted = FALSE
        ORDER BY created DESC, id
        """

    /// The default payment method of a customer's newest live subscription, for customers whose
    /// invoice settings name none (Checkout sets the subscription's, not the customer's).
    static let subscriptionDefaultSQL = """
        SELECT defaultPaymentMethod FROM subscription
        WHERE account = ? AND livemode = ? AND customer = ? AND defaultPaymentMethod IS NOT NULL
            AND status NOT IN ('canceled', 'incomplete_expired')
        ORDER BY created DESC, id LIMIT 1
        """

    /// A payment method from a row of ``paymentMethodsSQL``.
    static func paymentMethod(from row: some LedgerColumnReading, customer: String, defaultMethod: String?) -> UserPaymentMethod {
        let id = row.string(0) ?? ""
        return UserPaymentMethod(
            id: id, customer: customer, type: row.string(1) ?? "", brand: row.string(2), last4: row.string(3), expMonth: row.int64(4),
            expYear: row.int64(5), created: row.int64(6), isDefault: id == defaultMethod)
    }

    /// Several customers' payment methods, newest first.
    static func sorted(_ methods: [UserPaymentMethod], customers: Int) -> [UserPaymentMethod] {
        guard customers > 1 else { return methods }
        return methods.sorted { ($0.created ?? 0, $1.id) > ($1.created ?? 0, $0.id) }
    }
}

extension UserInvoicePage {
    /// A page from up to `limit + 1` rows: the extra one only says that there is more.
    init(invoices: [UserInvoice], limit: Int) {
        let hasMore = invoices.count > limit
        self.init(invoices: hasMore ? Array(invoices.prefix(limit)) : invoices, hasMore: hasMore)
    }
}
