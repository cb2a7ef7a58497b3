import BillingCore

/// The reads of ``MetricsFactStore``, written once: the statements (both dialects read them
/// alike, `?` placeholders) and what their rows, as ``LedgerValue``s, come to. A backend only
/// runs the statements and hands the rows over.
enum MetricsFactReads {
    // MARK: Stripe

    /// A scope's subscription facts, with `?` for account and livemode.
    static let subscriptionFactsSQL = """
        SELECT subscription, vEventID, vDeleted, vTerminal, vCreated, vTransition, vRank, status, currency,
            monthlyCurrency, monthlyNumerator, monthlyDenominator, trialStart, trialEnd, price, lookupKey, product
        FROM stripeSubscriptionFact WHERE account = ? AND livemode = ?
        ORDER BY subscription, vCreated, vEventID
        """

    /// A scope's paid invoices of subscriptions that took money (not the $0 invoice that opens a
    /// trial, which would stand for the first payment and is never refunded), and whether a
    /// refund that succeeded was made of what paid them (the invoice's charge or payment intent,
    /// or one of its payments'). `?` for the `succeeded` status, the `paid` status, account and
    /// livemode.
    ///
    /// The refunded charges and payment intents are each read once (uncorrelated `IN` lists, which
    /// SQLite materializes and PostgreSQL hashes): a refund matched per invoice made the read
    /// invoices × refunds (10,000 subscriptions: 92 s).
    static let paidInvoicesSQL = """
        SELECT i.subscription, i.paidAt, COALESCE((
            i.charge IN (\(refundedSQL("charge")))
            OR i.paymentIntent IN (\(refundedSQL("paymentIntent")))
            OR EXISTS (
                SELECT 1 FROM invoicePayment p
                WHERE p.account = i.account AND p.livemode = i.livemode AND p.invoice = i.id
                    AND (p.charge IN (\(refundedSQL("charge"))) OR p.paymentIntent IN (\(refundedSQL("paymentIntent")))))
        ), FALSE) AS refunded
        FROM invoice i
        WHERE i.account = ?3 AND i.livemode = ?4 AND i.status = ?2 AND i.subscription IS NOT NULL AND i.paidAt IS NOT NULL
            AND i.amountPaid > 0
        ORDER BY i.subscription, i.paidAt
        """

    /// The scope's succeeded refunds' `column` (charge or payment intent), where they name one.
    private static func refundedSQL(_ column: String) -> String {
        "SELECT r.\(column) FROM stripeRefund r WHERE r.account = ?3 AND r.livemode = ?4 AND r.status = ?1 AND r.\(column) IS NOT NULL"
    }

    static func paidInvoicesArguments(scope: ServiceScope) -> [LedgerValue] {
        [.text(Refund.succeeded), .text(InvoiceStatus.paid.rawValue), .text(scope.account), .boolean(scope.livemode)]
    }

    /// One Stripe subscription fact's row (the columns of ``subscriptionFactsSQL``).
    struct SubscriptionFactRow {
        var subscription: String
        var snapshot: StripeSubscriptionSnapshot
        var price: String?
        var lookupKey: String?
        var product: String?

        init(_ row: [LedgerValue]) {
            subscription = row[0].text ?? ""
            let version = SnapshotVersion(
                deleted: row[2].flag, terminal: row[3].flag, eventCreated: row[4].integer ?? 0, transitionAt: row[5].integer ?? 0,
                statusRank: Int(row[6].integer ?? 0), eventID: row[1].text ?? "")
            var monthly: (currency: String, amount: ExactAmount)?
            if let currency = row[9].text, let numerator = row[10].integer, let denominator = row[11].integer, denominator > 0 {
                monthly = (currency, ExactAmount(Int128(numerator), over: Int128(denominator)))
            }
            snapshot = StripeSubscriptionSnapshot(
                version: version, status: SubscriptionStatus(rawValue: row[7].text ?? ""), monthly: monthly, currency: row[8].text,
                trialStart: row[12].integer, trialEnd: row[13].integer)
            price = row[14].text
            lookupKey = row[15].text
            product = row[16].text
        }
    }

    /// The facts of every subscription, from the rows of ``subscriptionFactsSQL`` and
    /// ``paidInvoicesSQL`` (subscription, paid at, refunded), in subscription id order.
    static func stripeSubscriptions(facts: [SubscriptionFactRow], paidInvoices: [(subscription: String, paidAt: Int64, refunded: Bool)]) -> [StripeSubscriptionFacts] {
        var invoices: [String: [StripeSubscriptionFacts.PaidInvoice]] = [:]
        for invoice in paidInvoices {
            invoices[invoice.subscription, default: []].append(.init(paidAt: invoice.paidAt, refunded: invoice.refunded))
        }
        var result: [StripeSubscriptionFacts] = []
        var newest: FactOrder?
        for row in facts {
            if result.last?.id != row.subscription {
                result.append(StripeSubscriptionFacts(id: row.subscription, price: nil, snapshots: [], paidInvoices: invoices[row.subscription] ?? []))
                newest = nil
            }
            result[result.count - 1].snapshots.append(row.snapshot)
            let order = FactOrder(row.snapshot.version)
            if row.price != nil, newest.map({ $0 < order }) ?? true {
                newest = order
                result[result.count - 1].price = row.price
                result[result.count - 1].lookupKey = row.lookupKey
                result[result.count - 1].product = row.product
            }
        }
        return result
    }

    /// The order of a subscription's snapshots (as ``SubscriptionHistory`` orders them), to find
    /// the price (lookup key, product) of the newest.
    struct FactOrder: Comparable {
        let key: (Int64, Int, Int64, Int, String)

        init(_ version: SnapshotVersion) {
            key = (version.eventCreated, version.terminal ? 1 : 0, version.transitionAt, version.statusRank, version.eventID)
        }

        static func < (lhs: Self, rhs: Self) -> Bool { lhs.key < rhs.key }
        static func == (lhs: Self, rhs: Self) -> Bool { lhs.key == rhs.key }
    }

    /// A scope's payments in `[from, to)`: invoices paid, with `?` for the `paid` status, account,
    /// livemode, from and to. Rows: paid at, currency, amount paid.
    static let stripePaymentsSQL = """
        SELECT paidAt, currency, amountPaid FROM invoice
        WHERE status = ? AND account = ? AND livemode = ? AND paidAt >= ? AND paidAt < ? AND amountPaid > 0
        """

    /// A scope's refunds that succeeded, created in `[from, to)`, with `?` for the `succeeded`
    /// status, account, livemode, from and to. Rows: created, currency, amount. A pending refund
    /// counts once a later snapshot says it succeeded, at its own `created`; a failed or canceled
    /// one never.
    static let stripeRefundsSQL = """
        SELECT created, currency, amount FROM stripeRefund
        WHERE status = ? AND account = ? AND livemode = ? AND created >= ? AND created < ? AND amount > 0
        """

    static func stripeRevenueArguments(status: String, scope: ServiceScope, from: Int64, to: Int64) -> [LedgerValue] {
        [.text(status), .text(scope.account), .boolean(scope.livemode), .integer(from), .integer(to)]
    }

    /// A Stripe revenue row (at, currency, amount) as an entry.
    static func stripeEntry(_ row: [LedgerValue], kind: RevenueEntry.Kind) -> RevenueEntry? {
        guard let at = row[0].integer, let currency = row[1].text, let amount = row[2].integer else { return nil }
        return RevenueEntry(store: .stripe, kind: kind, at: at, currency: currency, amount: amount)
    }

    // MARK: App Store

    /// `?` placeholders for a list of environments.
    static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: max(count, 1)).joined(separator: ", ") }

    /// The auto-renewable transactions of the environments: `?` for the type, then each environment.
    static func appStoreTransactionsSQL(environments: Int) -> String {
        """
        SELECT environment, originalTransactionID, transactionID, productID, purchaseDate, expiresDate, price, currency,
            offerType, inAppOwnershipType, revoked, revocationDate, revocationReason
        FROM appStoreTransaction WHERE type = ? AND environment IN (\(placeholders(environments)))
        ORDER BY environment, originalTransactionID, purchaseDate, transactionID
        """
    }

    static func appStoreTransactionsArguments(environments: [String]) -> [LedgerValue] {
        [.text(AppStoreTransaction.autoRenewable)] + environmentValues(environments)
    }

    static func environmentValues(_ environments: [String]) -> [LedgerValue] {
        environments.isEmpty ? [.null] : environments.map { .text($0) }
    }

    /// The end of each subscription's billing grace period, where Apple announced one.
    static func gracePeriodsSQL(environments: Int) -> String {
        """
        SELECT environment, originalTransactionID, gracePeriodExpiresDate FROM appStoreSubscription
        WHERE gracePeriodExpiresDate IS NOT NULL AND environment IN (\(placeholders(environments)))
        """
    }

    /// An App Store transaction's row (the columns of ``appStoreTransactionsSQL``) as the metrics
    /// read it, times in Unix seconds; nil without a purchase or expiry date.
    static func appStoreTransaction(_ row: [LedgerValue]) -> (environment: String, original: String, transaction: AppStoreSubscriptionFacts.Transaction)? {
        guard let environment = row[0].text, let original = row[1].text, let transactionID = row[2].text,
            let purchase = row[4].integer, let expires = row[5].integer
        else { return nil }
        let price = row[6].integer ?? 0
        let revoked = row[10].flag
        let fact = AppStoreTransactionFact(
            transactionID: transactionID, purchase: purchase / 1000, expires: expires / 1000, priceMilliunits: price,
            currency: row[7].text, period: nil, isFreeTrial: row[8].integer == introductoryOffer && price == 0,
            isFamilyShared: row[9].text == familyShared, revokedAt: revoked ? row[11].integer.map { $0 / 1000 } : nil,
            refunded: revoked && row[12].integer != nil)
        return (environment, original, .init(productID: row[3].text ?? "", fact: fact))
    }

    /// Apple's `offerType` of an introductory offer (a free trial at price 0).
    static let introductoryOffer: Int64 = 1
    /// Apple's `inAppOwnershipType` of a family member's copy.
    static let familyShared = "FAMILY_SHARED"

    /// The facts of every App Store subscription from the rows of ``appStoreTransactionsSQL`` and
    /// ``gracePeriodsSQL`` (environment, original transaction id, grace end in Unix ms).
    static func appStoreSubscriptions(transactions: [[LedgerValue]], gracePeriods: [[LedgerValue]]) -> [AppStoreSubscriptionFacts] {
        var grace: [String: Int64] = [:]
        for row in gracePeriods {
            if let environment = row[0].text, let original = row[1].text, let end = row[2].integer { grace[environment + "/" + original] = end / 1000 }
        }
        var result: [AppStoreSubscriptionFacts] = []
        for row in transactions {
            guard let (environment, original, transaction) = appStoreTransaction(row) else { continue }
            if result.last?.environment != environment || result.last?.originalTransactionID != original {
                result.append(AppStoreSubscriptionFacts(
                    environment: environment, originalTransactionID: original, transactions: [], gracePeriodEnd: grace[environment + "/" + original]))
            }
            result[result.count - 1].transactions.append(transaction)
        }
        return result
    }

    /// App Store payments and refunds touching `[from, to)` (Unix ms): `?` for from, to, from, to,
    /// then each environment. Rows as ``appStoreTransactionsSQL``'s.
    static func appStoreRevenueSQL(environments: Int) -> String {
        """
        SELECT environment, originalTransactionID, transactionID, productID, purchaseDate, expiresDate, price, currency,
            offerType, inAppOwnershipType, revoked, revocationDate, revocationReason
        FROM appStoreTransaction
        WHERE price > 0 AND ((purchaseDate >= ? AND purchaseDate < ?) OR (revoked AND revocationDate >= ? AND revocationDate < ?))
            AND environment IN (\(placeholders(environments)))
        """
    }

    static func appStoreRevenueArguments(environments: [String], from: Int64, to: Int64) -> [LedgerValue] {
        let range: [LedgerValue] = [.integer(from * 1000), .integer(to * 1000)]
        return range + range + environmentValues(environments)
    }

    /// The App Store entries of a row of ``appStoreRevenueSQL``: its payment when purchased in the
    /// range (a family member's copy and a free trial are none), its refund when revoked for one
    /// (Apple gave a reason) in the range. Amounts are the price in minor units, rounded half-even.
    static func appStoreEntries(_ row: [LedgerValue], from: Int64, to: Int64) -> [RevenueEntry] {
        guard let (_, _, transaction) = appStoreTransaction(row), let currency = transaction.fact.currency, transaction.fact.isPaid
        else { return [] }
        let fact = transaction.fact
        let amount = fact.price.roundedHalfEven
        var entries: [RevenueEntry] = []
        if let purchase = row[4].integer, purchase >= from * 1000, purchase < to * 1000 {
            entries.append(RevenueEntry(store: .appStore, kind: .payment, at: fact.purchase, currency: currency, amount: amount))
        }
        if fact.refunded, let revokedAt = fact.revokedAt, let revocation = row[11].integer, revocation >= from * 1000, revocation < to * 1000 {
            entries.append(RevenueEntry(store: .appStore, kind: .refund, at: revokedAt, currency: currency, amount: amount))
        }
        return entries
    }
}

extension LedgerValue {
    var text: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    var integer: Int64? {
        switch self {
        case .integer(let number): number
        case .boolean(let flag): flag ? 1 : 0
        default: nil
        }
    }

    /// A boolean column, as PostgreSQL (a boolean) or SQLite (0 or 1) gives it.
    var flag: Bool {
        switch self {
        case .boolean(let flag): flag
        case .integer(let number): number != 0
        default: false
        }
    }
}
