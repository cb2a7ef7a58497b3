/// What ``StripeFake/seed(customers:subscriptions:invoices:prices:products:seed:emitEvents:account:)`` made.
public struct SeedSummary: Sendable, Equatable {
    public var products = 0
    public var prices = 0
    public var customers = 0
    public var subscriptions = 0
    public var invoices = 0
    /// Events emitted (only with `emitEvents`).
    public var events = 0
}

/// Builds a large, consistent data set quickly and deterministically for a seed: products and
/// prices, customers created over the last year, subscriptions in a realistic mix of statuses
/// with their current period around now, and the invoices of their billing periods so far.
///
/// Planning (ids, relations, times, statuses) is sequential so that a seed always gives the same
/// data; writing the JSON runs in parallel (see `Seeder+Objects.swift`).
struct Seeder: Sendable {
    let products: Int
    let prices: Int
    let customers: Int
    let subscriptions: Int
    let invoices: Int
    let seed: UInt64
    let now: Int64
    let ids: IDGenerator

    static let day: Int64 = 86_400
    private static let tiers = [
        "Pro", "Team", "Enterprise", "Starter", "Business", "Plus", "Premium", "Scale", "Growth", "Basic",
    ]
    private static let givenNames = [
        "Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Margaret", "Dennis", "Frances", "Ken", "Radia", "Linus",
    ]
    private static let familyNames = [
        "Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Ritchie", "Allen", "Thompson",
        "Perlman", "Torvalds",
    ]

    /// The objects to load, by kind.
    struct Output: Sendable {
        var objects: [ObjectKind: [StoredObject]] = [:]
    }

    // MARK: Plans

    /// A planned object: what its builder and its template fills need.
    protocol Plan: Sendable {
        var id: String { get }
        var created: Int64 { get }
    }

    struct CustomerPlan: Plan {
        let id: String
        let created: Int64
        let email: String
        let name: String
        let appUserID: String
        let invoicePrefix: String
    }

    struct SubscriptionPlan: Plan {
        let id: String
        let itemID: String
        let customer: Int
        let price: Int
        let created: Int64
        let status: String
        /// The current period (the one canceled in, for a canceled subscription).
        let periodStart: Int64
        let periodEnd: Int64
        /// Billing periods started so far, the first included: the invoices it can have.
        let periodCount: Int
        let trial: ClosedRange<Int64>?
        let canceledAt: Int64?
        let cancelAtPeriodEnd: Bool
        var latestInvoice: String?
    }

    struct InvoicePlan: Plan {
        let id: String
        let lineID: String
        let customer: Int
        let subscription: Int?
        let price: Int
        let created: Int64
        /// The billed period, on the line.
        let periodStart: Int64
        let periodEnd: Int64
        let amount: Int64
        let status: String
        let billingReason: String
        /// The customer's invoice sequence, in the invoice number.
        let sequence: Int
    }

    // MARK: Planning

    func run() async -> Output {
        var random = SeededGenerator(seed: seed)
        let productValues = planProducts(&random)
        let priceValues = planPrices(productValues, &random)
        let customerPlans = planCustomers(&random)
        var subscriptionPlans: [SubscriptionPlan] = []
        subscriptionPlans.reserveCapacity(subscriptions)
        for _ in 0..<subscriptions {
            let customer = Int(random.next() % UInt64(customerPlans.count))
            let price = Int(random.next() % UInt64(priceValues.count))
            subscriptionPlans.append(
                planSubscription(
                    customer: customerPlans[customer], customerIndex: customer, price: price,
                    priceValue: priceValues[price], random: &random))
        }
        let invoicePlans = planInvoices(
            subscriptions: &subscriptionPlans, customers: customerPlans, prices: priceValues, random: &random)
        let world = World(
            customers: customerPlans, subscriptions: subscriptionPlans, prices: priceValues, products: productValues)
        return await world.objects(invoices: invoicePlans)
    }

    private func planProducts(_ random: inout SeededGenerator) -> [JSONValue] {
        let count = max(products, prices > 0 || subscriptions > 0 || invoices > 0 ? 1 : 0)
        return (0..<count).map { index in
            let name =
                Self.tiers[index % Self.tiers.count]
                + (index >= Self.tiers.count ? " \(index / Self.tiers.count + 1)" : "")
            return CatalogObjects.product(
                id: ids.make(.product, using: &random), name: name, description: "The \(name) plan.",
                metadata: ["tier": String(name.lowercased().map { $0 == " " ? "_" : $0 })], active: true,
                created: now - 400 * Self.day + Int64(index) * 60)
        }
    }

    /// Monthly then yearly prices for each product in turn; lookup keys `pro_monthly`, `pro_yearly`, `pro_monthly_v2`, …
    private func planPrices(_ products: [JSONValue], _ random: inout SeededGenerator) -> [JSONValue] {
        let count = max(prices, subscriptions > 0 || invoices > 0 ? 1 : 0)
        return (0..<count).map { index in
            let product = products[index % products.count]
            let tier = product["metadata"]?["tier"]?.stringValue ?? "plan"
            let yearly = (index / products.count) % 2 == 1
            let monthlyAmount = Int64(500 * (1 + index % products.count))
            let generation = index / (2 * products.count)
            return CatalogObjects.price(
                id: ids.make(.price, using: &random), product: product["id"]?.stringValue ?? "",
                unitAmount: yearly ? monthlyAmount * 10 : monthlyAmount, currency: "usd",
                interval: yearly ? "year" : "month", intervalCount: 1,
                lookupKey: "\(tier)_\(yearly ? "yearly" : "monthly")\(generation > 0 ? "_v\(generation + 1)" : "")",
                nickname: "\(product["name"]?.stringValue ?? "Plan") \(yearly ? "yearly" : "monthly")",
                metadata: ["tier": tier], active: true,
                created: now - 399 * Self.day + Int64(index) * 60)
        }
    }

    private func planCustomers(_ random: inout SeededGenerator) -> [CustomerPlan] {
        let count = max(customers, subscriptions > 0 || invoices > 0 ? 1 : 0)
        var plans: [CustomerPlan] = []
        plans.reserveCapacity(count)
        for index in 0..<count {
            let id = ids.make(.customer, using: &random)
            let given = Self.givenNames[index % Self.givenNames.count]
            let family = Self.familyNames[(index / Self.givenNames.count) % Self.familyNames.count]
            plans.append(
                CustomerPlan(
                    id: id, created: now - Int64(random.next() % UInt64(365 * Self.day)),
                    email: "customer\(index)@example.com", name: "\(given) \(family)", appUserID: "user_\(index)",
                    invoicePrefix: CustomerObjects.invoicePrefix(forCustomer: id)))
        }
        return plans
    }

    /// 70% active (5% of them set to cancel at period end), 8% trialing, 14% canceled, 5% past
    /// due, 2% unpaid, 1% paused.
    private func planSubscription(
        customer: CustomerPlan, customerIndex: Int, price: Int, priceValue: JSONValue, random: inout SeededGenerator
    ) -> SubscriptionPlan {
        let (interval, count) = BillingPeriod.recurrence(of: priceValue)
        let status: String =
            switch random.next() % 100 {
            case 0..<70: "active"
            case 70..<78: "trialing"
            case 78..<92: "canceled"
            case 92..<97: "past_due"
            case 97..<99: "unpaid"
            default: "paused"
            }
        let id = ids.make(.subscription, using: &random)
        let itemID = ids.make("si_", length: 14, using: &random)
        if status == "trialing" {
            let created = max(customer.created, now - Int64(random.next() % UInt64(13 * Self.day)))
            let trial = created...(created + 14 * Self.day)
            return SubscriptionPlan(
                id: id, itemID: itemID, customer: customerIndex, price: price, created: created, status: status,
                periodStart: created, periodEnd: trial.upperBound, periodCount: 1, trial: trial, canceledAt: nil,
                cancelAtPeriodEnd: false)
        }
        let created = customer.created + Int64(random.next() % UInt64(max(1, now - customer.created)))
        let canceledAt =
            status == "canceled" ? created + Int64(random.next() % UInt64(max(1, now - created))) : nil
        let period = Self.period(containing: canceledAt ?? now, from: created, interval: interval, count: count)
        return SubscriptionPlan(
            id: id, itemID: itemID, customer: customerIndex, price: price, created: created, status: status,
            periodStart: period.start, periodEnd: period.end, periodCount: period.index + 1, trial: nil,
            canceledAt: canceledAt, cancelAtPeriodEnd: status == "active" && random.next() % 20 == 0)
    }

    /// The billing period that contains `time`, counting periods of `interval` from `anchor`.
    static func period(
        containing time: Int64, from anchor: Int64, interval: String, count: Int64
    )
        -> (index: Int, start: Int64, end: Int64)
    {
        let average: Int64 =
            switch interval {
            case "day": day * count
            case "week": 7 * day * count
            case "year": 365 * day * count
            default: 30 * day * count
            }
        var index = max(0, (time - anchor) / average)
        var start = BillingPeriod.advance(anchor, interval: interval, count: index * count)
        while start > time, index > 0 {
            index -= 1
            start = BillingPeriod.advance(anchor, interval: interval, count: index * count)
        }
        var end = BillingPeriod.advance(anchor, interval: interval, count: (index + 1) * count)
        while end <= time {
            index += 1
            start = end
            end = BillingPeriod.advance(anchor, interval: interval, count: (index + 1) * count)
        }
        return (Int(index), start, end)
    }

    /// One invoice per billing period so far, subscription by subscription in rounds (every
    /// subscription's first period, then every second one, …) until `invoices` are planned. Any
    /// beyond the periods there are bill mid-period changes (`subscription_update`) of the
    /// subscriptions in turn, or, without subscriptions, are one-off invoices of random customers.
    private func planInvoices(
        subscriptions: inout [SubscriptionPlan], customers: [CustomerPlan], prices: [JSONValue],
        random: inout SeededGenerator
    ) -> [InvoicePlan] {
        var plans: [InvoicePlan] = []
        plans.reserveCapacity(invoices)
        var sequences = [Int](repeating: 0, count: customers.count)
        var billable = Array(subscriptions.indices)
        var period = 0
        while plans.count < invoices, !billable.isEmpty {
            var next: [Int] = []
            for index in billable where plans.count < invoices {
                let plan = planInvoice(
                    for: subscriptions[index], at: index, period: period, prices: prices, sequences: &sequences,
                    random: &random)
                subscriptions[index].latestInvoice = plan.id
                plans.append(plan)
                if subscriptions[index].periodCount > period + 1 { next.append(index) }
            }
            billable = next
            period += 1
        }
        var index = 0
        while plans.count < invoices, !subscriptions.isEmpty {
            let plan = planUpdateInvoice(
                for: subscriptions[index], at: index, prices: prices, sequences: &sequences, random: &random)
            subscriptions[index].latestInvoice = plan.id
            plans.append(plan)
            index = (index + 1) % subscriptions.count
        }
        while plans.count < invoices {
            let customer = Int(random.next() % UInt64(customers.count))
            let price = Int(random.next() % UInt64(prices.count))
            let created =
                customers[customer].created + Int64(random.next() % UInt64(max(1, now - customers[customer].created)))
            sequences[customer] += 1
            plans.append(
                InvoicePlan(
                    id: ids.make(.invoice, using: &random), lineID: ids.make("il_1", length: 23, using: &random),
                    customer: customer, subscription: nil, price: price, created: created, periodStart: created,
                    periodEnd: created, amount: prices[price]["unit_amount"]?.intValue ?? 0,
                    status: random.next() % 50 == 0 ? "open" : "paid", billingReason: "manual",
                    sequence: sequences[customer]))
        }
        return plans
    }

    /// An invoice for a change within the current period, paid, billing the rest of that period.
    private func planUpdateInvoice(
        for subscription: SubscriptionPlan, at index: Int, prices: [JSONValue], sequences: inout [Int],
        random: inout SeededGenerator
    ) -> InvoicePlan {
        let last = min(subscription.canceledAt ?? now, subscription.periodEnd, now)
        let created = subscription.periodStart + Int64(random.next() % UInt64(max(1, last - subscription.periodStart)))
        sequences[subscription.customer] += 1
        return InvoicePlan(
            id: ids.make(.invoice, using: &random), lineID: ids.make("il_1", length: 23, using: &random),
            customer: subscription.customer, subscription: index, price: subscription.price, created: created,
            periodStart: created, periodEnd: subscription.periodEnd,
            amount: subscription.trial != nil ? 0 : prices[subscription.price]["unit_amount"]?.intValue ?? 0,
            status: "paid", billingReason: "subscription_update", sequence: sequences[subscription.customer])
    }

    private func planInvoice(
        for subscription: SubscriptionPlan, at index: Int, period: Int, prices: [JSONValue], sequences: inout [Int],
        random: inout SeededGenerator
    ) -> InvoicePlan {
        let price = prices[subscription.price]
        let (interval, count) = BillingPeriod.recurrence(of: price)
        let start: Int64
        let end: Int64
        if let trial = subscription.trial {
            (start, end) = (trial.lowerBound, trial.upperBound)
        } else {
            start = BillingPeriod.advance(subscription.created, interval: interval, count: Int64(period) * count)
            end = BillingPeriod.advance(subscription.created, interval: interval, count: Int64(period + 1) * count)
        }
        let status: String
        if ["past_due", "unpaid"].contains(subscription.status), period == subscription.periodCount - 1 {
            status = "open"
        } else {
            let roll = random.next() % 100
            status = roll < 97 ? "paid" : roll < 99 ? "void" : "uncollectible"
        }
        sequences[subscription.customer] += 1
        return InvoicePlan(
            id: ids.make(.invoice, using: &random), lineID: ids.make("il_1", length: 23, using: &random),
            customer: subscription.customer, subscription: index, price: subscription.price, created: start,
            periodStart: start, periodEnd: end,
            amount: subscription.trial != nil ? 0 : price["unit_amount"]?.intValue ?? 0, status: status,
            billingReason: period == 0 ? "subscription_create" : "subscription_cycle",
            sequence: sequences[subscription.customer])
    }
}
