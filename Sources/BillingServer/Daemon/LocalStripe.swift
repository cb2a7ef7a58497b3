import BillingCore
import Logging
import ServiceLifecycle
import StripeAPI
import StripeFake

/// `serve --local` without STRIPE_API_KEY: a Stripe fake on loopback for Checkout, the portal and
/// cancel, so that every endpoint works with no Stripe account. It sells the plan catalog's prices
/// (by lookup key or id), serves Checkout's hosted page on its own address (opening a Checkout URL
/// pays it), and delivers its events, signed, to serve's webhook endpoint. It runs as a service of
/// the daemon and stops after the server.
struct LocalStripe: Service {
    static let apiKey = "sk_test_local_fake_0123456789"

    let fake: StripeFake
    /// Prices seeded from the catalog.
    let prices: Int

    /// Starts the fake and seeds it from `catalog`.
    static func start(catalog: PlanCatalog, logger: Logger) async throws -> LocalStripe {
        var fakeLogger = logger
        fakeLogger.logLevel = max(logger.logLevel, .warning)
        let fake = try await StripeFake.start(.init(apiKey: apiKey, recordsRequests: false, hostedPages: true, logger: fakeLogger))
        do {
            return LocalStripe(fake: fake, prices: try await seed(fake, from: catalog))
        } catch {
            await fake.stop()
            throw error
        }
    }

    /// One product per paid tier and the tier's prices, at made-up amounts ($10 a month for the
    /// first paid tier, $20 for the second …, ten months' worth a year).
    private static func seed(_ fake: StripeFake, from catalog: PlanCatalog) async throws -> Int {
        var seeded = 0
        for (position, tier) in catalog.tiers.filter({ !$0.prices.isEmpty }).enumerated() {
            let product = await fake.createProduct(name: tier.name, metadata: ["billingd_tier": tier.id])
            for price in tier.prices {
                let interval = price.interval?.rawValue ?? "month"
                let monthly = Int64(position + 1) * 1_000
                let created = try await fake.createPrice(
                    product: product, unitAmount: interval == "year" ? monthly * 10 : monthly, interval: interval,
                    lookupKey: price.lookupKey, nickname: "\(tier.name) (\(interval)ly)")
                if let id = price.id, id != created, var object = await fake.object(.price, created) {
                    // The catalog names this price by id: the fake sells it under that id.
                    object["id"] = .string(id)
                    try await fake.insert(object, as: .price)
                    await fake.remove(.price, created)
                }
                seeded += 1
            }
        }
        return seeded
    }

    /// The client the service API uses instead of Stripe's.
    func client(logger: Logger, observer: (any StripeClientObserver)?) -> StripeClient {
        StripeClient(
            configuration: StripeClientConfiguration(apiKey: Self.apiKey, baseURL: fake.baseURL, apiVersion: StripeAPIVersion.pinned),
            logger: logger, observer: observer)
    }

    /// Sends the fake's events to serve's webhook endpoint, signed with `secret`.
    func deliver(to url: String, secret: String) async {
        await fake.setWebhookEndpoint(WebhookEndpoint(url: url, secret: secret))
    }

    func run() async throws {
        try? await gracefulShutdown()
        await fake.stop()
    }
}
