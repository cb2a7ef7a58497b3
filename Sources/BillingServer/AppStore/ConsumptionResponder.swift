import AppStoreAPI
import AsyncAlgorithms
import BillingCore
import BillingStore
import Foundation
import Logging
import ServiceLifecycle

/// Answers Apple's refund requests (`CONSUMPTION_REQUEST`) through the App Store Server API's
/// Send Consumption Information: `serve` runs it beside the server whenever an App Store Server
/// API client exists (an In-App Purchase key, or local mode's stand-in).
///
/// The rule it keeps: each request is answered at most once at a time and at least once while
/// Apple still takes an answer. It claims due requests for a lease (``Configuration/lease``; on
/// PostgreSQL with `FOR UPDATE SKIP LOCKED`, so two replicas never answer one request at once),
/// decides the body from the ledger and the policy (``ConsumptionAnswerPolicy``), records the
/// attempt and its body before the call, then records Apple's answer: `sent` on 202, a retry with
/// jittered exponential backoff on 429, 5xx, a refused token or no answer, `failed` with Apple's
/// error on another 4xx. Nothing is sent without the owner's recorded consent (`no_consent`), nor
/// after Apple's 12 hours (`expired`). A crash during a call leaves the request pending: it is
/// sent again when its lease ends (Apple takes the same answer twice without harm).
///
/// A graceful shutdown ends its wait at once and cancels a call in flight; a request whose call
/// was cancelled is due again at once, for the next start.
public final class ConsumptionResponder: Service, Sendable {
    public struct Configuration: Sendable {
        public var policy: ConsumptionAnswerPolicy
        /// Maps products to tiers (delivery), periods and `consumption_meter` (consumption) and
        /// `sample_content_provided`.
        public var catalog: PlanCatalog
        /// The scope the service API records usage in (the Stripe key's mode), where a
        /// `consumption_meter`'s use is read.
        public var usageScope: ServiceScope = .test
        /// How often it looks for due requests (a refund request waits at most this long; Apple
        /// gives 12 hours).
        public var pollInterval: Duration = .seconds(5)
        /// How long a claim holds before another replica may take the request: longer than a
        /// call with all of the client's own retries.
        public var lease: Duration = .seconds(600)
        /// Requests claimed per pass.
        public var batchSize = 20
        /// The first retry's delay; each later one doubles, up to ``maximumRetryDelay``.
        public var firstRetryDelay: Duration = .seconds(30)
        public var maximumRetryDelay: Duration = .seconds(1800)
        /// Unix ms.
        public var now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }

        public init(policy: ConsumptionAnswerPolicy, catalog: PlanCatalog) {
            self.policy = policy
            self.catalog = catalog
        }
    }

    /// What one pass did.
    public struct Pass: Sendable, Equatable {
        public var claimed = 0
        public var sent = 0
        public var noConsent = 0
        public var expired = 0
        public var failed = 0
        public var retried = 0
        /// Claims given back unanswered (a shutdown).
        public var released = 0

        public init() {}
    }

    private let store: any AppStoreConsumptionStore
    private let usage: any UsageStore
    private let clients: [AppStoreEnvironment: AppStoreClient]
    private let configuration: Configuration
    private let metrics: BillingMetrics?
    private let logger: Logger
    /// Says when the store is full: no pass starts then (it could not record a claim or an answer).
    private let space: StoreSpaceWatch?
    private let wakeups: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    /// - Parameters:
    ///   - usage: where the use of a product's `consumption_meter` is read.
    ///   - clients: the App Store Server API client of each environment answered; a request of
    ///     another environment waits (and expires) unanswered.
    ///   - space: told of a pass refused for want of space; while it says the store is full, the
    ///     responder waits for room instead of trying every poll.
    public init(
        store: any AppStoreConsumptionStore, usage: any UsageStore, clients: [AppStoreEnvironment: AppStoreClient],
        configuration: Configuration, metrics: BillingMetrics? = nil, logger: Logger, space: StoreSpaceWatch? = nil
    ) {
        self.store = store
        self.usage = usage
        self.clients = clients
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.space = space
        (wakeups, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The environments it answers, sorted.
    public var environments: [AppStoreEnvironment] { clients.keys.sorted { $0.rawValue < $1.rawValue } }

    public func run() async throws {
        let (continuation, interval) = (self.continuation, configuration.pollInterval)
        logger.info(
            "refund request responder started", metadata: ["environments": "\(environments.map(\.rawValue).joined(separator: ","))"])
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Ends at graceful shutdown or cancellation; cancelled below once the wake-ups end.
                    for await _ in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
                        continuation.yield()
                    }
                }
                continuation.yield()
                for await _ in wakeups {
                    if space?.isFull == true { continue }
                    do {
                        _ = try await answerDue()
                    } catch {
                        // A full store is logged once per episode by the watch.
                        if space?.refused(error, writer: "refund_requests") == true { continue }
                        logger.error("refund requests not answered this pass; retrying shortly", metadata: ["error": "\(error)"])
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            continuation.finish()
        }
    }

    /// Expires what Apple no longer takes, then claims and answers due requests until none is
    /// left (or a graceful shutdown begins).
    @discardableResult
    public func answerDue() async throws -> Pass {
        var pass = Pass()
        let expired = try await store.expireOverdue(now: configuration.now())
        pass.expired += expired
        if expired > 0 {
            metrics?.count("billingd_appstore_consumption_answers_total", by: expired, dimensions: [("outcome", "expired")])
            logger.warning("refund requests not answered within Apple's 12 hours", metadata: ["count": "\(expired)"])
        }
        let environments = self.environments.map(\.rawValue)
        guard !environments.isEmpty else { return pass }
        while !Task.isShuttingDownGracefully {
            let now = configuration.now()
            let claimed = try await store.claimDue(
                environments: environments, now: now, leaseUntil: now + Self.milliseconds(configuration.lease), limit: configuration.batchSize)
            pass.claimed += claimed.count
            for request in claimed {
                if Task.isShuttingDownGracefully {
                    try await store.record(.released, environment: request.environment, notificationUUID: request.notificationUUID, at: now)
                    pass.released += 1
                    continue
                }
                try await answer(request, pass: &pass)
            }
            if claimed.count < configuration.batchSize { break }
        }
        return pass
    }

    /// Decides and records the answer to one claimed request, calling Apple when there is one to send.
    private func answer(_ request: AppStoreConsumptionRequest, pass: inout Pass) async throws {
        let (environment, uuid) = (request.environment, request.notificationUUID)
        let metadata: Logger.Metadata = ["environment": "\(environment)", "notification": "\(uuid)"]
        let context = try await store.answerContext(for: request)
        let catalog = configuration.catalog
        let product = context.transaction?.productID
        let facts = ConsumptionFacts(
            requestedAt: request.signedDate, consented: context.owner != nil && context.consent?.consented == true,
            transaction: context.transaction.map {
                ConsumptionFacts.Transaction(
                    type: $0.type, purchaseDate: $0.purchaseDate, expiresDate: $0.expiresDate, revocationDate: $0.revocationDate,
                    period: catalog.period(appStoreProduct: $0.productID))
            },
            delivery: ConsumptionDelivery.status(
                productHasTier: product.map { catalog.tier(appStoreProduct: $0) != nil } ?? false, historyRecords: context.historyRecords,
                entitledThroughPurchase: context.entitledThroughPurchase),
            sampleContentProvided: product.map { catalog.sampleContentProvided(appStoreProduct: $0) } ?? false,
            usage: try await meterUse(of: context, now: configuration.now()))
        let decidedAt = configuration.now()
        switch configuration.policy.decide(facts, now: decidedAt) {
        case .expired:
            try await finish(.expired, request, at: decidedAt, metric: "expired", counting: &pass.expired)
            logger.warning("refund request not answered within Apple's 12 hours", metadata: metadata)
        case .noConsent:
            try await finish(.noConsent(user: context.owner), request, at: decidedAt, metric: "no_consent", counting: &pass.noConsent)
            logger.info(
                "refund request not answered: the purchase's owner has not consented to share consumption data (PUT /v1/users/{user}/appstore/consumption-consent)",
                metadata: metadata)
        case .send(let body):
            guard let owner = context.owner,
                let client = clients[AppStoreEnvironment(rawValue: environment)],
                try await store.record(.attempting(body: body.json(), user: owner), environment: environment, notificationUUID: uuid, at: decidedAt)
            else { return }
            let result = await cancelWhenGracefulShutdown { () async -> Result<Int, AppStoreAPIError> in
                do throws(AppStoreAPIError) {
                    return .success(try await client.sendConsumptionInformation(transactionID: request.transactionID, body: body))
                } catch {
                    return .failure(error)
                }
            }
            let at = configuration.now()
            switch result {
            case .success(let status):
                try await finish(.sent(appleStatus: status), request, at: at, metric: "sent", counting: &pass.sent)
                var answered = metadata
                answered["answer"] = "\(body.summary)"
                if let usage = facts.usage { answered["usage"] = "\(usage.meter) \(usage.used) of \(usage.limit)" }
                logger.info("refund request answered", metadata: answered)
            case .failure(let error):
                try await failed(request, error: error, attempts: request.attempts + 1, at: at, metadata: metadata, pass: &pass)
            }
        }
    }

    /// The use of the product's `consumption_meter` by the purchase's owner during the purchase:
    /// the meter's total from its purchase date to its expiry (to now for a purchase without
    /// one), against the limit the product's tier gives it — per unit of quantity counts once, as
    /// for every App Store purchase. Nil without a meter, an owner, a purchase date, or a limit
    /// that is a number above 0.
    private func meterUse(of context: AppStoreConsumptionContext, now: Int64) async throws -> ConsumptionFacts.Usage? {
        guard let transaction = context.transaction, let owner = context.owner, let purchased = transaction.purchaseDate,
            let (meter, value) = configuration.catalog.consumptionMeter(appStoreProduct: transaction.productID)
        else { return nil }
        let limit: Int64
        switch value {
        case .count(let count): limit = count
        case .perQuantity(let count): limit = count
        case .unlimited: return nil
        }
        guard limit > 0 else { return nil }
        // Unix ms to the seconds of usage records; the end is exclusive, so a record in the
        // purchase's last second counts.
        let end = transaction.expiresDate ?? now
        let period = UsagePeriod(start: purchased / 1000, end: (end + 999) / 1000)
        guard period.end > period.start else { return nil }
        let used = try await usage.total(scope: configuration.usageScope, user: owner, meter: meter.id, period: period)
        return ConsumptionFacts.Usage(meter: meter.id, used: used, limit: limit)
    }

    /// Records a call that failed: released when cancelled, retried when the failure may pass,
    /// given up with Apple's error otherwise.
    private func failed(
        _ request: AppStoreConsumptionRequest, error: AppStoreAPIError, attempts: Int, at: Int64, metadata: Logger.Metadata, pass: inout Pass
    ) async throws {
        let (environment, uuid) = (request.environment, request.notificationUUID)
        switch error.kind {
        case .cancelled:
            try await store.record(.released, environment: environment, notificationUUID: uuid, at: at)
            pass.released += 1
        case .rateLimited, .server, .transport, .authentication, .signing:
            // Past the window, the retry is due at its end, where the expiry takes the request
            // (its last error kept).
            let retryAt = min(at + retryDelayMilliseconds(afterAttempt: attempts), request.deadline)
            try await finish(
                .retry(at: retryAt, error: error.description, appleStatus: error.status), request, at: at, metric: "retry", counting: &pass.retried)
            logger.log(
                level: error.kind == .authentication || error.kind == .signing ? .error : .warning,
                "refund request answer failed; retrying", metadata: metadata.merging(["error": "\(error)"]) { $1 })
        case .invalidRequest, .notFound, .verification, .decoding:
            try await finish(.failed(error: error.description, appleStatus: error.status), request, at: at, metric: "failed", counting: &pass.failed)
            logger.error("Apple refused the answer to a refund request", metadata: metadata.merging(["error": "\(error)"]) { $1 })
        }
    }

    /// Records an outcome and, when the request was still pending, counts it in the pass and the metric.
    private func finish(
        _ outcome: AppStoreConsumptionOutcome, _ request: AppStoreConsumptionRequest, at: Int64, metric name: String, counting count: inout Int
    ) async throws {
        guard try await store.record(outcome, environment: request.environment, notificationUUID: request.notificationUUID, at: at) else {
            return
        }
        count += 1
        metrics?.count("billingd_appstore_consumption_answers_total", dimensions: [("outcome", name)])
    }

    /// Exponential backoff from the first delay, capped, with ±25 % jitter.
    func retryDelayMilliseconds(afterAttempt attempt: Int) -> Int64 {
        let first = Double(Self.milliseconds(configuration.firstRetryDelay))
        let cap = Double(Self.milliseconds(configuration.maximumRetryDelay))
        let base = min(cap, first * pow(2, Double(max(0, min(attempt - 1, 30)))))
        return Int64(base * Double.random(in: 0.75...1.25))
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
