import APITransport
import BillingCore
import BillingServer
import BillingStore
import Foundation
import GRDB
import Logging
import StripeAPI
import StripeFake
import Synchronization
import Testing

/// StripeFake with a `radars_created` Billing Meter, a ledger, and the usage fixture catalog
/// (meter `radars` reports to `radars_created`; `api_calls` reports nowhere). The fake's clock
/// stands still at ``now``; the reporter is given its own.
struct UsageReportBed {
    let harness: BillingHarness
    let catalog: PlanCatalog
    let meter: String

    var fake: StripeFake { harness.fake }
    var ledger: TemporaryLedger { harness.ledger }
    var database: SQLiteDatabase { harness.ledger.database }
    var now: Int64 { harness.fake.clock.now }

    static func start() async throws -> UsageReportBed {
        let harness = try await BillingHarness.start()
        let meter = try await harness.fake.createBillingMeter(eventName: "radars_created")
        return UsageReportBed(harness: harness, catalog: try fixtureCatalog("usage"), meter: meter)
    }

    /// A Stripe customer of `user` (by metadata), in the ledger through its event.
    @discardableResult
    func customer(for user: String, account: String? = nil) async throws -> String {
        let customer = await fake.createCustomer(email: "\(user)@example.com", metadata: ["app_user_id": user], account: account)
        try await syncEvents(account: account)
        return customer
    }

    func syncEvents(account: String? = nil) async throws {
        let deliveries = try await fake.events(account: account).map { event in
            let body = event.serialized()
            return InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
        }
        _ = try await SQLiteInbox(database: database).insert(deliveries)
        _ = try await SQLiteApplier(database: database).drain()
    }

    /// Records usage as the service API would; returns the record's seq.
    @discardableResult
    func record(
        _ user: String, meter: String = "radars", quantity: Int64 = 1, at timestamp: Int64? = nil, recordedAt: Int64? = nil,
        scope: ServiceScope = .test, key: String = UUID().uuidString
    ) async throws -> Int64 {
        let meter = try #require(catalog.meter(id: meter))
        let time = timestamp ?? now
        let input = UsageRecordInput(
            scope: scope, user: user, meter: meter, quantity: quantity, timestamp: time, idempotencyKey: key,
            period: .calendarMonth(containing: time), limit: nil)
        _ = try await SQLiteUsage(database: database).apply([.record(input)], now: (recordedAt ?? now) * 1000)
        return try await database.writer.read { db in try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM usageRecord") ?? 0 }
    }

    /// A client on the fake: no retries unless asked, over `transport`.
    func client(maxRetries: Int = 0, transport: any HTTPTransport = CurlTransport()) -> StripeClient {
        var configuration = StripeClientConfiguration(apiKey: BillingHarness.apiKey, baseURL: fake.baseURL, apiVersion: StripeAPIVersion.pinned)
        configuration.requestsPerSecond = 2_000
        configuration.maxRetries = maxRetries
        configuration.retryBaseDelay = .milliseconds(5)
        configuration.maxRetryDelay = .milliseconds(20)
        var logger = Logger(label: "test.stripe")
        logger.logLevel = .critical
        return StripeClient(configuration: configuration, transport: transport, logger: logger)
    }

    func reporter(at time: Int64, client: StripeClient? = nil, metrics: BillingMetrics? = nil, holder: String = "test") -> UsageReporter {
        var logger = Logger(label: "test.usage")
        logger.logLevel = .critical
        return UsageReporter(
            store: ledger.store, client: client ?? self.client(), livemode: false, logger: logger, metrics: metrics, holder: holder,
            now: { time })
    }

    /// The report columns of one record.
    func row(_ seq: Int64) async throws -> ReportRow {
        try await database.writer.read { db in
            let row = try #require(try Row.fetchOne(
                db,
                sql: "SELECT reportState, reportAttempts, reportNextAt, reportError, reportedAt, stripeCustomer, reportInFlightSince FROM usageRecord WHERE seq = ?",
                arguments: [seq]))
            return ReportRow(
                state: row["reportState"], attempts: row["reportAttempts"], nextAt: row["reportNextAt"], error: row["reportError"],
                reportedAt: row["reportedAt"], customer: row["stripeCustomer"], inFlightSince: row["reportInFlightSince"])
        }
    }

    func namespace() async throws -> String {
        try #require(try await database.metaValue("usage_meter_event_namespace"))
    }

    /// Stripe's summary of a customer's `radars_created` usage over the minutes around now.
    func stripeTotal(_ customer: String) async throws -> Int64 {
        let start = now - now % 60 - 40 * 86_400
        let response = try await client().send(
            .get, "/v1/billing/meters/\(meter)/event_summaries",
            parameters: ["customer": .string(customer), "start_time": .integer(start), "end_time": .integer(now - now % 60 + 3_600)])
        let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        let data = json?["data"] as? [[String: Any]]
        return (data?.first?["aggregated_value"] as? NSNumber)?.int64Value ?? -1
    }

    func stop() async { await harness.stop() }
}

struct ReportRow: Equatable {
    var state: String?
    var attempts: Int
    var nextAt: Int64?
    var error: String?
    var reportedAt: Int64?
    var customer: String?
    var inFlightSince: Int64?
}

/// A transport that performs the request, then loses the answer of the first `times` meter event
/// calls, as a timeout after Stripe processed it would.
final class AnswerLosingTransport: HTTPTransport {
    private let real = CurlTransport()
    private let remaining: Mutex<Int>

    init(times: Int) { remaining = Mutex(times) }

    func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse {
        let answer = try await real.perform(request)
        guard request.url.hasSuffix("/v1/billing/meter_events") else { return answer }
        let lose = remaining.withLock { count in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if lose { throw .timedOut("Operation timed out after 80000 milliseconds with 0 bytes received") }
        return answer
    }
}

/// A transport that counts meter event calls in flight, per customer and in all.
final class ConcurrencyWatchingTransport: HTTPTransport {
    private let real = CurlTransport()
    private let state = Mutex<(perCustomer: [String: Int], total: Int, maxPerCustomer: Int, maxTotal: Int)>(([:], 0, 0, 0))

    var maxPerCustomer: Int { state.withLock { $0.maxPerCustomer } }
    var maxTotal: Int { state.withLock { $0.maxTotal } }

    func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse {
        guard request.url.hasSuffix("/v1/billing/meter_events") else { return try await real.perform(request) }
        let body = String(decoding: request.body, as: UTF8.self)
        let customer = FlatForm.pairs(body).first { $0.name == "payload[stripe_customer_id]" }?.value ?? ""
        state.withLock { state in
            state.perCustomer[customer, default: 0] += 1
            state.total += 1
            state.maxPerCustomer = max(state.maxPerCustomer, state.perCustomer[customer]!)
            state.maxTotal = max(state.maxTotal, state.total)
        }
        defer {
            state.withLock { state in
                state.perCustomer[customer]! -= 1
                state.total -= 1
            }
        }
        return try await real.perform(request)
    }
}
