import BillingCore
import Logging
import PostgresNIO

/// The service API's reads of the PostgreSQL ledger, per app user: the twin of SQLite/SQLiteUsers.swift,
/// sharing its statements and row decoding (``UserQueries/CustomerList``,
/// ``UserQueries/appendSubscriptionRow(_:customer:first:to:)`` …). Each call is one read-only
/// transaction at REPEATABLE READ, so that its several statements see one snapshot, as a
/// SQLite read transaction does.
struct PostgresUsers: UserLedgerStore {
    let client: PostgresClient
    let logger: Logger

    func customers(of user: String, in scope: ServiceScope) async throws -> [LinkedCustomer] {
        try await read { reader in try await reader.customers(of: user, in: scope) }
    }

    func billing(of user: String, in scope: ServiceScope, stripeEntitlements: Bool) async throws -> UserBilling {
        try await read { reader in try await reader.billing(of: user, in: scope, stripeEntitlements: stripeEntitlements) }
    }

    func invoices(of user: String, in scope: ServiceScope, limit: Int, startingAfter: String?) async throws -> UserInvoicePage? {
        precondition(limit > 0)
        return try await read { reader in
            let customers = try await reader.customers(of: user, in: scope).map(\.id)
            guard !customers.isEmpty else { return nil }
            var cursor: (created: Int64, id: String)?
            if let startingAfter {
                try await reader.forEachRow(
                    UserQueries.invoiceCursorSQL(customers: customers.count),
                    UserQueries.invoiceCursorArguments(startingAfter, of: customers, in: scope), once: true
                ) { row in cursor = (row.int64(0) ?? 0, startingAfter) }
                guard cursor != nil else { throw UserLedgerError.unknownInvoice(startingAfter) }
            }
            var invoices: [UserInvoice] = []
            try await reader.forEachRow(
                UserQueries.invoicesSQL(customers: customers.count, paged: cursor != nil),
                UserQueries.invoicesArguments(of: customers, in: scope, limit: limit, after: cursor), once: true
            ) { row in invoices.append(UserQueries.invoice(from: row)) }
            return UserInvoicePage(invoices: invoices, limit: limit)
        }
    }

    func paymentMethods(of user: String, in scope: ServiceScope) async throws -> [UserPaymentMethod]? {
        try await read { reader in
            let customers = try await reader.customers(of: user, in: scope)
            guard !customers.isEmpty else { return nil }
            var methods: [UserPaymentMethod] = []
            let key: [LedgerValue] = [.text(scope.account), .boolean(scope.livemode)]
            for customer in customers {
                var defaultMethod = customer.defaultPaymentMethod
                if defaultMethod == nil {
                    try await reader.forEachRow(UserQueries.subscriptionDefaultSQL, key + [.text(customer.id)]) { row in
                        defaultMethod = row.string(0)
                    }
                }
                try await reader.forEachRow(UserQueries.paymentMethodsSQL, key + [.text(customer.id)]) { row in
                    methods.append(UserQueries.paymentMethod(from: row, customer: customer.id, defaultMethod: defaultMethod))
                }
            }
            return UserQueries.sorted(methods, customers: customers.count)
        }
    }

    func users(matching term: String, in scope: ServiceScope, limit: Int) async throws -> [UserMatch] {
        precondition(limit > 0)
        let appStore = scope.account.isEmpty
        let sql = UserQueries.matchingUsersSQL(appStore: appStore, livemode: scope.livemode, limit: limit)
        return try await read { reader in
            var matches: [UserMatch] = []
            try await reader.forEachRow(sql, UserQueries.matchingUsersArguments(term, in: scope, appStore: appStore)) { row in
                if let match = UserQueries.userMatch(row) { matches.append(match) }
            }
            return matches
        }
    }

    /// Runs `body` in one read-only REPEATABLE READ transaction.
    private func read<T>(_ body: (Reader) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            do {
                let value = try await body(Reader(connection: connection, logger: logger))
                try await connection.query("COMMIT", logger: logger)
                return value
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// The statements of one read transaction.
    struct Reader {
        let connection: PostgresConnection
        let logger: Logger

        /// Runs a statement spelled with `?` placeholders and hands each row to `body`; prepared
        /// unless `once` (a text with one placeholder per customer is not from a bounded set).
        func forEachRow(_ sql: String, _ values: [LedgerValue], once: Bool = false, _ body: (PostgresRowValues) throws -> Void) async throws {
            let rows = once ? try await connection.runOnce(sql, values, logger: logger) : try await connection.run(sql, values, logger: logger)
            for try await row in rows {
                try body(PostgresRowValues(values: try row.map(LedgerValue.init)))
            }
        }

        /// Runs a statement spelled with `?` placeholders for each of `keys` in one round trip,
        /// prepared: the statement becomes a LATERAL subquery over the keys, each key standing
        /// where `values` holds nil. `body` gets each row with the index of its key in `keys`.
        func forEachRow(
            _ sql: String, _ values: [LedgerValue?], forEach keys: [String], _ body: (Int, PostgresRowValues) throws -> Void
        ) async throws {
            guard !keys.isEmpty else { return }
            var binds = PostgresBindings(capacity: values.count + 1)
            binds.append(keys)
            var numbers: [Int: Int] = [:]
            for (index, value) in values.enumerated() {
                guard let value else { continue }
                binds.append(value)
                numbers[index + 1] = numbers.count + 2
            }
            let lateral = numberedPlaceholders(sql) { numbers[$0].map { "$\($0)" } ?? "k.key" }
            let rows = try await connection.prepared(
                PostgresQuery(
                    unsafeSQL: "SELECT k.n, r.* FROM unnest($1::text[]) WITH ORDINALITY AS k (key, n) CROSS JOIN LATERAL (\(lateral)) AS r",
                    binds: binds),
                logger: logger)
            for try await row in rows {
                let values = try row.map(LedgerValue.init)
                guard case .integer(let number) = values.first, number >= 1, number <= keys.count else { continue }
                try body(Int(number) - 1, PostgresRowValues(values: Array(values.dropFirst())))
            }
        }

        /// The user's billing in one mode, as the service API and the outbox resolve it.
        func billing(of user: String, in scope: ServiceScope, stripeEntitlements: Bool = true) async throws -> UserBilling {
            try await billings(of: [user], in: scope, stripeEntitlements: stripeEntitlements)[0]
        }

        /// The billing of several users of one mode, in `users`' order, in a number of statements
        /// that does not grow with theirs (the outbox announces a group commit's users together).
        func billings(of users: [String], in scope: ServiceScope, stripeEntitlements: Bool = true) async throws -> [UserBilling] {
            let key: [LedgerValue?] = [.text(scope.account), .boolean(scope.livemode)]
            var lists = Array(repeating: UserQueries.CustomerList(), count: users.count)
            try await forEachRow(UserQueries.customersSQL, [nil] + key + key + [nil], forEach: users) { lists[$0].add($1) }
            let customers = lists.map(\.customers)
            var customerIDs: [String] = []
            var customerIndex: [String: Int] = [:]
            for id in customers.joined().map(\.id) where customerIndex[id] == nil {
                customerIndex[id] = customerIDs.count
                customerIDs.append(id)
            }
            var subscriptionRows = Array(repeating: [PostgresRowValues](), count: customerIDs.count)
            try await forEachRow(UserQueries.subscriptionsSQL, key + [nil], forEach: customerIDs) { subscriptionRows[$0].append($1) }
            var entitlementsOf = Array(repeating: [String](), count: customerIDs.count)
            if stripeEntitlements {
                try await forEachRow(UserQueries.entitlementsSQL, key + [nil], forEach: customerIDs) { index, row in
                    if let lookupKey = row.string(0) { entitlementsOf[index].append(lookupKey) }
                }
            }
            var subscriptions: [[LedgerSubscription]] = customers.map { customers in
                var subscriptions: [LedgerSubscription] = []
                for customer in customers {
                    let first = subscriptions.endIndex
                    for row in subscriptionRows[customerIndex[customer.id] ?? 0] {
                        UserQueries.appendSubscriptionRow(row, customer: customer.id, first: first, to: &subscriptions)
                    }
                }
                return subscriptions
            }
            // A past_due subscription's grace counts from when its unpaid invoice fell due.
            let unpaid = Array(Set(subscriptions.joined().filter { $0.status == .pastDue }.compactMap(\.latestInvoice)))
            var dueAt: [String: Int64] = [:]
            try await forEachRow(UserQueries.invoiceDueSQL, key + [nil], forEach: unpaid) { index, row in
                if let due = UserQueries.unpaidInvoiceDueAt(row) { dueAt[unpaid[index]] = due }
            }
            for user in subscriptions.indices {
                for index in subscriptions[user].indices where subscriptions[user][index].status == .pastDue {
                    if let due = subscriptions[user][index].latestInvoice.flatMap({ dueAt[$0] }) {
                        subscriptions[user][index].unpaidInvoiceDueAt = due
                    }
                }
            }
            var appStore = Array(repeating: [AppStoreSubscriptionRecord](), count: users.count)
            if scope.account.isEmpty {
                try await forEachRow(AppStoreLedgerRows.subscriptionsSQL(livemode: scope.livemode), [nil], forEach: users) { index, row in
                    if let record = AppStoreLedgerRows.record(from: row) { appStore[index].append(record) }
                }
            }
            var grants = Array(repeating: [PromotionalGrant](), count: users.count)
            try await forEachRow(GrantRows.userSQL, key + [nil], forEach: users) { grants[$0].append(GrantRows.grant(from: $1)) }
            return users.indices.map { index in
                UserBilling(
                    user: users[index], scope: scope, customers: customers[index], subscriptions: subscriptions[index],
                    stripeEntitlements: customers[index].flatMap { entitlementsOf[customerIndex[$0.id] ?? 0] },
                    appStoreSubscriptions: appStore[index], grants: grants[index])
            }
        }

        func customers(of user: String, in scope: ServiceScope) async throws -> [LinkedCustomer] {
            var list = UserQueries.CustomerList()
            try await forEachRow(UserQueries.customersSQL, UserQueries.customersArguments(of: user, in: scope)) { list.add($0) }
            return list.customers
        }
    }
}

extension PostgresUsers {
    /// The console's search (`v14-customer-email` on SQLite): customers by `lower(email)` in
    /// their account and mode, so that a support person's typing in any case finds the address as
    /// Stripe kept it without reading every customer; and App Store owners by original
    /// transaction alone, which the primary key (environment first) does not serve.
    static let emailMigration = PostgresMigrations.Migration(
        version: "v12-customer-email",
        statements: [
            "CREATE INDEX customer_email ON customer (account, livemode, lower(email))",
            "CREATE INDEX appStoreOwner_original ON appStoreOwner (originalTransactionID)",
        ])
}
