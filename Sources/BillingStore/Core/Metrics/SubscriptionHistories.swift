import BillingCore

extension SubscriptionHistory {
    /// Every subscription's history from the ledger's facts, with the plan catalog's names: a
    /// Stripe subscription's plan by its price, the price's lookup key or its product (as the
    /// service API resolves them), an App Store subscription's by the product of its
    /// latest transaction; an App Store product's period from the catalog when it gives one (else
    /// the transaction's length decides, Sandbox durations mapped back).
    public static func histories(
        stripe: [StripeSubscriptionFacts], appStore: [AppStoreSubscriptionFacts], catalog: PlanCatalog
    ) -> [SubscriptionHistory] {
        var histories: [SubscriptionHistory] = []
        histories.reserveCapacity(stripe.count + appStore.count)
        for facts in stripe {
            let plan = catalog.tier(price: facts.price, lookupKey: facts.lookupKey, product: facts.product)?.id
            histories.append(.stripe(
                id: facts.id, plan: plan, snapshots: facts.snapshots,
                paidInvoices: facts.paidInvoices.map { (paidAt: $0.paidAt, refunded: $0.refunded) }))
        }
        for facts in appStore {
            let transactions = facts.transactions.map { transaction in
                var fact = transaction.fact
                fact.period = fact.period ?? catalog.period(appStoreProduct: transaction.productID)
                return fact
            }
            let latest = facts.transactions.max { ($0.fact.purchase, $0.fact.transactionID) < ($1.fact.purchase, $1.fact.transactionID) }
            let plan = latest.flatMap { catalog.tier(appStoreProduct: $0.productID)?.id }
            histories.append(.appStore(
                id: facts.originalTransactionID, plan: plan, transactions: transactions, gracePeriodEnd: facts.gracePeriodEnd))
        }
        return histories
    }
}
