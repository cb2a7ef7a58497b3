import BillingCore
import GRDB

/// The SQLite ``UserLedgerStore``: the service API's reads of the ledger, per app user: their
/// customers, subscriptions, entitlements, invoices and payment methods. Each call is one read
/// transaction on a reader connection (never the writer), with cached statements on covering
/// indexes, so that a client polling every few seconds costs a few index lookups and no Stripe
/// call.
///
/// A user's customers are the union of customers whose `metadata.app_user_id` is the user (not
/// deleted) and customers a completed Checkout session tied to the user (`client_reference_id`).
public struct UserLedger: UserLedgerStore {
    let database: LedgerDatabase

    public init(database: LedgerDatabase) {
        self.database = database
    }

    /// The user's customers in `scope`, preferred first; empty for a user billingd does not know.
    public func customers(of user: String, in scope: ServiceScope) async throws -> [LinkedCustomer] {
        try await read { db in try Self.customers(of: user, in: scope, db: db) }
    }

    /// The user's customers, subscriptions and active Stripe Entitlements in `scope`.
    /// - Parameter stripeEntitlements: false leaves ``UserBilling/stripeEntitlements`` empty and
    ///   saves their lookup, for answers that do not show them.
    public func billing(of user: String, in scope: ServiceScope, stripeEntitlements: Bool) async throws -> UserBilling {
        try await read { db in try Self.billing(of: user, in: scope, stripeEntitlements: stripeEntitlements, db: db) }
    }

    /// A page of the user's invoices (drafts and deleted invoices left out), newest first; nil
    /// for a user without customers.
    /// - Parameter startingAfter: an invoice of the user; the page starts after it.
    /// - Throws: ``UserLedgerError/unknownInvoice(_:)`` when `startingAfter` is not the user's.
    public func invoices(of user: String, in scope: ServiceScope, limit: Int, startingAfter: String?) async throws -> UserInvoicePage? {
        precondition(limit > 0)
        return try await read { db in
            let customers = try Self.customers(of: user, in: scope, db: db).map(\.id)
            guard !customers.isEmpty else { return nil }
            return try Self.invoices(of: customers, in: scope, limit: limit, startingAfter: startingAfter, db: db)
        }
    }

    /// The user's payment methods (detached ones left out), newest first; nil for a user without
    /// customers.
    public func paymentMethods(of user: String, in scope: ServiceScope) async throws -> [UserPaymentMethod]? {
        try await read { db in
            let customers = try Self.customers(of: user, in: scope, db: db)
            guard !customers.isEmpty else { return nil }
            return try Self.paymentMethods(of: customers, in: scope, db: db)
        }
    }

    /// One read transaction on a reader connection: GRDB's `read`, with the `BEGIN` and `COMMIT`
    /// statements cached (`read` parses them again on every call, which costs as much as one of
    /// the index lookups). It runs on the reader's queue, not on the caller's thread: blocking one
    /// of the two cooperative threads of a 2-core machine for the read raised p99 by half
    /// (scripts/bench-api).
    private func read<T: Sendable>(_ block: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await database.writer.unsafeRead { db in
            try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
            do {
                let value = try block(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                return value
            } catch {
                try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute()
                throw error
            }
        }
    }

    // MARK: - Queries, inside the caller's transaction

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

    static func customers(of user: String, in scope: ServiceScope, db: Database) throws -> [LinkedCustomer] {
        var list = CustomerList()
        try UserLedgerColumns.forEachRow(
            db.cachedStatement(sql: customersSQL), arguments: [user, scope.account, scope.livemode, scope.account, scope.livemode, user]
        ) { row in list.add(row) }
        return list.customers
    }

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

    static func billing(of user: String, in scope: ServiceScope, stripeEntitlements: Bool = true, db: Database) throws -> UserBilling {
        let customers = try customers(of: user, in: scope, db: db)
        var subscriptions: [LedgerSubscription] = []
        var entitlements: [String] = []
        if !customers.isEmpty {
            let subscriptionStatement = try db.cachedStatement(sql: subscriptionsSQL)
            let entitlementStatement = try db.cachedStatement(sql: entitlementsSQL)
            for customer in customers {
                try appendSubscriptions(of: customer.id, in: scope, statement: subscriptionStatement, to: &subscriptions)
                guard stripeEntitlements else { continue }
                let keys = try String.fetchCursor(entitlementStatement, arguments: [scope.account, scope.livemode, customer.id])
                while let key = try keys.next() { entitlements.append(key) }
            }
            // A past_due subscription's grace counts from when its unpaid invoice fell due.
            for index in subscriptions.indices where subscriptions[index].status == .pastDue {
                guard let invoice = subscriptions[index].latestInvoice else { continue }
                try UserLedgerColumns.forEachRow(
                    db.cachedStatement(sql: invoiceDueSQL), arguments: [scope.account, scope.livemode, invoice]
                ) { row in
                    if let due = unpaidInvoiceDueAt(row) { subscriptions[index].unpaidInvoiceDueAt = due }
                }
            }
        }
        let appStore = scope.account.isEmpty ? try AppStoreLedgerReads.subscriptions(of: user, livemode: scope.livemode, db: db) : []
        return UserBilling(
            user: user, scope: scope, customers: customers, subscriptions: subscriptions, stripeEntitlements: entitlements,
            appStoreSubscriptions: appStore)
    }

    private static func appendSubscriptions(
        of customer: String, in scope: ServiceScope, statement: Statement, to subscriptions: inout [LedgerSubscription]
    ) throws {
        let first = subscriptions.endIndex
        try UserLedgerColumns.forEachRow(statement, arguments: [scope.account, scope.livemode, customer]) { row in
            appendSubscriptionRow(row, customer: customer, first: first, to: &subscriptions)
        }
    }

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

    static func invoices(
        of customers: [String], in scope: ServiceScope, limit: Int, startingAfter: String?, db: Database
    ) throws -> UserInvoicePage {
        var cursor: (created: Int64, id: String)?
        if let startingAfter {
            let created = try Int64.fetchOne(
                db.cachedStatement(sql: invoiceCursorSQL(customers: customers.count)),
                arguments: StatementArguments(invoiceCursorArguments(startingAfter, of: customers, in: scope).map(\.databaseValue)))
            guard let created else { throw UserLedgerError.unknownInvoice(startingAfter) }
            cursor = (created, startingAfter)
        }
        var invoices: [UserInvoice] = []
        try UserLedgerColumns.forEachRow(
            db.cachedStatement(sql: invoicesSQL(customers: customers.count, paged: cursor != nil)),
            arguments: StatementArguments(invoicesArguments(of: customers, in: scope, limit: limit, after: cursor).map(\.databaseValue))
        ) { row in invoices.append(invoice(from: row)) }
        return UserInvoicePage(invoices: invoices, limit: limit)
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

    static func paymentMethods(of customers: [LinkedCustomer], in scope: ServiceScope, db: Database) throws -> [UserPaymentMethod] {
        var methods: [UserPaymentMethod] = []
        for customer in customers {
            var defaultMethod = customer.defaultPaymentMethod
            if defaultMethod == nil {
                defaultMethod = try String.fetchOne(
                    db.cachedStatement(sql: subscriptionDefaultSQL), arguments: [scope.account, scope.livemode, customer.id])
            }
            try UserLedgerColumns.forEachRow(
                db.cachedStatement(sql: paymentMethodsSQL), arguments: [scope.account, scope.livemode, customer.id]
            ) { row in methods.append(paymentMethod(from: row, customer: customer.id, defaultMethod: defaultMethod)) }
        }
        return sorted(methods, customers: customers.count)
    }

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
