import Foundation

/// The discounts of a Stripe subscription that bear on its MRR: those whose coupon lasts
/// `forever`. A `once` or `repeating` coupon ends, so MRR (what the subscription brings every
/// month for good) does not count it. Read from the subscription's JSON: `discount` (API versions
/// before 2024-06-20) and `discounts` when expanded (later versions list ids only, which carry
/// no terms and are skipped).
public struct SubscriptionDiscounts: Decodable, Sendable, Equatable {
    /// A coupon's terms.
    public struct Coupon: Decodable, Sendable, Equatable {
        /// Percent off, up to two decimals (12.5), decoded as the exact decimal Stripe wrote.
        public var percentOff: Decimal?
        /// Minor units off each invoice, in `currency`.
        public var amountOff: Int64?
        public var currency: String?
        /// `forever`, `once` or `repeating`.
        public var duration: String?

        public init(percentOff: Decimal? = nil, amountOff: Int64? = nil, currency: String? = nil, duration: String?) {
            self.percentOff = percentOff
            self.amountOff = amountOff
            self.currency = currency
            self.duration = duration
        }

        private enum CodingKeys: String, CodingKey {
            case percentOff = "percent_off", amountOff = "amount_off", currency, duration
        }
    }

    /// The coupons that last forever.
    public var forever: [Coupon]

    public init(forever: [Coupon]) { self.forever = forever }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var coupons: [Coupon] = []
        if let discount = try? container.decodeIfPresent(Discount.self, forKey: .discount), let coupon = discount.coupon {
            coupons.append(coupon)
        }
        if let listed = try? container.decodeIfPresent([ExpandedDiscount].self, forKey: .discounts) {
            for case .object(let discount) in listed {
                if let coupon = discount.coupon, !coupons.contains(coupon) { coupons.append(coupon) }
            }
        }
        forever = coupons.filter { $0.duration == "forever" }
    }

    private enum CodingKeys: String, CodingKey { case discount, discounts }

    private struct Discount: Decodable {
        var coupon: Coupon?
    }

    /// An element of `discounts`: an id, or the discount when expanded.
    private enum ExpandedDiscount: Decodable {
        case id
        case object(Discount)

        init(from decoder: any Decoder) throws {
            if (try? decoder.singleValueContainer().decode(String.self)) != nil {
                self = .id
            } else {
                self = .object(try Discount(from: decoder))
            }
        }
    }
}

extension Subscription {
    /// What the subscription brings a month in minor units of its currency, exactly (before the
    /// per-subscription rounding): Σ over its licensed recurring items of unit amount × quantity
    /// × the factor of the price's interval, less the coupons that last forever. Metered prices,
    /// one-off prices and prices without a unit amount (tiered) count nothing. Nil when no item
    /// counts (a subscription of metered prices only has no MRR, and no currency to put it in).
    public func monthlyAmount(discounts: SubscriptionDiscounts) -> (currency: String, amount: ExactAmount)? {
        var total = ExactAmount.zero
        var currency: String?
        var factor: MonthlyFactor?
        for item in items {
            guard let price = item.price, let recurring = price.recurring, recurring.usageType != "metered",
                let unitAmount = price.unitAmount, let itemFactor = MonthlyFactor(interval: recurring.interval, count: recurring.intervalCount)
            else { continue }
            currency = currency ?? price.currency ?? self.currency
            factor = factor ?? itemFactor
            total = total + ExactAmount(minorUnits: unitAmount).scaled(Int128(item.quantity ?? 1), over: 1).scaled(by: itemFactor)
        }
        guard let currency, let factor else { return nil }
        for coupon in discounts.forever {
            if let percent = coupon.percentOff {
                // Stripe allows two decimals: hundredths of a percent are exact.
                var scaled = percent * 100
                var whole = Decimal()
                NSDecimalRound(&whole, &scaled, 0, .plain)
                let hundredths = Int128(NSDecimalNumber(decimal: whole).int64Value)
                total = total.scaled(10_000 - min(max(hundredths, 0), 10_000), over: 10_000)
            } else if let amountOff = coupon.amountOff, coupon.currency?.lowercased() ?? currency == currency {
                // An amount off is per invoice, that is per billing period of the subscription.
                total = total - ExactAmount(minorUnits: amountOff).scaled(by: factor)
            }
        }
        if total.numerator < 0 { total = .zero }
        return (currency.lowercased(), total)
    }
}
