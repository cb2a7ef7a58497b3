import BillingCore
import Testing

@testable import BillingStore

/// The decisions both backends execute, tested without a database: the contract suite checks
/// that each backend runs them to the same ledger.
@Suite("The apply plan: what an event comes to, counted once for both backends")
struct ApplyPlanTests {
    static let configuration = ApplierConfiguration(maximumAttempts: 3, apiVersion: "2023-08-16")

    @Test("A drained event: ignored, written, stale or failing, each counted once with its API version")
    func drainCounts() {
        var tally = ApplyTally(configuration: Self.configuration, announces: true)
        #expect(tally.drain(.ignored, apiVersion: "2023-08-16") == .ignore)
        #expect(tally.drain(.recordOnly, apiVersion: "2024-06-20") == .write)
        tally.written(.recorded, .recordOnly, account: "", livemode: false)
        #expect(tally.drain(.failure("no data.object"), apiVersion: nil) == .fail("no data.object"))
        let retry = tally.failed(afterAttempts: 0, now: 1_000)
        #expect(retry.attempts == 1)
        #expect((retry.retryAt ?? 0) > 1_000)
        #expect(tally.drain(.failure("still broken"), apiVersion: nil) == .fail("still broken"))
        // The third failure of three allowed tries: dead, no next try.
        let last = tally.failed(afterAttempts: 2, now: 1_000)
        #expect(last.attempts == 3)
        #expect(last.retryAt == nil)

        var expected = ApplyPass()
        expected.processed = 4
        expected.ignored = 1
        expected.applied = 1
        expected.failed = 1
        expected.dead = 1
        expected.otherAPIVersion = 1
        expected.apiVersions = ["2024-06-20": 1]
        #expect(tally.pass == expected)
        #expect(tally.queued == 0)
        // A record-only event changes nobody's view.
        #expect(tally.touches.isEmpty)
    }

    @Test("A new delivery that did not decode is queued for the applier, not processed")
    func ingestQueuesFailures() {
        var tally = ApplyTally(configuration: Self.configuration, announces: true)
        #expect(tally.ingest(.failure("not JSON"), apiVersion: "2024-06-20") == .fail("not JSON"))
        #expect(tally.ingest(.ignored, apiVersion: "2023-08-16") == .ignore)
        #expect(tally.queued == 1)
        #expect(tally.pass.processed == 1)
        #expect(tally.pass.ignored == 1)
        #expect(tally.pass.otherAPIVersion == 0)
    }

    @Test("A write that changed the ledger announces the purchase's user; a stale one announces nothing")
    func writtenAnnounces() throws {
        let delivery = DecodedDelivery.appStore(.server(try Self.snapshot()))
        var announcing = ApplyTally(configuration: Self.configuration, announces: true)
        _ = announcing.drain(delivery, apiVersion: nil)
        announcing.written(.stale, delivery, account: InboxAccount.appStore(.sandbox).column, livemode: false)
        #expect(announcing.pass.stale == 1)
        #expect(announcing.touches.isEmpty)
        _ = announcing.drain(delivery, apiVersion: nil)
        announcing.written(.applied, delivery, account: InboxAccount.appStore(.sandbox).column, livemode: false)
        #expect(announcing.pass.applied == 1)
        #expect(announcing.touches.purchases == [.init(environment: "Sandbox", originalTransactionID: "2000000000000001")])

        var silent = ApplyTally(configuration: Self.configuration, announces: false)
        _ = silent.drain(delivery, apiVersion: nil)
        silent.written(.applied, delivery, account: InboxAccount.appStore(.sandbox).column, livemode: false)
        #expect(silent.pass.applied == 1)
        #expect(silent.touches.isEmpty)
    }

    @Test("An App Store notification merges its transaction and renewal, keeps its facts, then refreshes and ties by token")
    func appStoreNotificationPlan() throws {
        let notification = try AppStoreNotification(
            json: Array(#"{"notificationUUID":"u-1","notificationType":"REFUND_REVERSED","signedDate":1700000000000,"data":{"environment":"Sandbox"}}"#.utf8),
            transaction: Self.transactionJSON, renewalInfo: Self.renewalJSON)
        let plan = try #require(AppStoreApplyPlan(.notification(notification)))
        #expect(plan.originalTransactionID == "2000000000000001")
        #expect(plan.steps.map(Self.name) == ["transaction(reversal)", "renewal", "notification", "refreshSubscription", "tieByAccountToken"])
        #expect(plan.steps.filter(\.isMerge).count == 3)
    }

    @Test("A CONSUMPTION_REQUEST queues its refund request after the ties, so the request names the owner they leave; other types queue none")
    func consumptionRequestPlan() throws {
        let request = try AppStoreNotification(
            json: Array(#"{"notificationUUID":"u-3","notificationType":"CONSUMPTION_REQUEST","signedDate":1700000000000,"data":{"environment":"Sandbox","consumptionRequestReason":"UNINTENDED_PURCHASE"}}"#.utf8),
            transaction: Self.transactionJSON, renewalInfo: nil)
        #expect(request.consumptionRequestReason == "UNINTENDED_PURCHASE")
        let plan = try #require(AppStoreApplyPlan(.notification(request)))
        #expect(plan.steps.map(Self.name) == ["transaction", "notification", "refreshSubscription", "tieByAccountToken", "consumptionRequest(2000000000000002)"])
        #expect(plan.steps.filter(\.isMerge).count == 2)

        let refund = try AppStoreNotification(
            json: Array(#"{"notificationUUID":"u-4","notificationType":"REFUND","signedDate":1700000000000,"data":{"environment":"Sandbox"}}"#.utf8),
            transaction: Self.transactionJSON, renewalInfo: nil)
        #expect(try #require(AppStoreApplyPlan(.notification(refund))).steps.map(Self.name).contains { $0.hasPrefix("consumptionRequest") } == false)
    }

    @Test("A transaction the app forwarded is tied to its user under the ownership rule; the API's snapshot by token")
    func appStoreReportPlans() throws {
        let transaction = try AppStoreTransaction(json: Self.transactionJSON)
        let report = AppStoreAppTransaction(user: "user_1", ownership: .transfer, signedTransaction: "jws", transaction: transaction)
        let app = try #require(AppStoreApplyPlan(.app(report)))
        #expect(app.steps.map(Self.name) == ["transaction", "refreshSubscription", "tie(user_1, transfer)"])
        let server = try #require(AppStoreApplyPlan(.server(try Self.snapshot())))
        #expect(server.steps.map(Self.name) == ["transaction", "renewal", "refreshSubscription", "tieByAccountToken"])
    }

    @Test("A notification about no purchase is only recorded")
    func notificationOfNoPurchase() throws {
        let test = try AppStoreNotification(
            json: Array(#"{"notificationUUID":"u-2","notificationType":"TEST","signedDate":1700000000000}"#.utf8), transaction: nil, renewalInfo: nil)
        #expect(AppStoreApplyPlan(.notification(test)) == nil)
        #expect(AppStoreApplyPlan.effect(changed: true) == .applied)
        #expect(AppStoreApplyPlan.effect(changed: false) == .stale)
    }

    static let transactionJSON = Array(
        #"{"transactionId":"2000000000000002","originalTransactionId":"2000000000000001","productId":"com.example.pro.monthly","signedDate":1700000000000,"expiresDate":1702592000000}"#.utf8)
    static let renewalJSON = Array(#"{"originalTransactionId":"2000000000000001","autoRenewStatus":1,"signedDate":1700000000000}"#.utf8)

    static func snapshot() throws -> AppStoreServerSnapshot {
        AppStoreServerSnapshot(
            signedTransaction: "jws", transaction: try AppStoreTransaction(json: transactionJSON), signedRenewalInfo: "jws",
            renewalInfo: try AppStoreRenewalInfo(json: renewalJSON))
    }

    static func name(_ step: AppStoreApplyPlan.Step) -> String {
        switch step {
        case .transaction(_, let reversal): reversal ? "transaction(reversal)" : "transaction"
        case .renewal: "renewal"
        case .notification: "notification"
        case .refreshSubscription: "refreshSubscription"
        case .tie(let user, let rule): "tie(\(user), \(rule))"
        case .tieByAccountToken: "tieByAccountToken"
        case .consumptionRequest(_, let transaction): "consumptionRequest(\(transaction.transactionID))"
        }
    }
}

@Suite("A verified App Store notification carried to the apply step")
struct CarriedNotificationTests {
    typealias F = AppStoreFactory

    @Test("The commit applies the notification the webhook verified, equal to what its stored body decodes to")
    func carriedEqualsStored() throws {
        let body = F.notification("DID_RENEW", original: "21", transaction: "22", purchase: F.t0, expires: F.t0 + 30 * F.day, signed: F.t0)
        let delivery = try F.delivery(body)
        guard case .notification(let verified) = delivery.verifiedAppStore else {
            Issue.record("InboxDelivery.appStore carries no notification")
            return
        }
        let prepared = PreparedDelivery(delivery)
        let envelope = delivery.envelope
        let stored = DecodedDelivery.decode(
            source: delivery.source, type: envelope.type, eventID: envelope.id, created: envelope.created, body: body)
        guard case .appStore(.notification(let applied)) = prepared.decoded, case .appStore(.notification(let replayed)) = stored else {
            Issue.record("not decoded as an App Store notification: \(prepared.decoded), \(stored)")
            return
        }
        #expect(applied == verified)
        #expect(replayed == verified)
    }

    @Test("A notification of a type billingd does not apply is ignored, carried or read back")
    func unappliedTypeIgnored() throws {
        let body = F.notification("SUBSCRIPTION_PAUSED", original: "31", transaction: "31", purchase: F.t0, expires: F.t0 + F.day, signed: F.t0)
        let delivery = try F.delivery(body)
        #expect(delivery.envelope.type == "SUBSCRIPTION_PAUSED")
        guard case .ignored = PreparedDelivery(delivery).decoded else {
            Issue.record("a carried SUBSCRIPTION_PAUSED was not ignored")
            return
        }
        let envelope = delivery.envelope
        guard case .ignored = DecodedDelivery.decode(
            source: delivery.source, type: envelope.type, eventID: envelope.id, created: envelope.created, body: body)
        else {
            Issue.record("a stored SUBSCRIPTION_PAUSED was not ignored")
            return
        }
    }
}
