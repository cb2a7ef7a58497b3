import APITransport
import AppStoreAPI
import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import Logging
import Testing

@Suite("App Store reconcile against the App Store Server API")
struct AppStoreReconcilerTests {
    @Test("A recovered notification's body is the JSON Apple posts, byte for byte what JSONSerialization writes", arguments: [
        "eyJhbGciOiJFUzI1NiJ9.eyJub3RpZmljYXRpb25UeXBlIjoiVEVTVCJ9.c2lnbmF0dXJlLV9fLQ", "", "not/a \"jws\"\\ é",
    ])
    func recoveredBody(signedPayload: String) throws {
        let body = AppStoreReconciler.notificationBody(signedPayload: signedPayload)
        #expect(body == Array(try JSONSerialization.data(withJSONObject: ["signedPayload": signedPayload])))
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: String])
        #expect(decoded == ["signedPayload": signedPayload])
    }

    /// A fresh ledger in a temporary directory.
    final class Ledger: Sendable {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-appstore-\(UUID().uuidString).sqlite3").path
        let database: SQLiteDatabase

        init() throws { database = try SQLiteDatabase.open(path: path) }

        deinit {
            try? database.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
    }

    func reconciler(_ fixture: AppleClientFixture, _ ledger: Ledger) -> AppStoreReconciler {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return AppStoreReconciler(
            store: SQLiteLedgerStore(database: ledger.database), client: fixture.client, logger: logger,
            inbox: SQLiteInbox(database: ledger.database), applier: SQLiteApplier(database: ledger.database),
            holder: "test:\(UUID().uuidString)", now: { fixture.clock.withLock { $0 } })
    }

    static let emptyHistory = #"{"notificationHistory":[],"hasMore":false}"#

    @Test("A notification Apple never delivered is recovered and applied once; its late delivery is a duplicate; the cursor moves")
    func recoversMissedNotification() async throws {
        let pki = try AppStoreTestPKI()
        let signer = try AppleClientFixture(answers: [], pki: pki)
        let signedPayload = signer.signedNotification(uuid: "5b0a7c3e-0000-4000-8000-000000000001")
        let page = #"{"notificationHistory":[{"signedPayload":"\#(signedPayload)","sendAttempts":[{"attemptDate":1789999000000,"sendAttemptResult":"NO_RESPONSE"}]}],"hasMore":false}"#
        let fixture = try AppleClientFixture(answers: [answer(200, page), answer(200, Self.emptyHistory)], pki: pki)
        let ledger = try Ledger()
        var options = AppStoreReconciler.Options()
        options.applyRecoveredEvents = true

        let first = try await reconciler(fixture, ledger).run(options)
        #expect(first.notifications.listed == 1)
        #expect(first.notifications.recovered == 1)
        #expect(first.notifications.neverDelivered == 1)
        #expect(first.notifications.applied == 1)
        let held = try await SQLiteAppStore(database: ledger.database).record(environment: "Sandbox", originalTransactionID: "2000000000000001")
        #expect(held?.productID == "com.example.pro.monthly")

        // Apple's delivery turns up after all: the inbox already has it.
        let verified = try await fixture.client.verifier.verifyNotification(signedPayload)
        let notification = try AppStoreNotification(json: verified.payload, transaction: verified.transaction?.payload, renewalInfo: verified.renewalInfo?.payload)
        let late = InboxDelivery.appStore(notification, body: Array(#"{"signedPayload":"\#(signedPayload)"}"#.utf8), receivedAt: 1_790_000_100_000)
        #expect(try await SQLiteInbox(database: ledger.database).insert([late]) == [.duplicate])

        fixture.clock.withLock { $0 += 86_400 }
        let second = try await reconciler(fixture, ledger).run(options)
        #expect(second.notifications.recovered == 0)
        let body = try JSONSerialization.jsonObject(with: Data(fixture.transport.requests[1].body)) as? [String: Any]
        #expect((body?["startDate"] as? NSNumber)?.int64Value == Int64(1_790_000_000 - 3600) * 1000)
        #expect(second.notifications.from == 1_790_000_000 - 3600)
    }

    @Test("An active subscription whose expiry passed without a renewal is repaired from Get All Subscription Statuses")
    func repairsStaleSubscription() async throws {
        let pki = try AppStoreTestPKI()
        let signer = try AppleClientFixture(answers: [], pki: pki)
        // The app reported a period ending an hour before now; the renewal notification never came.
        let reported = signer.signedTransaction(
            id: "2000000000000001", original: "2000000000000001", expires: 1_789_996_400_000, signedDate: 1_787_400_000_000)
        let renewed = signer.signedTransaction(
            id: "2000000000000002", original: "2000000000000001", expires: 1_792_588_400_000, signedDate: 1_789_996_500_000)
        let statuses = #"{"environment":"Sandbox","bundleId":"com.example.app","data":[{"subscriptionGroupIdentifier":"21000001","lastTransactions":[{"originalTransactionId":"2000000000000001","status":1,"signedTransactionInfo":"\#(renewed)"}]}]}"#
        let fixture = try AppleClientFixture(answers: [answer(200, Self.emptyHistory), answer(200, statuses)], pki: pki)
        let ledger = try Ledger()
        let transaction = try AppStoreTransaction(json: try AppStoreJWS.payload(of: reported))
        _ = try await SQLiteAppStore(database: ledger.database).record(
            [AppStoreAppTransaction(user: "user_42", ownership: .keep, signedTransaction: reported, transaction: transaction)], receivedAt: 1_787_400_000_000)

        let report = try await reconciler(fixture, ledger).run(AppStoreReconciler.Options())
        #expect(report.subscriptions.candidates == ["expired_while_active": 1])
        #expect(report.subscriptions.statusDiffers == 1)
        #expect(report.subscriptions.repaired == 1)
        #expect(report.subscriptions.examples.first?.ledgerStatus == "expired")
        #expect(report.subscriptions.examples.first?.appleStatus == "active")
        #expect(fixture.transport.requests[1].url == "https://apple.test/inApps/v1/subscriptions/2000000000000001")
        let held = try await SQLiteAppStore(database: ledger.database).subscription(environment: "Sandbox", originalTransactionID: "2000000000000001")
        #expect(held?.0.transactionID == "2000000000000002")
        #expect(held?.0.expiresDate == 1_792_588_400_000)
        #expect(held?.owner == "user_42")
    }

    @Test("A first walk starts a day inside Apple's window (30 days in the Sandbox), so that its later pages are not refused as too far in the past")
    func firstWalkKeepsAMargin() async throws {
        let fixture = try AppleClientFixture(answers: [answer(200, Self.emptyHistory)])
        let ledger = try Ledger()
        let report = try await reconciler(fixture, ledger).run(AppStoreReconciler.Options())
        let body = try JSONSerialization.jsonObject(with: Data(fixture.transport.requests[0].body)) as? [String: Any]
        #expect((body?["startDate"] as? NSNumber)?.int64Value == Int64(1_790_000_000 - 29 * 86_400) * 1000)
        #expect(report.notifications.from == 1_790_000_000 - 29 * 86_400)
        #expect(report.notifications.warning == nil)
    }

    @Test("A run while another holds the lease does nothing and says who holds it")
    func leaseShared() async throws {
        let fixture = try AppleClientFixture(answers: [])
        let ledger = try Ledger()
        try await SQLiteReconcileRuns(database: ledger.database).acquire(Reconciler.leaseName, holder: "cron:1", ttl: 120, now: 1_790_000_000)
        await #expect(throws: LeaseHeld.self) { try await reconciler(fixture, ledger).run(AppStoreReconciler.Options()) }
        #expect(fixture.transport.requests.isEmpty)
    }
}
