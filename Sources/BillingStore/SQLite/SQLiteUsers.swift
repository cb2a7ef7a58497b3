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
public struct SQLiteUsers: UserLedgerStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
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

    /// The app users a search term names in `scope`, by user id.
    public func users(matching term: String, in scope: ServiceScope, limit: Int) async throws -> [UserMatch] {
        precondition(limit > 0)
        let appStore = scope.account.isEmpty
        let sql = UserQueries.matchingUsersSQL(appStore: appStore, livemode: scope.livemode, limit: limit)
        let arguments = StatementArguments(UserQueries.matchingUsersArguments(term, in: scope, appStore: appStore).map(\.databaseValue))
        return try await read { db in
            var matches: [UserMatch] = []
            try SQLiteColumns.forEachRow(db.cachedStatement(sql: sql), arguments: arguments) { row in
                if let match = UserQueries.userMatch(row) { matches.append(match) }
            }
            return matches
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

    static func customers(of user: String, in scope: ServiceScope, db: Database) throws -> [LinkedCustomer] {
        var list = UserQueries.CustomerList()
        try SQLiteColumns.forEachRow(
            db.cachedStatement(sql: UserQueries.customersSQL), arguments: [user, scope.account, scope.livemode, scope.account, scope.livemode, user]
        ) { row in list.add(row) }
        return list.customers
    }

    static func billing(of user: String, in scope: ServiceScope, stripeEntitlements: Bool = true, db: Database) throws -> UserBilling {
        let customers = try customers(of: user, in: scope, db: db)
        var subscriptions: [LedgerSubscription] = []
        var entitlements: [String] = []
        if !customers.isEmpty {
            let subscriptionStatement = try db.cachedStatement(sql: UserQueries.subscriptionsSQL)
            let entitlementStatement = try db.cachedStatement(sql: UserQueries.entitlementsSQL)
            for customer in customers {
                try appendSubscriptions(of: customer.id, in: scope, statement: subscriptionStatement, to: &subscriptions)
                guard stripeEntitlements else { continue }
                let keys = try String.fetchCursor(entitlementStatement, arguments: [scope.account, scope.livemode, customer.id])
                while let key = try keys.next() { entitlements.append(key) }
            }
            // A past_due subscription's grace counts from when its unpaid invoice fell due.
            for index in subscriptions.indices where subscriptions[index].status == .pastDue {
                guard let invoice = subscriptions[index].latestInvoice else { continue }
                try SQLiteColumns.forEachRow(
                    db.cachedStatement(sql: UserQueries.invoiceDueSQL), arguments: [scope.account, scope.livemode, invoice]
                ) { row in
                    if let due = UserQueries.unpaidInvoiceDueAt(row) { subscriptions[index].unpaidInvoiceDueAt = due }
                }
            }
        }
        let appStore = scope.account.isEmpty ? try SQLiteAppStore.subscriptions(of: user, livemode: scope.livemode, db: db) : []
        return UserBilling(
            user: user, scope: scope, customers: customers, subscriptions: subscriptions, stripeEntitlements: entitlements,
            appStoreSubscriptions: appStore, grants: try SQLiteGrants.grants(of: user, in: scope, db: db))
    }

    private static func appendSubscriptions(
        of customer: String, in scope: ServiceScope, statement: Statement, to subscriptions: inout [LedgerSubscription]
    ) throws {
        let first = subscriptions.endIndex
        try SQLiteColumns.forEachRow(statement, arguments: [scope.account, scope.livemode, customer]) { row in
            UserQueries.appendSubscriptionRow(row, customer: customer, first: first, to: &subscriptions)
        }
    }

    static func invoices(
        of customers: [String], in scope: ServiceScope, limit: Int, startingAfter: String?, db: Database
    ) throws -> UserInvoicePage {
        var cursor: (created: Int64, id: String)?
        if let startingAfter {
            let created = try Int64.fetchOne(
                db.cachedStatement(sql: UserQueries.invoiceCursorSQL(customers: customers.count)),
                arguments: StatementArguments(UserQueries.invoiceCursorArguments(startingAfter, of: customers, in: scope).map(\.databaseValue)))
            guard let created else { throw UserLedgerError.unknownInvoice(startingAfter) }
            cursor = (created, startingAfter)
        }
        var invoices: [UserInvoice] = []
        try SQLiteColumns.forEachRow(
            db.cachedStatement(sql: UserQueries.invoicesSQL(customers: customers.count, paged: cursor != nil)),
            arguments: StatementArguments(UserQueries.invoicesArguments(of: customers, in: scope, limit: limit, after: cursor).map(\.databaseValue))
        ) { row in invoices.append(UserQueries.invoice(from: row)) }
        return UserInvoicePage(invoices: invoices, limit: limit)
    }

    static func paymentMethods(of customers: [LinkedCustomer], in scope: ServiceScope, db: Database) throws -> [UserPaymentMethod] {
        var methods: [UserPaymentMethod] = []
        for customer in customers {
            var defaultMethod = customer.defaultPaymentMethod
            if defaultMethod == nil {
                defaultMethod = try String.fetchOne(
                    db.cachedStatement(sql: UserQueries.subscriptionDefaultSQL), arguments: [scope.account, scope.livemode, customer.id])
            }
            try SQLiteColumns.forEachRow(
                db.cachedStatement(sql: UserQueries.paymentMethodsSQL), arguments: [scope.account, scope.livemode, customer.id]
            ) { row in methods.append(UserQueries.paymentMethod(from: row, customer: customer.id, defaultMethod: defaultMethod)) }
        }
        return UserQueries.sorted(methods, customers: customers.count)
    }
}

extension SQLiteMigrations {
    /// The console's search (`v12-customer-email` on PostgreSQL): customers by `lower(email)` in
    /// their account and mode, so that a support person's typing in any case finds the address as
    /// Stripe kept it without reading every customer (SQLite's `lower` folds ASCII letters only);
    /// and App Store owners by original transaction alone, which the primary key (environment
    /// first) cannot find for "every environment but Production" without a scan.
    static func registerCustomerEmailMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v14-customer-email") { db in
            try db.execute(sql: """
                CREATE INDEX customer_email ON customer(account, livemode, lower(email));
                CREATE INDEX appStoreOwner_original ON appStoreOwner(originalTransactionID);
                """)
        }
    }
}
