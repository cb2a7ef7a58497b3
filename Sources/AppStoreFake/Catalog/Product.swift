import BillingCore

extension AppStoreFake {
    /// How often an auto-renewable subscription renews.
    public enum SubscriptionPeriod: String, Sendable, Hashable, CaseIterable {
        case week, month, twoMonths, threeMonths, sixMonths, year

        /// The period's length in milliseconds: Apple's Sandbox compresses time (a month renews
        /// every 5 minutes, a year every hour); Production counts a month as 30 days.
        public func milliseconds(in environment: AppStoreEnvironment) -> Int64 {
            let minute: Int64 = 60_000
            let day: Int64 = 86_400_000
            if environment == .production {
                switch self {
                case .week: return 7 * day
                case .month: return 30 * day
                case .twoMonths: return 60 * day
                case .threeMonths: return 91 * day
                case .sixMonths: return 182 * day
                case .year: return 365 * day
                }
            }
            switch self {
            case .week: return 3 * minute
            case .month: return 5 * minute
            case .twoMonths: return 10 * minute
            case .threeMonths: return 15 * minute
            case .sixMonths: return 30 * minute
            case .year: return 60 * minute
            }
        }
    }

    /// An in-app product as configured in App Store Connect: what `productId` transactions name,
    /// what they cost, and for subscriptions their group and period.
    public struct Product: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            case autoRenewable(period: SubscriptionPeriod, groupID: String)
            case nonConsumable
            case consumable
            case nonRenewing

            /// The transaction's `type`, in Apple's words.
            var transactionType: String {
                switch self {
                case .autoRenewable: "Auto-Renewable Subscription"
                case .nonConsumable: "Non-Consumable"
                case .consumable: "Consumable"
                case .nonRenewing: "Non-Renewing Subscription"
                }
            }
        }

        public var id: String
        public var kind: Kind
        /// Price in milliunits of `currency` (9990 is 9.99), as transactions carry it.
        public var price: Int64
        public var currency: String

        public init(id: String, kind: Kind, price: Int64 = 9990, currency: String = "USD") {
            self.id = id
            self.kind = kind
            self.price = price
            self.currency = currency
        }

        /// A monthly subscription in group `21000000`, 9.99 USD: what an unknown product id is taken as.
        public static func monthly(_ id: String, groupID: String = "21000000", price: Int64 = 9990) -> Product {
            Product(id: id, kind: .autoRenewable(period: .month, groupID: groupID), price: price)
        }

        public static func yearly(_ id: String, groupID: String = "21000000", price: Int64 = 99990) -> Product {
            Product(id: id, kind: .autoRenewable(period: .year, groupID: groupID), price: price)
        }

        /// A non-consumable (lifetime) purchase.
        public static func lifetime(_ id: String, price: Int64 = 199_990) -> Product {
            Product(id: id, kind: .nonConsumable, price: price)
        }

        var period: SubscriptionPeriod? {
            if case .autoRenewable(let period, _) = kind { period } else { nil }
        }

        var groupID: String? {
            if case .autoRenewable(_, let groupID) = kind { groupID } else { nil }
        }
    }

    /// How long the states after a failed renewal last, in milliseconds.
    public struct RetryTiming: Sendable, Hashable {
        /// The billing grace period (access continues, status 4); Apple offers 3, 16 or 28 days.
        public var gracePeriod: Int64
        /// The whole billing retry period from the failed renewal (status 3); Apple's is 60 days.
        public var billingRetryPeriod: Int64

        public init(gracePeriod: Int64, billingRetryPeriod: Int64) {
            self.gracePeriod = gracePeriod
            self.billingRetryPeriod = billingRetryPeriod
        }

        /// 16 days of grace and 60 of retry in Production; 3 and 15 minutes in Sandbox, in step
        /// with its 5-minute months.
        public static func `default`(for environment: AppStoreEnvironment) -> RetryTiming {
            environment == .production
                ? RetryTiming(gracePeriod: 16 * 86_400_000, billingRetryPeriod: 60 * 86_400_000)
                : RetryTiming(gracePeriod: 3 * 60_000, billingRetryPeriod: 15 * 60_000)
        }
    }
}
