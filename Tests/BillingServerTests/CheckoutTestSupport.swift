import BillingCore
import BillingServer
import BillingStore
import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import StripeAPI
import StripeFake
import Testing

/// The service API with a real libcurl `StripeClient` behind it, talking to a StripeFake on
/// loopback that sells Pro (monthly by lookup key, yearly by price id) and Team seats.
///
/// The fake's clock stands ten minutes in the past, so that the events it emits are older than
/// anything billingd reads from its API afterwards (whose version is the answer's `Date`).
struct BillingHarness {
    static let apiKey = "sk_test_fake_0123456789"
    static let token = "tok_billing_0123456789abcdef"

    /// The fake's prices.
    struct Prices {
        let proMonthly: String
        let proYearly: String
        let teamMonthly: String
        let oneTime: String
        let inactive: String
    }

    let fake: StripeFake
    let ledger: TemporaryLedger
    let client: StripeClient
    let catalog: PlanCatalog
    let prices: Prices

    static func start(maxRetries: Int = 1) async throws -> BillingHarness {
        let fake = try await StripeFake.start(.init(apiKey: apiKey, clock: FakeClock(fixedAt: Int64(Date().timeIntervalSince1970) - 600)))
        var configuration = StripeClientConfiguration(apiKey: apiKey, baseURL: fake.baseURL, apiVersion: StripeAPIVersion.pinned)
        configuration.requestsPerSecond = 2_000
        configuration.maxRetries = maxRetries
        configuration.retryBaseDelay = .milliseconds(10)
        configuration.maxRetryDelay = .milliseconds(50)
        var logger = Logger(label: "test.stripe")
        logger.logLevel = .critical
        let client = StripeClient(configuration: configuration, logger: logger)

        let pro = await fake.createProduct(name: "Pro")
        let team = await fake.createProduct(name: "Team")
        let prices = Prices(
            proMonthly: try await fake.createPrice(product: pro, unitAmount: 999, interval: "month", lookupKey: "pro_monthly"),
            proYearly: try await fake.createPrice(product: pro, unitAmount: 9_900, interval: "year"),
            teamMonthly: try await fake.createPrice(product: team, unitAmount: 1_200, interval: "month", lookupKey: "team_seat_monthly"),
            oneTime: try await fake.createPrice(product: pro, unitAmount: 500, interval: nil, lookupKey: "setup_fee"),
            inactive: try await fake.createPrice(product: pro, unitAmount: 799, interval: "month", lookupKey: "pro_2019", active: false))
        let catalog = try PlanCatalog(tiers: [
            PlanTier(id: "free", name: "Free", rank: 0),
            PlanTier(
                id: "pro", name: "Pro", rank: 10,
                prices: [PlanPrice(lookupKey: "pro_monthly", interval: .month), PlanPrice(id: prices.proYearly, interval: .year)]),
            PlanTier(id: "team", name: "Team", rank: 20, prices: [PlanPrice(lookupKey: "team_seat_monthly", interval: .month)]),
        ])
        return BillingHarness(fake: fake, ledger: try TemporaryLedger(), client: client, catalog: catalog, prices: prices)
    }

    /// The application with the service API on; `stripe: false` runs it without an API key.
    func application(stripe: Bool = true) -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [Self.token]
        dependencies.plans = catalog
        dependencies.scope = .test
        dependencies.stripe = stripe ? client : nil
        return makeApplication(dependencies)
    }

    /// Applies every event the fake emitted so far to the ledger, as webhooks would.
    func syncEvents() async throws {
        let deliveries = try await fake.events().map { event in
            let body = event.serialized()
            return InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
        }
        _ = try await SQLiteInbox(database: ledger.database).insert(deliveries)
        let pass = try await SQLiteApplier(database: ledger.database).drain()
        #expect(pass.failed + pass.dead == 0, "every event of the fake applies")
    }

    /// A customer created outside billingd with the user's metadata, subscribed to `price`, in the ledger by its events.
    @discardableResult
    func subscribe(_ user: String, to price: String, quantity: Int64 = 1) async throws -> (customer: String, subscription: String) {
        let customer = await fake.createCustomer(email: "\(user)@example.com", metadata: ["app_user_id": user])
        let created = try await fake.createSubscription(customer: customer, price: price, quantity: quantity)
        try await syncEvents()
        return (customer, created.subscription)
    }

    func count(_ table: String, _ condition: String = "1") async throws -> Int {
        try await ledger.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table) WHERE \(condition)") ?? 0 }
    }

    /// The flat `name=value` pairs of each recorded request to `path` (form body or query).
    func sentForms(_ method: String, _ path: String) async -> [[String: String]] {
        await fake.requests(matching: .method(method, path: path)).filter { $0.path == path }.map { request in
            FlatForm.pairs(request.method == "POST" ? String(decoding: request.body, as: UTF8.self) : request.query ?? "")
                .reduce(into: [:]) { $0[$1.name] = $1.value }
        }
    }

    func stop() async {
        await fake.stop()
        ledger.remove()
    }
}

/// A form body or query string as Stripe reads it: `name=value` pairs, percent-decoded, in order.
enum FlatForm {
    static func pairs(_ text: String) -> [(name: String, value: String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                (String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding) ?? String(part)
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }
}

let billingAuthorized: HTTPFields = [.authorization: "Bearer \(BillingHarness.token)", .contentType: "application/json"]

/// POSTs a JSON body (given as text, so that tests can send anything) to the service API.
@discardableResult
func postJSON(
    _ client: some TestClientProtocol, _ uri: String, _ json: String, headers: HTTPFields = billingAuthorized
) async throws -> TestResponse {
    try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: json))
}

/// A checkout body for `user` with valid URLs and the given extra members (JSON text, no braces).
func checkoutJSON(_ user: String, _ members: String = #""plan": "pro""#) -> String {
    #"{"user": "\#(user)", \#(members), "success_url": "https://app.example.com/done?s={CHECKOUT_SESSION_ID}", "cancel_url": "https://app.example.com/pricing"}"#
}

extension HTTPFields {
    /// A copy with one more field.
    func adding(_ name: String, _ value: String) -> HTTPFields {
        var copy = self
        copy[HTTPField.Name(name)!] = value
        return copy
    }
}

extension TestResponse {
    /// `error.message` of a JSON error body.
    var errorMessage: String? {
        (json["error"] as? [String: Any])?["message"] as? String
    }
}
