extension FakeStore {
    /// Loads seeded objects in bulk; emits `*.created` events for them only when asked.
    func load(_ output: Seeder.Output, account: String?, emitEvents: Bool) -> Int {
        let state = self.account(account)
        var events = 0
        for kind in [ObjectKind.product, .price, .customer, .subscription, .invoice] {
            guard let objects = output.objects[kind] else { continue }
            state[kind].putMany(objects)
            guard emitEvents else { continue }
            let type =
                switch kind {
                case .subscription: "customer.subscription.created"
                case .invoice: "invoice.paid"
                default: "\(kind.rawValue).created"
                }
            for object in objects.sorted(by: { $0.created < $1.created }) {
                emit(type, object: object.json, in: state, origin: .automatic, created: object.created)
                events += 1
            }
        }
        return events
    }
}

extension StripeFake {
    /// Creates a large consistent data set fast (100,000 subscriptions and 300,000 invoices in
    /// seconds), the same for the same `seed`, without events unless `emitEvents`.
    ///
    /// Customers were created over the last year; subscriptions belong to random customers, in a
    /// mix of statuses (70% active, 8% trialing, 14% canceled, 5% past due, 2% unpaid, 1% paused);
    /// invoices bill their billing periods so far, every subscription's first period, then every
    /// second one, and so on. `prices` alternate monthly and yearly over the `products`.
    @discardableResult
    public func seed(
        customers: Int = 0, subscriptions: Int = 0, invoices: Int = 0, prices: Int = 0, products: Int = 0,
        seed: UInt64 = 42, emitEvents: Bool = false, account: String? = nil
    ) async -> SeedSummary {
        let seeder = Seeder(
            products: products, prices: prices, customers: customers, subscriptions: subscriptions, invoices: invoices,
            seed: seed, now: now, ids: store.ids)
        let output = await seeder.run()
        let events = await store.load(output, account: account, emitEvents: emitEvents)
        return SeedSummary(
            products: output.objects[.product]?.count ?? 0, prices: output.objects[.price]?.count ?? 0,
            customers: output.objects[.customer]?.count ?? 0, subscriptions: output.objects[.subscription]?.count ?? 0,
            invoices: output.objects[.invoice]?.count ?? 0, events: events)
    }
}
