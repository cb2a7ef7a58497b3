import BillingCore
import Foundation
import Testing

@Suite("Monthly amounts: interval factors, interval counts, discounts, metered items, Apple's milliunits, half-even rounding")
struct MonthlyAmountTests {
    @Test("Rounding is half to even, once per subscription")
    func halfEven() {
        #expect(ExactAmount(8_335, over: 10).roundedHalfEven == 834)
        #expect(ExactAmount(8_325, over: 10).roundedHalfEven == 832)
        #expect(ExactAmount(8_326, over: 10).roundedHalfEven == 833)
        #expect(ExactAmount(9_999, over: 12).roundedHalfEven == 833)  // 833.25
        #expect(ExactAmount(1, over: 2).roundedHalfEven == 0)
        #expect(ExactAmount(3, over: 2).roundedHalfEven == 2)
        #expect(ExactAmount(-3, over: 2).roundedHalfEven == -2)
    }

    @Test("Factors: a day × 30, a week × 4, a month × 1, a year × 1/12; an interval count divides")
    func factors() throws {
        let amount = ExactAmount(minorUnits: 1200)
        func monthly(_ interval: RecurringInterval, _ count: Int64?) throws -> Int64 {
            amount.scaled(by: try #require(MonthlyFactor(interval: interval, count: count))).roundedHalfEven
        }
        #expect(try monthly(.day, nil) == 36_000)
        #expect(try monthly(.week, 1) == 4_800)
        #expect(try monthly(.month, 1) == 1_200)
        #expect(try monthly(.month, 3) == 400)
        #expect(try monthly(.year, 1) == 100)
        #expect(try monthly(.week, 2) == 2_400)
        #expect(MonthlyFactor(interval: "fortnight", count: 1) == nil)
    }

    static func item(_ id: String, amount: Int64?, quantity: Int64 = 1, interval: RecurringInterval = .month, count: Int64 = 1, usage: String = "licensed", currency: String = "usd") -> SubscriptionItem {
        SubscriptionItem(
            id: id,
            price: Price(id: "price_\(id)", currency: currency, unitAmount: amount, type: "recurring", recurring: Recurring(interval: interval, intervalCount: count, usageType: usage)),
            quantity: quantity)
    }

    @Test("Stripe: Σ unit amount × quantity of licensed recurring items; metered, one-off and tiered prices count nothing")
    func stripeItems() throws {
        var subscription = Subscription(id: "sub_1", customer: "cus_1", status: .active, currency: "usd", items: [
            Self.item("seats", amount: 1_000, quantity: 3),
            Self.item("api", amount: 5, usage: "metered"),
            Self.item("tiered", amount: nil),
        ])
        subscription.items.append(SubscriptionItem(id: "setup", price: Price(id: "price_setup", currency: "usd", unitAmount: 9_900, type: "one_time"), quantity: 1))
        let monthly = try #require(subscription.monthlyAmount(discounts: SubscriptionDiscounts(forever: [])))
        #expect(monthly.currency == "usd")
        #expect(monthly.amount.roundedHalfEven == 3_000)

        let meteredOnly = Subscription(id: "sub_2", customer: "cus_1", status: .active, currency: "usd", items: [Self.item("api", amount: 5, usage: "metered")])
        #expect(meteredOnly.monthlyAmount(discounts: SubscriptionDiscounts(forever: [])) == nil)
    }

    @Test("Stripe: a yearly price is 1/12 a month, a quarterly one 1/3, rounded once per subscription")
    func stripeIntervals() throws {
        let yearly = Subscription(id: "sub_y", customer: "cus_1", status: .active, currency: "usd", items: [Self.item("pro", amount: 9_999, interval: .year)])
        #expect(try #require(yearly.monthlyAmount(discounts: .init(forever: []))).amount.roundedHalfEven == 833)
        // Two yearly items: 9999/12 + 9999/12 = 1666.5, rounded to even once: 1666 (not 833 + 833 + 0.5).
        let two = Subscription(id: "sub_y2", customer: "cus_1", status: .active, currency: "usd", items: [
            Self.item("a", amount: 9_999, interval: .year), Self.item("b", amount: 9_999, interval: .year),
        ])
        #expect(try #require(two.monthlyAmount(discounts: .init(forever: []))).amount.roundedHalfEven == 1_666)
        let quarterly = Subscription(id: "sub_q", customer: "cus_1", status: .active, currency: "eur", items: [Self.item("q", amount: 3_000, interval: .month, count: 3, currency: "eur")])
        let monthly = try #require(quarterly.monthlyAmount(discounts: .init(forever: [])))
        #expect(monthly.currency == "eur")
        #expect(monthly.amount.roundedHalfEven == 1_000)
    }

    @Test("Stripe: a forever coupon lowers MRR (percent or amount per period); once and repeating do not")
    func stripeDiscounts() throws {
        let json = """
            {"id":"sub_d","customer":"cus_1","status":"active","currency":"usd",
             "discount":{"id":"di_1","coupon":{"id":"c1","percent_off":12.5,"duration":"forever"}},
             "discounts":["di_1",{"id":"di_2","coupon":{"id":"c2","amount_off":1200,"currency":"usd","duration":"forever"}},
                          {"id":"di_3","coupon":{"id":"c3","percent_off":50,"duration":"once"}}],
             "items":{"object":"list","has_more":false,"data":[
               {"id":"si_1","quantity":1,"price":{"id":"price_1","currency":"usd","unit_amount":12000,"type":"recurring",
                "recurring":{"interval":"year","interval_count":1,"usage_type":"licensed"}}}]}}
            """
        let subscription = try JSONDecoder().decode(Subscription.self, from: Data(json.utf8))
        let discounts = try JSONDecoder().decode(SubscriptionDiscounts.self, from: Data(json.utf8))
        #expect(discounts.forever.count == 2)
        // 12000/12 = 1000 a month; 12.5 % off: 875; 1200 off a year: 100 a month less: 775.
        #expect(try #require(subscription.monthlyAmount(discounts: discounts)).amount.roundedHalfEven == 775)
        let onceOnly = SubscriptionDiscounts(forever: [])
        #expect(try #require(subscription.monthlyAmount(discounts: onceOnly)).amount.roundedHalfEven == 1_000)
        // 33.33 % is exactly 3,333 hundredths: 1000 × 0.6667 = 666.7 → 667.
        let third = SubscriptionDiscounts(forever: [.init(percentOff: Decimal(string: "33.33"), duration: "forever")])
        #expect(try #require(subscription.monthlyAmount(discounts: third)).amount.roundedHalfEven == 667)
        // An amount off larger than the price leaves nothing, never a negative MRR.
        let huge = SubscriptionDiscounts(forever: [.init(amountOff: 50_000, currency: "usd", duration: "forever")])
        #expect(try #require(subscription.monthlyAmount(discounts: huge)).amount.roundedHalfEven == 0)
    }

    @Test("App Store: milliunits to minor units by the currency's exponent; the period from the catalog or the length, Sandbox lengths mapped back")
    func appStore() {
        let usd = AppStoreTransactionFact(transactionID: "1", purchase: 0, expires: 2_629_800, priceMilliunits: 9_990, currency: "USD", period: nil, isFreeTrial: false, isFamilyShared: false, revokedAt: nil, refunded: false)
        #expect(usd.price.roundedHalfEven == 999)
        var jpy = usd
        jpy.priceMilliunits = 480_000
        jpy.currency = "JPY"
        #expect(jpy.price.roundedHalfEven == 480)
        var kwd = usd
        kwd.priceMilliunits = 1_250
        kwd.currency = "KWD"
        #expect(kwd.price.roundedHalfEven == 1_250)

        #expect(AppStorePeriod.nearest(toSeconds: 180) == .oneWeek)
        #expect(AppStorePeriod.nearest(toSeconds: 300) == .oneMonth)
        #expect(AppStorePeriod.nearest(toSeconds: 600) == .twoMonths)
        #expect(AppStorePeriod.nearest(toSeconds: 900) == .threeMonths)
        #expect(AppStorePeriod.nearest(toSeconds: 1_800) == .sixMonths)
        #expect(AppStorePeriod.nearest(toSeconds: 3_600) == .oneYear)
        #expect(AppStorePeriod.nearest(toSeconds: 7 * 86_400) == .oneWeek)
        #expect(AppStorePeriod.nearest(toSeconds: 28 * 86_400) == .oneMonth)
        #expect(AppStorePeriod.nearest(toSeconds: 31 * 86_400) == .oneMonth)
        #expect(AppStorePeriod.nearest(toSeconds: 92 * 86_400) == .threeMonths)
        #expect(AppStorePeriod.nearest(toSeconds: 366 * 86_400) == .oneYear)
        #expect(AppStorePeriod.nearest(toSeconds: 0) == nil)

        // A yearly 59.99 USD: 5999/12 = 499.92 → 500 a month; the catalog's period wins over the length.
        var yearly = usd
        yearly.priceMilliunits = 59_990
        yearly.expires = 31_557_600
        let history = SubscriptionHistory.appStore(id: "o1", plan: nil, transactions: [yearly])
        #expect(history.state(at: 10) == .paying(currency: "usd", monthly: 500))
        yearly.period = .sixMonths
        #expect(SubscriptionHistory.appStore(id: "o1", plan: nil, transactions: [yearly]).state(at: 10) == .paying(currency: "usd", monthly: 1_000))
    }
}
