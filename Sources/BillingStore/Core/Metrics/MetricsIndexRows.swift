import BillingCore

/// The metrics index in the ledger (issue 32), its statements and rows written once for both
/// backends (`?` placeholders). Five tables, all derived from the facts, none copied by
/// `billingd copy` (a copy rebuilds them):
///
/// - `metricsIndexSpan`: each subscription's paying and trial spans (``IndexedSpan``);
/// - `metricsIndexDay`: per UTC day and group (store, plan, currency) what those spans change
///   (``MetricsIndexing/dayChanges(of:)``), so an overview sums a few thousand rows;
/// - `metricsIndexTrial`: each subscription's trials;
/// - `metricsIndexDirty`: the subscriptions whose facts changed since their spans were made. The
///   fact tables' triggers mark them in the transaction that changes the facts, so the ingest
///   path only adds one small row; a refresh (before a read, and by the revenue gauges soon after
///   a change) rebuilds the marked subscriptions' spans, a batch per transaction;
/// - `metricsIndexState`: the catalog fingerprint the spans were made under
///   (``PlanCatalog/metricsFingerprint``): another catalog rebuilds everything.
///
/// A row's scope is its store, `account` (Stripe's account, or the App Store environment) and
/// `livemode` (the App Store's Production is live).
enum MetricsIndexRows {
    /// The index's tables; `billingd copy` leaves them out and the target rebuilds them.
    static let tables = ["metricsIndexSpan", "metricsIndexDay", "metricsIndexTrial", "metricsIndexDirty", "metricsIndexState"]

    /// Whether a table (any case, as PostgreSQL folds names) is one of the index's.
    package static func isIndexTable(_ name: String) -> Bool {
        name.lowercased().hasPrefix("metricsindex")
    }

    /// SQLite's column types, and PostgreSQL's for the same columns.
    static let sqliteTypes = (integer: "INTEGER", boolean: "BOOLEAN", text: "TEXT")
    static let postgresTypes = (integer: "bigint", boolean: "boolean", text: "text")

    /// The tables, in a backend's `types`; the dirty marks' `seq` is each backend's own.
    static func createTablesSQL(types: (integer: String, boolean: String, text: String), dirtySeq: String) -> [String] {
        let (bigint, boolean, text) = types
        return [
            """
            CREATE TABLE metricsIndexSpan (
                store \(text) NOT NULL, account \(text) NOT NULL, livemode \(boolean) NOT NULL, subscription \(text) NOT NULL,
                spanStart \(bigint) NOT NULL, spanEnd \(bigint), kind \(text) NOT NULL, plan \(text) NOT NULL,
                currency \(text) NOT NULL, monthly \(bigint) NOT NULL,
                PRIMARY KEY (store, account, livemode, subscription, spanStart)
            )
            """,
            "CREATE INDEX metricsIndexSpan_start ON metricsIndexSpan (store, account, livemode, spanStart)",
            "CREATE INDEX metricsIndexSpan_end ON metricsIndexSpan (store, account, livemode, spanEnd)",
            """
            CREATE TABLE metricsIndexDay (
                store \(text) NOT NULL, account \(text) NOT NULL, livemode \(boolean) NOT NULL, day \(bigint) NOT NULL,
                plan \(text) NOT NULL, currency \(text) NOT NULL, paying \(bigint) NOT NULL, mrr \(bigint) NOT NULL, trials \(bigint) NOT NULL,
                PRIMARY KEY (store, account, livemode, day, plan, currency)
            )
            """,
            """
            CREATE TABLE metricsIndexTrial (
                store \(text) NOT NULL, account \(text) NOT NULL, livemode \(boolean) NOT NULL, subscription \(text) NOT NULL,
                trialStart \(bigint) NOT NULL, trialEnd \(bigint), convertedAt \(bigint),
                PRIMARY KEY (store, account, livemode, subscription, trialStart)
            )
            """,
            "CREATE INDEX metricsIndexTrial_start ON metricsIndexTrial (store, account, livemode, trialStart)",
            """
            CREATE TABLE metricsIndexDirty (
                store \(text) NOT NULL, account \(text) NOT NULL, livemode \(boolean) NOT NULL, subscription \(text) NOT NULL,
                seq \(dirtySeq),
                PRIMARY KEY (store, account, livemode, subscription)
            )
            """,
            "CREATE TABLE metricsIndexState (name \(text) PRIMARY KEY, value \(text) NOT NULL)",
            // What the triggers and a refresh's fact reads look up by: a refund's charge or
            // payment intent, an invoice's subscription. A refund's indexes also hold its status,
            // so that SQLite (which keeps no statistics here) searches them rather than every
            // refund of the account for each invoice.
            "DROP INDEX stripeRefund_charge",
            "DROP INDEX stripeRefund_paymentIntent",
            "CREATE INDEX stripeRefund_charge ON stripeRefund (account, livemode, charge, status)",
            "CREATE INDEX stripeRefund_paymentIntent ON stripeRefund (account, livemode, paymentIntent, status)",
            "CREATE INDEX invoice_subscription ON invoice (account, livemode, subscription, paidAt)",
            "CREATE INDEX invoice_charge ON invoice (account, livemode, charge) WHERE charge IS NOT NULL",
            "CREATE INDEX invoice_paymentIntent ON invoice (account, livemode, paymentIntent) WHERE paymentIntent IS NOT NULL",
            "CREATE INDEX invoicePayment_charge ON invoicePayment (account, livemode, charge) WHERE charge IS NOT NULL",
            "CREATE INDEX invoicePayment_paymentIntent ON invoicePayment (account, livemode, paymentIntent) WHERE paymentIntent IS NOT NULL",
        ]
    }

    // MARK: The marks a trigger makes

    /// What each fact table's triggers mark, as the `SELECT` of the subscriptions a row (`NEW` or
    /// `OLD`, spelled `ROW` here) touches: store, account, livemode, subscription.
    struct Marking {
        var table: String
        /// The statements' condition on the row, if any.
        var when: String?
        var select: String
        /// Whether updates mark too (a fact that only ever is inserted or deleted: no).
        var onUpdate: Bool
    }

    /// The fact tables' marks: a Stripe subscription's snapshot facts; its paid invoices (a first
    /// payment refunded undoes a trial's conversion) and their payments; the refunds of those;
    /// an App Store subscription's transactions and its grace period.
    static let markings: [Marking] = [
        Marking(
            table: "stripeSubscriptionFact", when: nil,
            select: "SELECT 'stripe', ROW.account, ROW.livemode, ROW.subscription", onUpdate: false),
        Marking(
            table: "invoice", when: "ROW.subscription IS NOT NULL",
            select: "SELECT 'stripe', ROW.account, ROW.livemode, ROW.subscription", onUpdate: true),
        Marking(
            table: "invoicePayment", when: "ROW.invoice IS NOT NULL",
            select: """
                SELECT 'stripe', i.account, i.livemode, i.subscription FROM invoice i
                WHERE i.account = ROW.account AND i.livemode = ROW.livemode AND i.id = ROW.invoice AND i.subscription IS NOT NULL
                """, onUpdate: true),
        Marking(
            table: "stripeRefund", when: nil,
            select: """
                SELECT 'stripe', i.account, i.livemode, i.subscription FROM invoice i
                WHERE i.account = ROW.account AND i.livemode = ROW.livemode AND i.charge = ROW.charge AND i.subscription IS NOT NULL
                UNION SELECT 'stripe', i.account, i.livemode, i.subscription FROM invoice i
                WHERE i.account = ROW.account AND i.livemode = ROW.livemode AND i.paymentIntent = ROW.paymentIntent
                    AND i.subscription IS NOT NULL
                UNION SELECT 'stripe', i.account, i.livemode, i.subscription FROM invoicePayment p
                JOIN invoice i ON i.account = p.account AND i.livemode = p.livemode AND i.id = p.invoice
                WHERE p.account = ROW.account AND p.livemode = ROW.livemode AND p.charge = ROW.charge AND i.subscription IS NOT NULL
                UNION SELECT 'stripe', i.account, i.livemode, i.subscription FROM invoicePayment p
                JOIN invoice i ON i.account = p.account AND i.livemode = p.livemode AND i.id = p.invoice
                WHERE p.account = ROW.account AND p.livemode = ROW.livemode AND p.paymentIntent = ROW.paymentIntent
                    AND i.subscription IS NOT NULL
                """, onUpdate: true),
        Marking(
            table: "appStoreTransaction", when: "ROW.type = '\(AppStoreTransaction.autoRenewable)'",
            select: "SELECT 'app_store', ROW.environment, ROW.environment = 'Production', ROW.originalTransactionID", onUpdate: true),
        Marking(
            table: "appStoreSubscription", when: nil,
            select: "SELECT 'app_store', ROW.environment, ROW.environment = 'Production', ROW.originalTransactionID", onUpdate: true),
    ]

    /// Every subscription the facts name, marked for a rebuild (under a new catalog). Rows as a
    /// marking's `SELECT`.
    static let everySubscriptionSQL = [
        "SELECT DISTINCT 'stripe', account, livemode, subscription FROM stripeSubscriptionFact",
        """
        SELECT DISTINCT 'app_store', environment, environment = 'Production', originalTransactionID FROM appStoreTransaction
        WHERE type = '\(AppStoreTransaction.autoRenewable)'
        """,
    ]

    // MARK: State

    static let fingerprintName = "catalog"
    static let stateSQL = "SELECT value FROM metricsIndexState WHERE name = ?"
    static let setStateSQL = "INSERT INTO metricsIndexState (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    static let anyDirtySQL = "SELECT count(*) FROM (SELECT 1 FROM metricsIndexDirty LIMIT 1) AS marked"
    /// Forgets every span, day and trial (before a rebuild under a new catalog).
    static let clearSQL = ["DELETE FROM metricsIndexSpan", "DELETE FROM metricsIndexDay", "DELETE FROM metricsIndexTrial"]

    // MARK: A refresh

    /// A subscription marked for a refresh.
    struct Mark: Hashable {
        var store: MetricsStore
        var account: String
        var livemode: Bool
        var subscription: String
        var seq: Int64

        var group: Group { Group(store: store, account: account, livemode: livemode) }
    }

    /// The scope of index rows: a store, its account or environment, the mode.
    struct Group: Hashable {
        var store: MetricsStore
        var account: String
        var livemode: Bool

        var values: [LedgerValue] { [.text(store.rawValue), .text(account), .boolean(livemode)] }
    }

    /// The next marks, oldest subscription id first. Argument: the batch's size.
    static let marksSQL = "SELECT store, account, livemode, subscription, seq FROM metricsIndexDirty ORDER BY store, account, livemode, subscription LIMIT ?"

    static func mark(_ row: [LedgerValue]) -> Mark? {
        guard let store = row[0].text.flatMap(MetricsStore.init(rawValue:)), let account = row[1].text, let subscription = row[3].text
        else { return nil }
        return Mark(store: store, account: account, livemode: row[2].flag, subscription: subscription, seq: row[4].integer ?? 0)
    }

    /// Removes a mark unless the facts changed again since it was read (its `seq` moved on).
    static let unmarkSQL = "DELETE FROM metricsIndexDirty WHERE store = ? AND account = ? AND livemode = ? AND subscription = ? AND seq = ?"

    static func unmarkArguments(_ mark: Mark) -> [LedgerValue] {
        mark.group.values + [.text(mark.subscription), .integer(mark.seq)]
    }

    /// Whether a statement's text holds a list of ids (``list(_:)``), so varies with its length.
    static func hasIDList(_ sql: String) -> Bool { sql.contains("IN (?") }

    /// `?, ?, …` for `count` values.
    static func list(_ count: Int) -> String { Array(repeating: "?", count: max(count, 1)).joined(separator: ", ") }

    /// The facts of some Stripe subscriptions of one scope: `?` for account, livemode, then each id.
    static func stripeFactsSQL(count: Int) -> String {
        """
        SELECT subscription, vEventID, vDeleted, vTerminal, vCreated, vTransition, vRank, status, currency,
            monthlyCurrency, monthlyNumerator, monthlyDenominator, trialStart, trialEnd, price, lookupKey, product
        FROM stripeSubscriptionFact WHERE account = ? AND livemode = ? AND subscription IN (\(list(count)))
        ORDER BY subscription, vCreated, vEventID
        """
    }

    /// Their paid invoices that took money, and whether a succeeded refund was made of what paid
    /// them (as ``MetricsFactReads/paidInvoicesSQL``, by the indexes on charge and payment intent):
    /// `?` for account, livemode, then each id.
    static func stripePaidInvoicesSQL(count: Int) -> String {
        let refunded = { (table: String, column: String) in
            """
            EXISTS (SELECT 1 FROM stripeRefund r WHERE r.account = \(table).account AND r.livemode = \(table).livemode
                AND r.\(column) = \(table).\(column) AND r.status = '\(Refund.succeeded)')
            """
        }
        return """
            SELECT i.subscription, i.paidAt, CASE WHEN \(refunded("i", "charge")) OR \(refunded("i", "paymentIntent")) OR EXISTS (
                SELECT 1 FROM invoicePayment p WHERE p.account = i.account AND p.livemode = i.livemode AND p.invoice = i.id
                    AND (\(refunded("p", "charge")) OR \(refunded("p", "paymentIntent")))) THEN TRUE ELSE FALSE END AS refunded
            FROM invoice i
            WHERE i.account = ? AND i.livemode = ? AND i.subscription IN (\(list(count)))
                AND i.status = '\(InvoiceStatus.paid.rawValue)' AND i.paidAt IS NOT NULL AND i.amountPaid > 0
            ORDER BY i.subscription, i.paidAt
            """
    }

    /// The auto-renewable transactions of some App Store subscriptions of one environment: `?`
    /// for the environment, then each original transaction id. Rows as
    /// ``MetricsFactReads/appStoreTransactionsSQL(environments:)``'s.
    static func appStoreTransactionsSQL(count: Int) -> String {
        """
        SELECT environment, originalTransactionID, transactionID, productID, purchaseDate, expiresDate, price, currency,
            offerType, inAppOwnershipType, revoked, revocationDate, revocationReason
        FROM appStoreTransaction
        WHERE type = '\(AppStoreTransaction.autoRenewable)' AND environment = ? AND originalTransactionID IN (\(list(count)))
        ORDER BY environment, originalTransactionID, purchaseDate, transactionID
        """
    }

    /// Their grace periods: `?` for the environment, then each original transaction id.
    static func gracePeriodsSQL(count: Int) -> String {
        """
        SELECT environment, originalTransactionID, gracePeriodExpiresDate FROM appStoreSubscription
        WHERE gracePeriodExpiresDate IS NOT NULL AND environment = ? AND originalTransactionID IN (\(list(count)))
        """
    }

    /// The spans of some subscriptions of one group: `?` for store, account, livemode, then each id.
    static func spansSQL(count: Int) -> String {
        "SELECT \(spanColumns) FROM metricsIndexSpan WHERE store = ? AND account = ? AND livemode = ? AND subscription IN (\(list(count)))"
    }

    /// Deletes the spans and trials of some subscriptions of one group (same arguments).
    static func deleteSQL(count: Int) -> [String] {
        ["metricsIndexSpan", "metricsIndexTrial"].map {
            "DELETE FROM \($0) WHERE store = ? AND account = ? AND livemode = ? AND subscription IN (\(list(count)))"
        }
    }

    static let insertSpanSQL = """
        INSERT INTO metricsIndexSpan (store, account, livemode, subscription, spanStart, spanEnd, kind, plan, currency, monthly)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    static let insertTrialSQL = """
        INSERT INTO metricsIndexTrial (store, account, livemode, subscription, trialStart, trialEnd, convertedAt)
        VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
        """

    static let addDaySQL = """
        INSERT INTO metricsIndexDay (store, account, livemode, day, plan, currency, paying, mrr, trials)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (store, account, livemode, day, plan, currency) DO UPDATE SET
            paying = metricsIndexDay.paying + excluded.paying, mrr = metricsIndexDay.mrr + excluded.mrr,
            trials = metricsIndexDay.trials + excluded.trials
        """

    /// What a refresh reads of one group's marked subscriptions.
    struct GroupFacts {
        var stripeFacts: [[LedgerValue]] = []
        var paidInvoices: [[LedgerValue]] = []
        var transactions: [[LedgerValue]] = []
        var gracePeriods: [[LedgerValue]] = []
        var oldSpans: [[LedgerValue]] = []
    }

    /// The reads of one group's subscriptions: (statement, arguments) for the Stripe facts and
    /// paid invoices, or the App Store transactions and grace periods, then the old spans.
    static func reads(_ group: Group, subscriptions: [String]) -> (facts: [(String, [LedgerValue])], spans: (String, [LedgerValue])) {
        let ids = subscriptions.map(LedgerValue.text)
        let facts: [(String, [LedgerValue])] = switch group.store {
        case .stripe:
            [
                (stripeFactsSQL(count: ids.count), [.text(group.account), .boolean(group.livemode)] + ids),
                (stripePaidInvoicesSQL(count: ids.count), [.text(group.account), .boolean(group.livemode)] + ids),
            ]
        case .appStore:
            [
                (appStoreTransactionsSQL(count: ids.count), [.text(group.account)] + ids),
                (gracePeriodsSQL(count: ids.count), [.text(group.account)] + ids),
            ]
        }
        return (facts, (spansSQL(count: ids.count), group.values + ids))
    }

    /// The statements that replace one group's subscriptions' spans, trials and day changes with
    /// those their facts give now: the facts' rows in the order ``reads(_:subscriptions:)`` gave
    /// the statements, then the old spans' rows.
    static func writes(
        _ group: Group, subscriptions: [String], facts: [[[LedgerValue]]], oldSpans: [[LedgerValue]], catalog: PlanCatalog
    ) -> [(String, [LedgerValue])] {
        let histories: [SubscriptionHistory]
        switch group.store {
        case .stripe:
            let rows = facts[0].map(MetricsFactReads.SubscriptionFactRow.init)
            let invoices = facts[1].compactMap { row -> (subscription: String, paidAt: Int64, refunded: Bool)? in
                guard let subscription = row[0].text, let paidAt = row[1].integer else { return nil }
                return (subscription, paidAt, row[2].flag)
            }
            histories = SubscriptionHistory.histories(
                stripe: MetricsFactReads.stripeSubscriptions(facts: rows, paidInvoices: invoices), appStore: [], catalog: catalog)
        case .appStore:
            histories = SubscriptionHistory.histories(
                stripe: [], appStore: MetricsFactReads.appStoreSubscriptions(transactions: facts[0], gracePeriods: facts[1]), catalog: catalog)
        }
        let newSpans = histories.flatMap(IndexedSpan.spans(of:))
        let old = oldSpans.compactMap { span($0, store: group.store) }
        let ids = subscriptions.map(LedgerValue.text)
        var statements: [(String, [LedgerValue])] = deleteSQL(count: ids.count).map { ($0, group.values + ids) }
        for span in newSpans {
            var kind = "trial", currency = "", monthly: Int64 = 0
            if case .paying(let code, let amount) = span.span.state { (kind, currency, monthly) = ("paying", code, amount) }
            statements.append((insertSpanSQL, group.values + [
                .text(span.subscription), .integer(span.span.start), span.span.end.map(LedgerValue.integer) ?? .null, .text(kind),
                .text(span.plan ?? ""), .text(currency), .integer(monthly),
            ]))
        }
        for history in histories {
            for trial in history.trials {
                statements.append((insertTrialSQL, group.values + [
                    .text(history.id), .integer(trial.start), trial.end.map(LedgerValue.integer) ?? .null,
                    trial.convertedAt.map(LedgerValue.integer) ?? .null,
                ]))
            }
        }
        let changes = MetricsIndexing.dayChanges(replacing: old, with: newSpans)
        for (key, tally) in changes.sorted(by: { dayOrder($0.key, $1.key) }) {
            statements.append((addDaySQL, group.values + [
                .integer(key.day), .text(key.key.plan ?? ""), .text(key.key.currency ?? ""), .integer(tally.paying),
                .integer(tally.mrr), .integer(tally.trials),
            ]))
        }
        return statements
    }

    /// A fixed order for the day upserts, so that two refreshes never lock rows in opposite orders.
    private static func dayOrder(_ lhs: MetricsDayKey, _ rhs: MetricsDayKey) -> Bool {
        (lhs.day, lhs.key.plan ?? "", lhs.key.currency ?? "") < (rhs.day, rhs.key.plan ?? "", rhs.key.currency ?? "")
    }

    // MARK: Reads

    /// The columns ``span(_:store:)`` reads.
    static let spanColumns = "subscription, spanStart, spanEnd, kind, plan, currency, monthly"

    static func span(_ row: [LedgerValue], store: MetricsStore) -> IndexedSpan? {
        guard let subscription = row[0].text, let start = row[1].integer else { return nil }
        let state: SubscriptionState = row[3].text == "paying" ? .paying(currency: row[5].text ?? "", monthly: row[6].integer ?? 0) : .trial
        let plan = row[4].text.flatMap { $0.isEmpty ? nil : $0 }
        return IndexedSpan(store: store, subscription: subscription, plan: plan, span: SubscriptionSpan(start: start, end: row[2].integer, state: state))
    }

    /// The groups a scope's figures read.
    static func groups(_ scope: MetricsScope) -> [Group] {
        [Group(store: .stripe, account: scope.stripe.account, livemode: scope.stripe.livemode)]
            + scope.appStoreEnvironments.map { Group(store: .appStore, account: $0, livemode: $0 == AppStoreEnvironment.production.rawValue) }
    }

    /// A group's day sums before a day: `?` for store, account, livemode, day. Rows: plan,
    /// currency, paying, mrr, trials.
    static let sumsSQL = """
        SELECT plan, currency, CAST(SUM(paying) AS bigint), CAST(SUM(mrr) AS bigint), CAST(SUM(trials) AS bigint) FROM metricsIndexDay
        WHERE store = ? AND account = ? AND livemode = ? AND day < ? GROUP BY plan, currency
        """

    static func sum(_ row: [LedgerValue], store: MetricsStore) -> (MetricsTallyKey, MetricsTally) {
        let plan = row[0].text.flatMap { $0.isEmpty ? nil : $0 }
        let currency = row[1].text.flatMap { $0.isEmpty ? nil : $0 }
        return (
            MetricsTallyKey(store: store, plan: plan, currency: currency),
            MetricsTally(paying: row[2].integer ?? 0, mrr: row[3].integer ?? 0, trials: row[4].integer ?? 0)
        )
    }

    /// A group's spans with a start or end in `[from, through]`: `?` for store, account,
    /// livemode, from, through, then store, account, livemode, from, through, from. Two range
    /// scans, one per index (an `OR` of the two ranges makes SQLite scan the group's every span);
    /// the second leaves out the spans the first found (a span ends after it starts, so one
    /// ending in the range and not starting in it started before it).
    static let boundarySpansSQL = """
        SELECT \(spanColumns) FROM metricsIndexSpan
        WHERE store = ? AND account = ? AND livemode = ? AND spanStart >= ? AND spanStart <= ?
        UNION ALL
        SELECT \(spanColumns) FROM metricsIndexSpan
        WHERE store = ? AND account = ? AND livemode = ? AND spanEnd >= ? AND spanEnd <= ? AND spanStart < ?
        """

    /// ``boundarySpansSQL``'s arguments.
    static func boundarySpansArguments(_ group: Group, from: Int64, through: Int64) -> [LedgerValue] {
        group.values + [.integer(from), .integer(through)] + group.values + [.integer(from), .integer(through), .integer(from)]
    }

    /// Every span of a group's subscriptions with a span starting or ending in `(after, through]`
    /// (arguments: ``changedSpansArguments(_:after:through:)``). The subscriptions come from two
    /// range scans of the span indexes, which carry the subscription (`v18-metrics-span-clustered`
    /// on SQLite, `v16-metrics-span-covering` on PostgreSQL), and their spans from the primary key.
    static let changedSpansSQL = """
        SELECT \(spanColumns) FROM metricsIndexSpan
        WHERE store = ? AND account = ? AND livemode = ? AND subscription IN (
            SELECT subscription FROM metricsIndexSpan
            WHERE store = ? AND account = ? AND livemode = ? AND spanStart > ? AND spanStart <= ?
            UNION ALL
            SELECT subscription FROM metricsIndexSpan
            WHERE store = ? AND account = ? AND livemode = ? AND spanEnd > ? AND spanEnd <= ?)
        ORDER BY subscription, spanStart
        """

    /// ``changedSpansSQL``'s arguments.
    static func changedSpansArguments(_ group: Group, after: Int64, through: Int64) -> [LedgerValue] {
        let range: [LedgerValue] = [.integer(after), .integer(through)]
        return group.values + group.values + range + group.values + range
    }

    /// The span indexes with the subscription as their last column, so that the subscriptions
    /// with a span starting or ending in a range are read from the index alone (created by each
    /// backend's migration after dropping the first ones).
    static let coveringSpanIndexesSQL = [
        "CREATE INDEX metricsIndexSpan_start ON metricsIndexSpan (store, account, livemode, spanStart, subscription)",
        "CREATE INDEX metricsIndexSpan_end ON metricsIndexSpan (store, account, livemode, spanEnd, subscription)",
    ]

    /// A group's trials started in `[from, to)` with the span of their subscription at `now`:
    /// `?` for now, now, store, account, livemode, from, to. Rows: subscription, start, end,
    /// converted at, then the span's kind, currency and monthly amount (NULL: none).
    static let trialsSQL = """
        SELECT t.subscription, t.trialStart, t.trialEnd, t.convertedAt, s.kind, s.currency, s.monthly, s.spanStart
        FROM metricsIndexTrial t
        LEFT JOIN metricsIndexSpan s ON s.store = t.store AND s.account = t.account AND s.livemode = t.livemode
            AND s.subscription = t.subscription AND s.spanStart <= ? AND (s.spanEnd IS NULL OR s.spanEnd > ?)
        WHERE t.store = ? AND t.account = ? AND t.livemode = ? AND t.trialStart >= ? AND t.trialStart < ?
        ORDER BY t.subscription, t.trialStart
        """

    /// The trials of ``trialsSQL``'s rows, those started after `now` left out.
    static func judgedTrials(_ rows: [[LedgerValue]], store: MetricsStore, now: Int64) -> [JudgedTrial] {
        var judged: [JudgedTrial] = []
        for row in rows {
            guard let start = row[1].integer, start <= now else { continue }
            let state: SubscriptionState = switch row[4].text {
            case "paying": .paying(currency: row[5].text ?? "", monthly: row[6].integer ?? 0)
            case "trial": .trial
            default: .inactive
            }
            judged.append(JudgedTrial(store: store, trial: TrialRecord(start: start, end: row[2].integer, convertedAt: row[3].integer), stateNow: state))
        }
        return judged
    }

    /// Histories (spans only) from ``changedSpansSQL``'s rows, in subscription order.
    static func histories(_ rows: [[LedgerValue]], store: MetricsStore) -> [SubscriptionHistory] {
        var histories: [SubscriptionHistory] = []
        for row in rows {
            guard let span = span(row, store: store) else { continue }
            if histories.last?.id != span.subscription {
                histories.append(SubscriptionHistory(store: store, id: span.subscription, plan: span.plan, spans: [], trials: []))
            }
            histories[histories.count - 1].spans.append(span.span)
        }
        return histories
    }
}
