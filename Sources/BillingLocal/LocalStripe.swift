import APITransport
import BillingCore
import BillingServer
import BillingStore
import Foundation
import Logging
import ServiceLifecycle
import StripeAPI
import StripeFake

/// `serve --local` without STRIPE_API_KEY: a Stripe fake on loopback for Checkout, the portal and
/// cancel, so that every endpoint works with no Stripe account. It sells the plan catalog's prices
/// (by lookup key or id), serves Checkout's hosted page on its own address (opening a Checkout URL
/// pays it), and delivers its events, signed, to serve's webhook endpoint. It runs as a service of
/// the daemon and stops after the server.
struct LocalStripe: LocalStripeStandIn {
    static let apiKey = "sk_test_local_fake_0123456789"

    let fake: StripeFake
    /// Prices seeded from the catalog.
    let prices: Int

    var baseURL: String { fake.baseURL }

    /// Starts the fake, seeds it from `catalog`, and keeps its address in the ledger, where
    /// `trigger` finds it to have it hold the objects it sends.
    static func start(catalog: PlanCatalog, store: any LedgerStore, logger: Logger) async throws -> LocalStripe {
        var fakeLogger = logger
        fakeLogger.logLevel = max(logger.logLevel, .warning)
        let fake = try await StripeFake.start(.init(apiKey: apiKey, recordsRequests: false, hostedPages: true, logger: fakeLogger))
        do {
            let local = LocalStripe(fake: fake, prices: try await seed(fake, from: catalog))
            try await store.setMetaValue(LocalStripeFake.metaKey, fake.baseURL)
            return local
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

    func stop() async {
        await fake.stop()
    }

    func run() async throws {
        try? await gracefulShutdown()
        await fake.stop()
    }
}

/// What `billingd trigger` needs of the Stripe fake a local `serve` runs: serve keeps the fake's
/// address in the ledger's settings, and trigger has the fake hold the object of each event it
/// sends, so that Checkout, the portal and cancel find a triggered customer or subscription.
public enum LocalStripeFake {
    static let metaKey = "local_stripe_fake_url"
    /// The kinds of object the fake holds (its `ObjectKind`s, events aside).
    static let heldKinds: Set<String> = ["customer", "subscription", "invoice", "payment_method", "price", "product", "checkout.session"]

    public enum Outcome: Sendable, Equatable {
        /// The fake at this address now holds the object (or forgot a deleted one).
        case held(objectID: String, fake: String)
        /// Nothing to do: serve never ran a local fake here, or the object is of a kind it does not hold.
        case notApplicable
        /// serve's fake did not answer (serve stopped, or runs with a Stripe key now).
        case unreachable(fake: String, reason: String)
    }

    /// Has the local fake hold the object of a triggered event (its `data.object`, as sent).
    public static func hold(eventBody: [UInt8], store: any LedgerStore, logger: Logger) async throws -> Outcome {
        guard let fakeURL = try await store.metaValue(metaKey),
            let event = try? JSONSerialization.jsonObject(with: Data(eventBody)) as? [String: Any],
            let object = (event["data"] as? [String: Any])?["object"] as? [String: Any],
            let kind = object["object"] as? String, heldKinds.contains(kind), let id = object["id"] as? String,
            let objectJSON = String(data: try JSONSerialization.data(withJSONObject: object), encoding: .utf8)
        else { return .notApplicable }
        var configuration = StripeClientConfiguration(apiKey: LocalStripe.apiKey, baseURL: fakeURL, apiVersion: StripeAPIVersion.pinned)
        configuration.maxRetries = 0
        configuration.connectTimeout = .seconds(2)
        configuration.requestTimeout = .seconds(5)
        var parameters: StripeParameters = ["kind": .string(kind), "object": .string(objectJSON)]
        if object["deleted"] as? Bool == true { parameters = ["kind": .string(kind), "object": .string(objectJSON), "delete": true] }
        do {
            _ = try await StripeClient(configuration: configuration, logger: logger)
                .send(.post, "/v1/test_helpers/billingd/objects", parameters: parameters, account: event["account"] as? String)
            return .held(objectID: id, fake: fakeURL)
        } catch {
            return .unreachable(fake: fakeURL, reason: "\(error)")
        }
    }
}
