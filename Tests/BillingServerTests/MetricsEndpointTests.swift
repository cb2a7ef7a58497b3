import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// A scenario in test mode over January and February 2026, every figure worked out by hand in
/// the comments. Live-mode Stripe facts and Production App Store facts are in the store too, and
/// must never show.
enum MetricsScenario {
    static let t0: Int64 = 1_767_225_600  // 2026-01-01 00:00 UTC
    static let day: Int64 = 86_400
    static func d(_ days: Int64) -> Int64 { t0 + days * day }

    /// pro: price_pro_monthly, price_pro_yearly, com.example.pro.monthly (no period: its length
    /// decides); team: price_team_monthly and com.example.team.yearly, P1Y by the catalog.
    static let catalogJSON = """
        {"tiers": [
          {"id": "free", "name": "Free", "rank": 0},
          {"id": "pro", "name": "Pro", "rank": 10,
           "stripe": {"prices": [{"id": "price_pro_monthly"}, {"id": "price_pro_yearly"}]},
           "app_store": {"products": ["com.example.pro.monthly"]}},
          {"id": "team", "name": "Team", "rank": 20,
           "stripe": {"prices": [{"id": "price_team_monthly"}]},
           "app_store": {"products": [{"id": "com.example.team.yearly", "period": "P1Y"}]}}
        ]}
        """

    static var catalog: PlanCatalog {
        get throws { try PlanCatalog(document: JSONDecoder().decode(PlanCatalogDocument.self, from: Data(catalogJSON.utf8))) }
    }

    static func item(_ price: String, _ amount: Int64, quantity: Int64 = 1, interval: RecurringInterval = .month, currency: String) -> SubscriptionItem {
        SubscriptionItem(
            id: "si_\(price)",
            price: Price(id: price, currency: currency, unitAmount: amount, type: "recurring", recurring: Recurring(interval: interval, intervalCount: 1, usageType: "licensed")),
            quantity: quantity)
    }

    static func snapshot(
        _ subscription: Subscription, at: Int64, status: SubscriptionStatus, discounts: SubscriptionDiscounts = .init(forever: [])
    ) -> StripeSubscriptionSnapshot {
        var subscription = subscription
        subscription.status = status
        let version = SnapshotVersion(
            deleted: false, terminal: status == .canceled, eventCreated: at, transitionAt: 0, statusRank: 0, eventID: "evt_\(subscription.id)_\(at)")
        return StripeSubscriptionSnapshot(subscription, discounts: discounts, version: version)
    }

    static func transaction(
        _ id: String, _ from: Int64, _ to: Int64, price: Int64, currency: String = "USD", trial: Bool = false, revokedAt: Int64? = nil
    ) -> AppStoreTransactionFact {
        AppStoreTransactionFact(
            transactionID: id, purchase: from, expires: to, priceMilliunits: price, currency: currency, period: nil, isFreeTrial: trial,
            isFamilyShared: false, revokedAt: revokedAt, refunded: revokedAt != nil)
    }

    static var facts: InMemoryMetricsFacts {
        get throws {
            var facts = InMemoryMetricsFacts()
            // S1: a 14-day trial of Pro (29.00 USD a month) from day 0, paying from day 14: converted.
            let s1 = Subscription(
                id: "sub_trial", customer: "cus_1", status: .trialing, currency: "usd", trialStart: d(0), trialEnd: d(14),
                items: [item("price_pro_monthly", 2_900, currency: "usd")])
            facts.stripe.append((false, StripeSubscriptionFacts(
                id: s1.id, price: "price_pro_monthly",
                snapshots: [snapshot(s1, at: d(14), status: .active), snapshot(s1, at: d(0), status: .trialing)],
                paidInvoices: [.init(paidAt: d(14), refunded: false)])))
            // S2: Team, 2 seats × 50.00 EUR, 25 % off forever (a once coupon does not count): 75.00 EUR.
            let discounts = try JSONDecoder().decode(SubscriptionDiscounts.self, from: Data("""
                {"discounts": [{"coupon": {"percent_off": 25, "duration": "forever"}},
                               {"coupon": {"amount_off": 1000, "currency": "eur", "duration": "once"}}]}
                """.utf8))
            let s2 = Subscription(
                id: "sub_coupon", customer: "cus_2", status: .active, currency: "eur", items: [item("price_team_monthly", 5_000, quantity: 2, currency: "eur")])
            facts.stripe.append((false, StripeSubscriptionFacts(
                id: s2.id, price: "price_team_monthly", snapshots: [snapshot(s2, at: d(0), status: .active, discounts: discounts)], paidInvoices: [])))
            // S3: Pro yearly, 99.99 GBP from day 5: 9999 / 12 = 833.25, 833 a month.
            let s3 = Subscription(
                id: "sub_annual", customer: "cus_3", status: .active, currency: "gbp", items: [item("price_pro_yearly", 9_999, interval: .year, currency: "gbp")])
            facts.stripe.append((false, StripeSubscriptionFacts(
                id: s3.id, price: "price_pro_yearly", snapshots: [snapshot(s3, at: d(5), status: .active)], paidInvoices: [])))
            // S4: 10.00 USD, no plan, canceled on day 20: churned.
            let s4 = Subscription(id: "sub_churn", customer: "cus_4", status: .active, currency: "usd", items: [item("price_other", 1_000, currency: "usd")])
            facts.stripe.append((false, StripeSubscriptionFacts(
                id: s4.id, price: "price_other", snapshots: [snapshot(s4, at: d(0), status: .active), snapshot(s4, at: d(20), status: .canceled)],
                paidInvoices: [])))
            // Live mode: never in a test-mode answer.
            let live = Subscription(id: "sub_live", customer: "cus_5", status: .active, currency: "usd", items: [item("price_pro_monthly", 777_700, currency: "usd")])
            facts.stripe.append((true, StripeSubscriptionFacts(
                id: live.id, price: "price_pro_monthly", snapshots: [snapshot(live, at: d(0), status: .active)], paidInvoices: [])))

            // A1: Pro monthly in the Sandbox: 5-minute periods (a month), 9.99 USD: 999 a month.
            facts.appStore.append(AppStoreSubscriptionFacts(
                environment: "Sandbox", originalTransactionID: "2000000001",
                transactions: [
                    .init(productID: "com.example.pro.monthly", fact: transaction("2000000001", d(40) - 300, d(40), price: 9_990)),
                    .init(productID: "com.example.pro.monthly", fact: transaction("2000000002", d(40), d(40) + 300, price: 9_990, revokedAt: d(45))),
                ], gracePeriodEnd: nil))
            // A2: Team yearly, 480 JPY: P1Y by the catalog, 40 yen a month (by its 30-minute length
            // it would be six months, 80 yen).
            facts.appStore.append(AppStoreSubscriptionFacts(
                environment: "Sandbox", originalTransactionID: "2000000003",
                transactions: [.init(productID: "com.example.team.yearly", fact: transaction("2000000003", d(40) - 100, d(40) + 1_700, price: 480_000, currency: "JPY"))],
                gracePeriodEnd: nil))
            // A3: a free trial (3 minutes: a week) running on day 40: pending.
            facts.appStore.append(AppStoreSubscriptionFacts(
                environment: "Sandbox", originalTransactionID: "2000000004",
                transactions: [.init(productID: "com.example.pro.monthly", fact: transaction("2000000004", d(40) - 60, d(40) + 120, price: 0, trial: true))],
                gracePeriodEnd: nil))
            // Production: never in a test-mode answer.
            facts.appStore.append(AppStoreSubscriptionFacts(
                environment: "Production", originalTransactionID: "1000000001",
                transactions: [.init(productID: "com.example.pro.monthly", fact: transaction("1000000001", d(0), d(60), price: 9_990))],
                gracePeriodEnd: nil))

            // Revenue: January and February.
            facts.entries = [
                (false, nil, RevenueEntry(store: .stripe, kind: .payment, at: d(0) + 10, currency: "usd", amount: 1_000)),
                (false, nil, RevenueEntry(store: .stripe, kind: .payment, at: d(0) + 60, currency: "eur", amount: 7_500)),
                (false, nil, RevenueEntry(store: .stripe, kind: .payment, at: d(5), currency: "gbp", amount: 9_999)),
                (false, nil, RevenueEntry(store: .stripe, kind: .payment, at: d(14), currency: "usd", amount: 2_900)),
                (false, nil, RevenueEntry(store: .stripe, kind: .refund, at: d(20), currency: "usd", amount: 1_000)),
                (nil, "Sandbox", RevenueEntry(store: .appStore, kind: .payment, at: d(40) - 300, currency: "usd", amount: 999)),
                (nil, "Sandbox", RevenueEntry(store: .appStore, kind: .payment, at: d(40), currency: "usd", amount: 999)),
                (nil, "Sandbox", RevenueEntry(store: .appStore, kind: .payment, at: d(40) - 100, currency: "jpy", amount: 480)),
                (nil, "Sandbox", RevenueEntry(store: .appStore, kind: .refund, at: d(45), currency: "usd", amount: 999)),
                (true, nil, RevenueEntry(store: .stripe, kind: .payment, at: d(3), currency: "usd", amount: 777_700)),
                (nil, "Production", RevenueEntry(store: .appStore, kind: .payment, at: d(3), currency: "usd", amount: 9_990)),
            ]
            return facts
        }
    }

    /// Reporting in USD: EUR at 1.08 and GBP at 1.25 from January 1st, no JPY rate.
    static var rates: ExchangeRates {
        get throws { try ExchangeRates(reportingCurrency: "usd", csv: "date,currency,rate\n2026-01-01,eur,1.08\n2026-01-01,gbp,1.25\n") }
    }
}

private let consoleToken = "con_finance_0123456789abcdef"
private let appToken = "tok_app_0123456789abcdef"

/// Parses JSON text into Foundation objects, for comparing a body with the expected document.
private func parsed(_ text: String) -> NSObject? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? NSObject
}

@Suite("GET /v1/metrics/*: the revenue metrics API over an in-memory fact store")
struct MetricsEndpointTests {
    func application(
        _ ledger: TemporaryLedger, facts: (any MetricsFactStore)? = nil, consoleTokens: [ConsoleToken] = [ConsoleToken(label: "finance", token: consoleToken)],
        rates: ExchangeRates? = nil
    ) throws -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [appToken]
        dependencies.consoleTokens = consoleTokens
        dependencies.metricsFacts = try facts ?? MetricsScenario.facts
        dependencies.exchangeRates = rates
        dependencies.plans = try MetricsScenario.catalog
        dependencies.scope = .test
        dependencies.now = { Date(timeIntervalSince1970: TimeInterval(MetricsScenario.d(40))) }
        return makeApplication(dependencies)
    }

    /// GETs `uri` with the console token and compares the JSON body with `expected`.
    func expect(_ uri: String, rates: ExchangeRates? = nil, equals expected: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger, rates: rates).test(.router) { client in
            try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer \(consoleToken)"]) { response in
                #expect(response.status == .ok, sourceLocation: sourceLocation)
                #expect(response.headers[.contentType] == "application/json", sourceLocation: sourceLocation)
                let body = String(buffer: response.body)
                let actual = parsed(body)
                let wanted = try #require(parsed(expected), "the expected JSON parses", sourceLocation: sourceLocation)
                #expect(actual == wanted, "\(uri) answered \(body)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test("Overview on day 40: MRR per currency and store (trial converted, forever coupon, annual price, Sandbox periods), by plan, reporting in USD with JPY missing")
    func overview() async throws {
        let d40 = MetricsScenario.d(40)
        // USD: S1 2900 (Stripe) + A1 999 (App Store). EUR: S2 5000 × 2 × 0.75 = 7500. GBP: S3 833.
        // JPY: A2 480 / 12 = 40. Actives: S1, S2, S3 and A1, A2. Trials: A3.
        // Reporting: 3899 + 7500 × 1.08 + 833 × 1.25 = 3899 + 8100 + 1041.25 = 13040.25 → 13040.
        try await expect("/v1/metrics/overview?at=\(d40)", rates: try MetricsScenario.rates, equals: """
            {"at": \(d40),
             "mrr": {"usd": {"total": 3899, "stripe": 2900, "app_store": 999},
                     "eur": {"total": 7500, "stripe": 7500, "app_store": 0},
                     "gbp": {"total": 833, "stripe": 833, "app_store": 0},
                     "jpy": {"total": 40, "stripe": 0, "app_store": 40}},
             "active_subscriptions": {"total": 5, "stripe": 3, "app_store": 2},
             "active_trials": {"total": 1, "stripe": 0, "app_store": 1},
             "by_plan": {"pro": {"active_subscriptions": 3, "mrr": {"usd": 3899, "gbp": 833}},
                         "team": {"active_subscriptions": 2, "mrr": {"eur": 7500, "jpy": 40}}},
             "reporting": {"currency": "usd", "mrr": 13040, "missing_rates": ["jpy"]}}
            """)
    }

    @Test("Overview without a reporting currency has no reporting member; at defaults to now")
    func overviewWithoutReporting() async throws {
        // Day 0: S1 in trial; S2 7500 EUR and S4 1000 USD paying; nothing on the App Store yet.
        try await expect("/v1/metrics/overview?at=\(MetricsScenario.d(0))", equals: """
            {"at": \(MetricsScenario.d(0)),
             "mrr": {"usd": {"total": 1000, "stripe": 1000, "app_store": 0}, "eur": {"total": 7500, "stripe": 7500, "app_store": 0}},
             "active_subscriptions": {"total": 2, "stripe": 2, "app_store": 0},
             "active_trials": {"total": 1, "stripe": 1, "app_store": 0},
             "by_plan": {"team": {"active_subscriptions": 1, "mrr": {"eur": 7500}}}}
            """)
        try await expect("/v1/metrics/overview", equals: """
            {"at": \(MetricsScenario.d(40)),
             "mrr": {"usd": {"total": 3899, "stripe": 2900, "app_store": 999},
                     "eur": {"total": 7500, "stripe": 7500, "app_store": 0},
                     "gbp": {"total": 833, "stripe": 833, "app_store": 0},
                     "jpy": {"total": 40, "stripe": 0, "app_store": 40}},
             "active_subscriptions": {"total": 5, "stripe": 3, "app_store": 2},
             "active_trials": {"total": 1, "stripe": 0, "app_store": 1},
             "by_plan": {"pro": {"active_subscriptions": 3, "mrr": {"usd": 3899, "gbp": 833}},
                         "team": {"active_subscriptions": 2, "mrr": {"eur": 7500, "jpy": 40}}}}
            """)
    }

    @Test("Movement from day 0 to day 40, per currency; end − start = new + reactivation + expansion − contraction − churned")
    func movement() async throws {
        let (from, to) = (MetricsScenario.d(0), MetricsScenario.d(40))
        // USD: S4 1000 at the start, churned; S1 (in trial at the start) 2900 and A1 999 new.
        // EUR: S2 unchanged. GBP: S3 new. JPY: A2 new.
        try await expect("/v1/metrics/movement?from=\(from)&to=\(to)", equals: """
            {"from": \(from), "to": \(to),
             "usd": {"start": 1000, "end": 3899, "new": 3899, "reactivation": 0, "expansion": 0, "contraction": 0, "churned": 1000},
             "eur": {"start": 7500, "end": 7500, "new": 0, "reactivation": 0, "expansion": 0, "contraction": 0, "churned": 0},
             "gbp": {"start": 0, "end": 833, "new": 833, "reactivation": 0, "expansion": 0, "contraction": 0, "churned": 0},
             "jpy": {"start": 0, "end": 40, "new": 40, "reactivation": 0, "expansion": 0, "contraction": 0, "churned": 0}}
            """)
    }

    @Test("Churn from day 0 to day 40: one of two Stripe subscriptions; none paying on the App Store at the start, so no rate")
    func churn() async throws {
        try await expect("/v1/metrics/churn?from=\(MetricsScenario.d(0))&to=\(MetricsScenario.d(40))", equals: """
            {"total": {"at_start": 2, "churned": 1, "rate": 0.5},
             "stripe": {"at_start": 2, "churned": 1, "rate": 0.5},
             "app_store": {"at_start": 0, "churned": 0, "rate": null}}
            """)
    }

    @Test("Trials started from day 0 to day 41, judged on day 40: S1 converted, A3 pending")
    func trials() async throws {
        try await expect("/v1/metrics/trials?from=\(MetricsScenario.d(0))&to=\(MetricsScenario.d(41))", equals: """
            {"total": {"started": 2, "converted": 1, "abandoned": 0, "pending": 1},
             "stripe": {"started": 1, "converted": 1, "abandoned": 0, "pending": 0},
             "app_store": {"started": 1, "converted": 0, "abandoned": 0, "pending": 1}}
            """)
    }

    @Test("Revenue by month over January and February, per currency and store; live and Production entries left out")
    func revenue() async throws {
        let (jan, feb, mar) = (MetricsScenario.d(0), MetricsScenario.d(31), MetricsScenario.d(59))
        // January: Stripe USD 1000 + 2900 paid, 1000 refunded; EUR 7500; GBP 9999.
        // February: App Store USD 999 + 999 paid, 999 refunded; JPY 480.
        try await expect("/v1/metrics/revenue?from=\(jan)&to=\(mar)&interval=month", equals: """
            {"buckets": [
              {"start": \(jan), "end": \(feb),
               "usd": {"gross": 3900, "refunds": 1000, "net": 2900, "transactions": 2, "refunded_transactions": 1,
                       "stripe": {"gross": 3900, "refunds": 1000, "net": 2900, "transactions": 2, "refunded_transactions": 1},
                       "app_store": {"gross": 0, "refunds": 0, "net": 0, "transactions": 0, "refunded_transactions": 0}},
               "eur": {"gross": 7500, "refunds": 0, "net": 7500, "transactions": 1, "refunded_transactions": 0,
                       "stripe": {"gross": 7500, "refunds": 0, "net": 7500, "transactions": 1, "refunded_transactions": 0},
                       "app_store": {"gross": 0, "refunds": 0, "net": 0, "transactions": 0, "refunded_transactions": 0}},
               "gbp": {"gross": 9999, "refunds": 0, "net": 9999, "transactions": 1, "refunded_transactions": 0,
                       "stripe": {"gross": 9999, "refunds": 0, "net": 9999, "transactions": 1, "refunded_transactions": 0},
                       "app_store": {"gross": 0, "refunds": 0, "net": 0, "transactions": 0, "refunded_transactions": 0}}},
              {"start": \(feb), "end": \(mar),
               "usd": {"gross": 1998, "refunds": 999, "net": 999, "transactions": 2, "refunded_transactions": 1,
                       "stripe": {"gross": 0, "refunds": 0, "net": 0, "transactions": 0, "refunded_transactions": 0},
                       "app_store": {"gross": 1998, "refunds": 999, "net": 999, "transactions": 2, "refunded_transactions": 1}},
               "jpy": {"gross": 480, "refunds": 0, "net": 480, "transactions": 1, "refunded_transactions": 0,
                       "stripe": {"gross": 0, "refunds": 0, "net": 0, "transactions": 0, "refunded_transactions": 0},
                       "app_store": {"gross": 480, "refunds": 0, "net": 480, "transactions": 1, "refunded_transactions": 0}}}
            ]}
            """)
    }

    @Test("Series of active subscriptions and of MRR at each month start")
    func series() async throws {
        let (jan, feb, mar) = (MetricsScenario.d(0), MetricsScenario.d(31), MetricsScenario.d(59))
        // Jan 1: S2, S4. Feb 1: S1, S2, S3 (S4 canceled). Mar 1: the same; A1 and A2 have expired.
        try await expect("/v1/metrics/series?metric=active_subscriptions&from=\(jan)&to=\(mar)&interval=month", equals: """
            {"points": [
              {"at": \(jan), "value": {"total": 2, "stripe": 2, "app_store": 0}},
              {"at": \(feb), "value": {"total": 3, "stripe": 3, "app_store": 0}},
              {"at": \(mar), "value": {"total": 3, "stripe": 3, "app_store": 0}}
            ]}
            """)
        try await expect("/v1/metrics/series?metric=mrr&from=\(jan)&to=\(feb)", rates: try MetricsScenario.rates, equals: """
            {"points": [
              {"at": \(jan), "value": {"usd": {"total": 1000, "stripe": 1000, "app_store": 0}, "eur": {"total": 7500, "stripe": 7500, "app_store": 0},
                                      "reporting": {"currency": "usd", "mrr": 9100, "missing_rates": []}}},
              {"at": \(feb), "value": {"usd": {"total": 2900, "stripe": 2900, "app_store": 0}, "eur": {"total": 7500, "stripe": 7500, "app_store": 0},
                                      "gbp": {"total": 833, "stripe": 833, "app_store": 0},
                                      "reporting": {"currency": "usd", "mrr": 12041, "missing_rates": []}}}
            ]}
            """)
    }

    @Test("A missing, malformed or unknown token is 401 with a JSON error and WWW-Authenticate", arguments: [
        nil, "Bearer", "Bearer wrong-token-of-some-length", "Basic dXNlcjpwYXNz", "Bearer \(consoleToken)x", "Bearer finance:\(consoleToken)",
    ])
    func unauthorized(header: String?) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            try await client.execute(uri: "/v1/metrics/overview", method: .get, headers: header.map { [.authorization: $0] } ?? [:]) { response in
                #expect(response.status == .unauthorized)
                #expect(response.errorCode == "unauthorized")
                #expect(response.headers[.wwwAuthenticate] == #"Bearer realm="billingd""#)
                #expect(response.headers[.contentType] == "application/json")
            }
        }
    }

    @Test("The app's service API token is 403 on every metrics route; a console token does not open the service API")
    func appTokenForbidden() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            for path in ["overview", "movement?from=0&to=1", "churn?from=0&to=1", "trials?from=0&to=1", "revenue?from=0&to=1", "series?metric=mrr&from=0&to=1"] {
                try await client.execute(uri: "/v1/metrics/\(path)", method: .get, headers: [.authorization: "Bearer \(appToken)"]) { response in
                    #expect(response.status == .forbidden, "\(path)")
                    #expect(response.errorCode == "forbidden")
                    #expect(response.headers[.contentType] == "application/json")
                }
            }
            try await client.execute(uri: "/v1/users/user_1/subscription", method: .get, headers: [.authorization: "Bearer \(consoleToken)"]) { response in
                #expect(response.status == .unauthorized)
            }
        }
    }

    @Test("Without console tokens the metrics API is off: its routes do not exist")
    func offWithoutTokens() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger, consoleTokens: []).test(.router) { client in
            try await client.execute(uri: "/v1/metrics/overview", method: .get, headers: [.authorization: "Bearer \(consoleToken)"]) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    @Test("A bad or missing parameter is a JSON 400 that names it", arguments: [
        ("overview?at=yesterday", "at", "invalid_parameter"),
        ("overview?at=-5", "at", "invalid_parameter"),
        ("overview?at=", "at", "invalid_parameter"),
        ("overview?at=1&at=2", "at", "invalid_parameter"),
        ("overview?when=1", "when", "unknown_parameter"),
        ("movement?to=100", "from", "invalid_parameter"),
        ("movement?from=100", "to", "invalid_parameter"),
        ("movement?from=100&to=100", "from", "invalid_parameter"),
        ("churn?from=200&to=100", "from", "invalid_parameter"),
        ("trials?from=0&to=99999999999999", "to", "invalid_parameter"),
        ("revenue?from=0&to=100&interval=year", "interval", "invalid_parameter"),
        ("revenue?from=0&to=253402300799&interval=day", "interval", "invalid_parameter"),
        ("series?from=0&to=100", "metric", "invalid_parameter"),
        ("series?metric=arr&from=0&to=100", "metric", "invalid_parameter"),
        ("series?metric=mrr&from=0&to=253402300799&interval=week", "interval", "invalid_parameter"),
    ])
    func badParameters(path: String, parameter: String, code: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            try await client.execute(uri: "/v1/metrics/\(path)", method: .get, headers: [.authorization: "Bearer \(consoleToken)"]) { response in
                #expect(response.status == .badRequest)
                #expect(response.headers[.contentType] == "application/json")
                let error = response.json["error"] as? [String: Any]
                #expect(error?["code"] as? String == code)
                #expect(error?["parameter"] as? String == parameter)
                #expect((error?["message"] as? String)?.isEmpty == false)
            }
        }
    }

    @Test("Too many series points: the cap is named in the answer")
    func pointCap() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger).test(.router) { client in
            try await client.execute(uri: "/v1/metrics/series?metric=mrr&from=0&to=1000000000&interval=day", method: .get, headers: [.authorization: "Bearer \(consoleToken)"]) { response in
                #expect(response.status == .badRequest)
                let message = (response.json["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains("more than 1000 points"), "\(message)")
            }
        }
    }

    @Test("A ledger that cannot be read is a JSON 500 without internals")
    func unreadableLedger() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await application(ledger, facts: FailingMetricsFacts()).test(.router) { client in
            try await client.execute(uri: "/v1/metrics/overview", method: .get, headers: [.authorization: "Bearer \(consoleToken)"]) { response in
                #expect(response.status == .internalServerError)
                #expect(response.errorCode == "internal_error")
            }
        }
    }
}

@Suite("Revenue metrics: facts made into histories with the plan catalog")
struct SubscriptionHistoriesTests {
    @Test("Plans by Stripe price and App Store product; an App Store product's period from the catalog, else its length")
    func composition() throws {
        let facts = try MetricsScenario.facts
        let histories = SubscriptionHistory.histories(
            stripe: facts.stripe.filter { !$0.livemode }.map(\.facts), appStore: facts.appStore.filter { $0.environment == "Sandbox" },
            catalog: try MetricsScenario.catalog)
        let byID = Dictionary(uniqueKeysWithValues: histories.map { ($0.id, $0) })
        #expect(byID["sub_trial"]?.plan == "pro")
        #expect(byID["sub_coupon"]?.plan == "team")
        #expect(byID["sub_annual"]?.plan == "pro")
        #expect(byID["sub_churn"]?.plan == nil)
        #expect(byID["2000000001"]?.plan == "pro")
        #expect(byID["2000000003"]?.plan == "team")
        let d40 = MetricsScenario.d(40)
        #expect(byID["2000000003"]?.state(at: d40) == .paying(currency: "jpy", monthly: 40), "P1Y from the catalog")
        #expect(byID["2000000001"]?.state(at: d40) == .paying(currency: "usd", monthly: 999), "5 minutes in the Sandbox: a month")
        let uncatalogued = SubscriptionHistory.histories(stripe: [], appStore: facts.appStore.filter { $0.originalTransactionID == "2000000003" }, catalog: .freeOnly)
        #expect(uncatalogued.first?.state(at: d40) == .paying(currency: "jpy", monthly: 80), "30 minutes in the Sandbox: six months")
        #expect(uncatalogued.first?.plan == nil)
    }

    @Test("A Stripe subscription's plan by its price's lookup key or product, when the catalog names the tier so")
    func planByLookupKeyOrProduct() throws {
        let catalog = try PlanCatalog(document: JSONDecoder().decode(PlanCatalogDocument.self, from: Data("""
            {"tiers": [
              {"id": "free", "name": "Free", "rank": 0},
              {"id": "pro", "name": "Pro", "rank": 10, "stripe": {"prices": [{"lookup_key": "pro_monthly"}]}},
              {"id": "team", "name": "Team", "rank": 20, "stripe": {"products": ["prod_team"]}}
            ]}
            """.utf8)))
        let stripe = [
            StripeSubscriptionFacts(id: "sub_by_key", price: "price_1", lookupKey: "pro_monthly", product: "prod_other", snapshots: [], paidInvoices: []),
            StripeSubscriptionFacts(id: "sub_by_product", price: "price_2", lookupKey: nil, product: "prod_team", snapshots: [], paidInvoices: []),
            StripeSubscriptionFacts(id: "sub_unknown", price: "price_3", lookupKey: "other", product: "prod_other", snapshots: [], paidInvoices: []),
        ]
        let plans = SubscriptionHistory.histories(stripe: stripe, appStore: [], catalog: catalog).map(\.plan)
        #expect(plans == ["pro", "team", nil])
    }
}
