import APITransport
import AppStoreAPI
import AppStoreFake
import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Crypto
import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// billingd's App Store side against AppStoreFake on loopback: the ES256 token, libcurl and the
/// fake's signed answers for real, with the ledger and the service API of the real application.
final class FakeAppleHarness: Sendable {
    static let issuerID = "57246542-96fe-1a63-e053-0824d011072a"
    static let keyID = "2X9R4HXF34"
    let key = P256.Signing.PrivateKey()
    let fake: AppStoreFake
    let verifier: AppStoreVerifier
    let client: AppStoreClient
    let ledger: TemporaryLedger

    init() async throws {
        fake = try await AppStoreFake.start(.init(
            issuerID: Self.issuerID, keyID: Self.keyID, bundleID: AppStoreTestbed.bundleID, publicKey: key.publicKey,
            environment: .sandbox, appAppleID: AppStoreTestbed.appAppleID))
        verifier = try AppStoreVerifier(.init(
            bundleID: AppStoreTestbed.bundleID, appAppleID: AppStoreTestbed.appAppleID, environments: [.production, .sandbox],
            rootCertificates: [fake.pki.rootDER]))
        client = AppStoreClient(
            configuration: AppStoreClientConfiguration(
                issuerID: Self.issuerID, keyID: Self.keyID, privateKey: key, bundleID: AppStoreTestbed.bundleID,
                environment: .sandbox, baseURL: fake.baseURL, retryBaseDelay: .milliseconds(5)),
            verifier: verifier, transport: CurlTransport(maxConnections: 2))
        ledger = try TemporaryLedger()
    }

    func stop() async {
        await fake.stop()
        ledger.remove()
    }

    /// The application with App Store support on, and the Server API client unless `clients` is
    /// false; legacy receipts verify to the fake's PKI, which signs them in ``signedReceipt(_:)``.
    func application(clients: Bool = true, ownership: AppStoreOwnershipRule = .keep) throws -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [userAPIToken]
        dependencies.plans = try fixtureCatalog("free-pro-enterprise")
        dependencies.scope = .test
        dependencies.appStoreVerifier = verifier
        dependencies.appStoreOwnership = ownership
        dependencies.appStoreClients = clients ? [.sandbox: client] : [:]
        dependencies.appStoreReceiptVerifier = try AppStoreReceiptVerifier(rootCertificates: [fake.pki.rootDER])
        return makeApplication(dependencies)
    }

    /// A StoreKit 1 app receipt naming `purchase`, signed as Apple would (by the fake's PKI).
    func signedReceipt(_ purchase: AppStoreFake.Purchase?, bundleID: String = AppStoreTestbed.bundleID) -> String {
        Self.receipt(purchase, bundleID: bundleID, signer: fake.pki.receiptSigner)
    }

    /// A reconcile of the Sandbox that applies what it recovers, on the fake's clock.
    func reconciler() -> AppStoreReconciler {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let clock = fake.clock
        return AppStoreReconciler(
            store: ledger.store, client: client, logger: logger, inbox: SQLiteInbox(database: ledger.database),
            applier: SQLiteApplier(database: ledger.database),
            holder: "test:\(UUID().uuidString)", now: { clock.now / 1000 })
    }

    func reconcile(since: Int64? = nil) async throws -> AppStoreReconcileReport {
        var options = AppStoreReconciler.Options()
        options.applyRecoveredEvents = true
        options.since = since
        return try await reconciler().run(options)
    }

    /// What the ledger holds for a Sandbox purchase.
    func record(_ original: String) async throws -> AppStoreSubscriptionRecord? {
        try await SQLiteAppStore(database: ledger.database).record(environment: "Sandbox", originalTransactionID: original)
    }

    /// The app user the ledger ties a Sandbox purchase to.
    func owner(_ original: String) async throws -> String? {
        try await SQLiteAppStore(database: ledger.database).subscription(environment: "Sandbox", originalTransactionID: original)?.owner
    }

    /// The transaction the fake would sign now for `id`, decoded.
    func transaction(_ id: String) async throws -> AppStoreTransaction {
        let jws = try #require(await fake.signedTransaction(transactionID: id))
        return try AppStoreTransaction(json: try AppStoreJWS.payload(of: jws))
    }

    /// The signed payload of the fake's notification of `type` for `original`, as Apple would POST it.
    func notificationBody(_ type: String, original: String) async throws -> ByteBuffer {
        let notification = try #require(
            await fake.notificationHistory.first { $0.notificationType == type && $0.originalTransactionID == original })
        return ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: ["signedPayload": notification.signedPayload]))
    }

    /// A StoreKit 1 app receipt naming `purchase`, base64 as an app sends it; unsigned (as anyone
    /// can make one) unless a signer is given.
    static func receipt(
        _ purchase: AppStoreFake.Purchase?, bundleID: String = AppStoreTestbed.bundleID, signer: AppStoreSampleReceipt.Signer? = nil
    ) -> String {
        let inApp = purchase.map {
            [AppStoreReceipt.InAppPurchase(
                transactionID: $0.transactionID, originalTransactionID: $0.originalTransactionID, productID: $0.productID,
                purchaseDate: $0.purchaseDate, expiresDate: $0.expiresDate)]
        }
        return Data(AppStoreSampleReceipt.make(bundleID: bundleID, inApp: inApp ?? [], signer: signer)).base64EncodedString()
    }
}

@Suite("The App Store against AppStoreFake: legacy receipts, restore by history and reconcile")
struct AppStoreFakeEndToEndTests {
    @Test("A legacy receipt is looked up in the purchase's history, which entitles the user; nobody else can claim it")
    func legacyReceipt() async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        await apple.fake.advance(by: .seconds(301))  // a Sandbox month: renewed once
        let renewal = try await apple.transaction(try #require(await apple.fake.transactionIDs(originalTransactionID: purchase.originalTransactionID).last))
        let receipt = apple.signedReceipt(purchase)

        try await apple.application().test(.router) { client in
            let restored = try await postJSON(client, "/v1/users/user_1/appstore/receipts", ["receipt_data": receipt])
            #expect(restored.status == .ok, "\(restored.text)")
            #expect(restored.json["receipt_verified"] as? Bool == true)
            #expect(restored.json["plan"] as? String == "pro")
            #expect(restored.json["source"] as? String == "app_store")
            #expect(restored.json["restored_count"] as? Int == 1)
            #expect(restored.json["original_transaction_id"] as? String == purchase.originalTransactionID)

            let other = try await postJSON(client, "/v1/users/user_2/appstore/receipts", ["receipt_data": receipt])
            #expect(other.status == .ok)
            #expect(other.json["restored_count"] as? Int == 0)
            #expect(other.json["subscribed"] as? Bool == false)
            #expect((other.json["not_restored"] as? [[String: Any]])?.first?["code"] as? String == "transaction_owned_by_other_user")

            let nothingBought = try await postJSON(client, "/v1/users/user_3/appstore/receipts", ["receipt_data": FakeAppleHarness.receipt(nil)])
            #expect(nothingBought.status == .ok)
            #expect(nothingBought.json["restored_count"] as? Int == 0)
            #expect(nothingBought.json["plan"] as? String == "free")
        }
        // The whole history is in the ledger: the purchase and its renewal, owned by user_1.
        let held = try #require(try await apple.record(purchase.originalTransactionID))
        #expect(try await apple.owner(purchase.originalTransactionID) == "user_1")
        #expect(held.transactionID == renewal.transactionID)
        #expect(held.expiresDate == renewal.expiresDate)
        #expect(try await SQLiteInbox(database: apple.ledger.database).count() == 2)
        #expect(await apple.fake.requests(matching: .path("/inApps/v2/history")).count >= 2)
        await apple.stop()
    }

    @Test("Receipts that cannot be restored get a JSON error that says why", arguments: [
        ("not a receipt", 400, "invalid_receipt"),
        ("another app", 400, "invalid_receipt"),
        ("unknown to Apple", 400, "receipt_transaction_not_found"),
        ("no API key", 503, "appstore_api_not_configured"),
        ("Apple down", 503, "appstore_unavailable"),
    ])
    func refusedReceipts(_ case: String, status: Int, code: String) async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        var receipt = apple.signedReceipt(purchase)
        switch `case` {
        case "not a receipt": receipt = Data("MIIT: a receipt, honest".utf8).base64EncodedString()
        case "another app": receipt = FakeAppleHarness.receipt(purchase, bundleID: "com.example.other")
        case "unknown to Apple":
            var unknown = AppStoreReceipt.InAppPurchase(transactionID: "2000009999999999", originalTransactionID: nil, productID: "com.example.pro.monthly")
            unknown.purchaseDate = purchase.purchaseDate
            receipt = Data(AppStoreSampleReceipt.make(bundleID: AppStoreTestbed.bundleID, inApp: [unknown], signer: apple.fake.pki.receiptSigner))
                .base64EncodedString()
        case "Apple down": await apple.fake.inject(.status(503), times: 20, matching: .path("/inApps/v2/history"))
        default: break
        }
        let body = receipt
        try await apple.application(clients: `case` != "no API key").test(.router) { client in
            let response = try await postJSON(client, "/v1/users/user_1/appstore/receipts", ["receipt_data": body])
            // What the fake was asked and how it answered, to explain a failure.
            let seen = await apple.fake.requests.map { "\($0.method) \($0.path) \($0.fault ?? $0.tokenRefusal.map { "\($0)" } ?? "answered")" }
            #expect(Int(response.status.code) == status, "\(response.text); the fake saw \(seen)")
            #expect(response.errorCode == code)
            if code == "appstore_unavailable" { #expect(response.headers[.retryAfter] != nil) }
        }
        #expect(try await apple.record(purchase.originalTransactionID) == nil)
        await apple.stop()
    }

    @Test("Restore by history: one reported transaction brings the purchase's every period into the ledger")
    func restoreByHistory() async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        await apple.fake.advance(by: .seconds(601))  // two Sandbox months
        let ids = await apple.fake.transactionIDs(originalTransactionID: purchase.originalTransactionID)
        #expect(ids.count == 3)
        try await apple.application().test(.router) { client in
            // The app forwards the first purchase only, as an app that was offline for months would.
            let response = try await postJSON(client, "/v1/users/user_1/appstore/transactions", ["signed_transaction": purchase.signedTransaction])
            #expect(response.status == .ok, "\(response.text)")
        }
        let held = try #require(try await apple.record(purchase.originalTransactionID))
        #expect(held.transactionID == ids.last)
        #expect(try await apple.owner(purchase.originalTransactionID) == "user_1")
        #expect(try await SQLiteInbox(database: apple.ledger.database).count() == 4)
        await apple.stop()
    }

    @Test("A notification the fake never delivered is recovered by reconcile and applied once, though it then arrives")
    func missedNotificationRecovered() async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        await apple.fake.advance(by: .seconds(2))  // the walk ends at the whole second before now
        let report = try await apple.reconcile()
        #expect(report.notifications.recovered == 1)
        #expect(report.notifications.neverDelivered == 1)
        #expect(report.notifications.applied == 1)
        let held = try #require(try await apple.record(purchase.originalTransactionID))
        #expect(held.status(now: apple.fake.now) == .active)
        let inbox = SQLiteInbox(database: apple.ledger.database)
        #expect(try await inbox.count() == 1)

        // Apple's retry turns up after all: accepted, and the inbox already had it.
        let late = try await apple.notificationBody("SUBSCRIBED", original: purchase.originalTransactionID)
        try await apple.application().test(.router) { client in
            let response = try await client.execute(
                uri: "/webhooks/appstore", method: .post, headers: [.contentType: "application/json"],
                body: late)
            #expect(response.status == .ok, "\(response.text)")
        }
        #expect(try await inbox.count() == 1)
        let again = try await apple.reconcile()
        #expect(again.notifications.recovered == 0)
        await apple.stop()
    }

    @Test("A subscription active by notification whose expiry passed is repaired from Get All Subscription Statuses")
    func staleSubscriptionRepaired() async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        let subscribed = try await apple.notificationBody("SUBSCRIBED", original: purchase.originalTransactionID)
        try await apple.application().test(.router) { client in
            let response = try await client.execute(
                uri: "/webhooks/appstore", method: .post, headers: [.contentType: "application/json"],
                body: subscribed)
            #expect(response.status == .ok, "\(response.text)")
        }
        try await SQLiteApplier(database: apple.ledger.database).drain()
        // A Sandbox month passes; the renewal's notification is lost, and the walk starts after it.
        await apple.fake.advance(by: .seconds(301))
        let renewal = try await apple.transaction(try #require(await apple.fake.transactionIDs(originalTransactionID: purchase.originalTransactionID).last))
        #expect(try await apple.record(purchase.originalTransactionID)?.expiresDate == purchase.expiresDate)

        let report = try await apple.reconcile(since: apple.fake.now / 1000)
        #expect(report.notifications.recovered == 0)
        #expect(report.subscriptions.candidates.values.reduce(0, +) == 1)
        // By its dates the ledger says expired; Apple says active, with the next period's expiry.
        #expect(report.subscriptions.statusDiffers == 1, "\(report)")
        let drift = try #require(report.subscriptions.examples.first)
        #expect(drift.ledgerStatus == "expired")
        #expect(drift.appleStatus == "active")
        #expect(drift.appleExpiresDate == renewal.expiresDate)
        #expect(report.subscriptions.repaired == 1)
        let held = try #require(try await apple.record(purchase.originalTransactionID))
        #expect(held.transactionID == renewal.transactionID)
        #expect(held.expiresDate == renewal.expiresDate)
        #expect(held.status(now: apple.fake.now) == .active)
        #expect(await apple.fake.requests(matching: .path("/inApps/v1/subscriptions")).count == 1)

        // Repaired, the subscription is no longer a candidate.
        let next = try await apple.reconcile(since: apple.fake.now / 1000)
        #expect(next.subscriptions.candidates.values.reduce(0, +) == 0)
        await apple.stop()
    }
}

@Suite(
    "billingd appstore lookup, reconcile and test-notification: the built binary against AppStoreFake",
    .needsBillingdBinary
)
struct AppStoreCommandTests {
    /// The settings that point the built billingd at the harness's fake, key and ledger.
    private func environment(_ apple: FakeAppleHarness) throws -> [String: String] {
        let directory = apple.ledger.directory
        let keyPath = directory.appendingPathComponent("SubscriptionKey_\(FakeAppleHarness.keyID).p8").path
        #expect(FileManager.default.createFile(atPath: keyPath, contents: Data(apple.key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600]))
        let rootPath = directory.appendingPathComponent("fake-root.der").path
        try Data(apple.fake.pki.rootDER).write(to: URL(fileURLWithPath: rootPath))
        return [
            "BILLINGD_DATABASE": directory.appendingPathComponent("ledger.sqlite3").path, "BILLINGD_LOG_LEVEL": "trace",
            "APPSTORE_BUNDLE_ID": AppStoreTestbed.bundleID, "APPSTORE_APP_APPLE_ID": String(AppStoreTestbed.appAppleID),
            "APPSTORE_ENVIRONMENTS": "Sandbox", "APPSTORE_ROOT_CERTIFICATES": rootPath, "APPSTORE_ISSUER_ID": FakeAppleHarness.issuerID,
            "APPSTORE_KEY_ID": FakeAppleHarness.keyID, "APPSTORE_PRIVATE_KEY": keyPath, "APPSTORE_API_BASE": apple.fake.baseURL,
        ]
    }

    @Test("Support finds the app user of an order id; reconcile recovers what was never delivered; the key and tokens stay out of the output")
    func lookupAndReconcile() async throws {
        let apple = try await FakeAppleHarness()
        let environment = try environment(apple)
        // Bought seconds ago: billingd's walk ends at the whole second before its own clock.
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly", at: apple.fake.now - 10_000)
        let renewed = try await apple.fake.subscribe(productID: "com.example.pro.yearly", at: apple.fake.now - 5_000)
        try await apple.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/users/user_1/appstore/transactions", ["signed_transaction": purchase.signedTransaction])
            #expect(response.status == .ok, "\(response.text)")
        }

        let lookup = try await billingd(["appstore", "lookup", purchase.orderID, "--json"], environment: environment)
        #expect(lookup.status == 0, "\(lookup.stderr)")
        let found = try JSONSerialization.jsonObject(with: Data(lookup.stdout.utf8)) as? [String: Any]
        let row = try #require((found?["transactions"] as? [[String: Any]])?.first)
        #expect(row["original_transaction_id"] as? String == purchase.originalTransactionID)
        #expect(row["app_user_id"] as? String == "user_1")
        #expect(row["environment"] as? String == "Sandbox")

        let unknown = try await billingd(["appstore", "lookup", "MK5TTTVWJH"], environment: environment)
        #expect(unknown.status == 1)
        #expect(unknown.stdout.contains("knows no order MK5TTTVWJH"), "\(unknown.stdout)")

        // The second purchase was never delivered nor reported: reconcile finds it (exit 0: the run completed).
        let reconcile = try await billingd(["appstore", "reconcile", "--json"], environment: environment)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        let reports = try JSONSerialization.jsonObject(with: Data(reconcile.stdout.utf8)) as? [[String: Any]]
        let notifications = try #require(reports?.first?["notifications"] as? [String: Any])
        #expect(notifications["recovered"] as? Int == 2, "\(reconcile.stdout)")
        #expect(try await apple.record(renewed.originalTransactionID) != nil)

        // Trace logging, and still no secret: neither the key nor a token billingd signed.
        let output = lookup.stdout + lookup.stderr + reconcile.stdout + reconcile.stderr
        #expect(lookup.stderr.contains("App Store") || reconcile.stderr.contains("appstore"), "trace logs were written")
        let keyBody = apple.key.pemRepresentation.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        for line in keyBody { #expect(!output.contains(line)) }
        #expect(!output.contains(Data(apple.key.rawRepresentation).base64EncodedString()))
        #expect(!output.contains("Bearer"))
        #expect(!output.contains(#"eyJhbGciOiJFUzI1NiIs"#), "no ES256 token in the output")
        #expect(await apple.fake.refusedTokens.isEmpty)
        await apple.stop()
    }

    @Test("test-notification: Apple's TEST notification reaches the inbox of the billingd serving this ledger; exit 0")
    func testNotificationArrives() async throws {
        let apple = try await FakeAppleHarness()
        let environment = try environment(apple)
        try await apple.application().test(.live) { client in
            // App Store Connect's server URL: the live billingd on this ledger.
            await apple.fake.setNotificationURL("http://127.0.0.1:\(try #require(client.port))/webhooks/appstore")
            let result = try await billingd(["appstore", "test-notification", "--timeout", "60"], environment: environment)
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("Apple accepted the request (Sandbox)"), "\(result.stdout)")
            #expect(result.stdout.contains("Received: notification"), "\(result.stdout)")
        }
        let stored = try await apple.ledger.database.writer.read { db in
            try String.fetchAll(db, sql: "SELECT type FROM inboxEvent WHERE account = 'appstore:Sandbox'")
        }
        #expect(stored == ["TEST"])
        await apple.stop()
    }
}

@Suite("Legacy receipts: only a receipt Apple signed claims or moves a purchase (issue 39)")
struct UnverifiedReceiptTests {
    static func notRestored(_ response: TestResponse) -> [String: String] {
        var codes: [String: String] = [:]
        for entry in response.json["not_restored"] as? [[String: Any]] ?? [] {
            codes[entry["original_transaction_id"] as? String ?? "?"] = entry["code"] as? String
        }
        return codes
    }

    @Test("An unsigned receipt claims no purchase that is tied to nobody, and costs no App Store Server API call")
    func unsignedClaimsNothing() async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        let forged = FakeAppleHarness.receipt(purchase)
        try await apple.application(ownership: .keep).test(.router) { client in
            let response = try await postJSON(client, "/v1/users/mallory/appstore/receipts", ["receipt_data": forged])
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["restored_count"] as? Int == 0)
            #expect(response.json["plan"] as? String == "free")
            #expect(response.json["receipt_verified"] as? Bool == false)
            #expect((response.json["receipt_problem"] as? [String: Any])?["code"] as? String == "unsigned_receipt")
            #expect(Self.notRestored(response) == [purchase.originalTransactionID: "receipt_not_verified"])
        }
        #expect(try await apple.owner(purchase.originalTransactionID) == nil)
        #expect(try await apple.record(purchase.originalTransactionID) == nil)
        #expect(await apple.fake.requests(matching: .path("/inApps/v2/history")).isEmpty)
        await apple.stop()
    }

    @Test("With APPSTORE_OWNERSHIP=transfer an unsigned receipt does not take another user's purchase; a signed one does")
    func unsignedTransfersNothing() async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        try await apple.application(ownership: .transfer).test(.router) { client in
            let victim = try await postJSON(client, "/v1/users/victim/appstore/receipts", ["receipt_data": apple.signedReceipt(purchase)])
            #expect(victim.json["plan"] as? String == "pro", "\(victim.text)")
            let historyCalls = await apple.fake.requests(matching: .path("/inApps/v2/history")).count

            let forged = try await postJSON(
                client, "/v1/users/mallory/appstore/receipts", ["receipt_data": FakeAppleHarness.receipt(purchase)])
            #expect(forged.status == .ok, "\(forged.text)")
            #expect(forged.json["plan"] as? String == "free")
            #expect(Self.notRestored(forged) == [purchase.originalTransactionID: "receipt_not_verified"])
            #expect(try await apple.owner(purchase.originalTransactionID) == "victim")
            #expect(await apple.fake.requests(matching: .path("/inApps/v2/history")).count == historyCalls)

            // Apple's signature is proof: the signed receipt moves it, as before.
            let signed = try await postJSON(client, "/v1/users/mallory/appstore/receipts", ["receipt_data": apple.signedReceipt(purchase)])
            #expect(signed.json["plan"] as? String == "pro", "\(signed.text)")
        }
        #expect(try await apple.owner(purchase.originalTransactionID) == "mallory")
        await apple.stop()
    }

    @Test("The owner's own unsigned receipt still restores the purchase, with its newer periods")
    func unsignedOwnerRestores() async throws {
        let apple = try await FakeAppleHarness()
        let purchase = try await apple.fake.subscribe(productID: "com.example.pro.monthly")
        try await apple.application().test(.router) { client in
            let first = try await postJSON(client, "/v1/users/user_1/appstore/receipts", ["receipt_data": apple.signedReceipt(purchase)])
            #expect(first.json["restored_count"] as? Int == 1, "\(first.text)")
            await apple.fake.advance(by: .seconds(301))  // a Sandbox month: renewed once
            let again = try await postJSON(client, "/v1/users/user_1/appstore/receipts", ["receipt_data": FakeAppleHarness.receipt(purchase)])
            #expect(again.status == .ok, "\(again.text)")
            #expect(again.json["receipt_verified"] as? Bool == false)
            #expect(again.json["restored_count"] as? Int == 1)
            #expect(Self.notRestored(again).isEmpty)
            #expect(again.json["plan"] as? String == "pro")
        }
        let renewal = try #require(await apple.fake.transactionIDs(originalTransactionID: purchase.originalTransactionID).last)
        #expect(try await apple.record(purchase.originalTransactionID)?.transactionID == renewal)
        #expect(try await apple.owner(purchase.originalTransactionID) == "user_1")
        await apple.stop()
    }

    @Test("A receipt naming a transaction id that is not digits is refused before any API call", arguments: [
        ".", "..", "../../v1/lookup", "2000000000000001/..", "%2e%2e",
    ])
    func malformedTransactionID(_ id: String) async throws {
        let apple = try await FakeAppleHarness()
        let purchase = AppStoreReceipt.InAppPurchase(transactionID: id, originalTransactionID: nil, productID: "com.example.pro.monthly")
        let receipt = Data(AppStoreSampleReceipt.make(bundleID: AppStoreTestbed.bundleID, inApp: [purchase], signer: apple.fake.pki.receiptSigner))
            .base64EncodedString()
        try await apple.application().test(.router) { client in
            let response = try await postJSON(client, "/v1/users/user_1/appstore/receipts", ["receipt_data": receipt])
            #expect(response.status == .badRequest, "\(response.text)")
            #expect(response.errorCode == "invalid_receipt")
        }
        #expect(await apple.fake.requests(matching: .path("/inApps/v2/history")).isEmpty)
        await apple.stop()
    }

    @Test("The App Store Server API client never puts . or .. or a non-digit transaction id into a path")
    func clientRefusesDotSegments() async throws {
        let apple = try await FakeAppleHarness()
        for id in [".", "..", "abc", "1/2", ""] {
            let history = await #expect(throws: AppStoreAPIError.self) { try await apple.client.transactionHistory(transactionID: id) }
            #expect(history?.kind == .invalidRequest)
            #expect(history?.attempts == 0)
            let info = await #expect(throws: AppStoreAPIError.self) { try await apple.client.transactionInfo(transactionID: id) }
            #expect(info?.kind == .invalidRequest)
        }
        for id in [".", ".."] {
            let order = await #expect(throws: AppStoreAPIError.self) { try await apple.client.lookUpOrder(orderID: id) }
            #expect(order?.kind == .invalidRequest)
        }
        #expect(await apple.fake.requests(matching: .any).isEmpty)
        await apple.stop()
    }

    @Test("An empty restore answers in the mode of the accepted environments: Sandbox-only is test mode", arguments: [
        (Set([AppStoreEnvironment.sandbox]), false), (Set([AppStoreEnvironment.production, .sandbox]), true),
    ])
    func emptyRestoreMode(_ environments: Set<AppStoreEnvironment>, livemode: Bool) async throws {
        let pki = try AppStoreTestPKI()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [userAPIToken]
        dependencies.appStoreVerifier = try AppStoreVerifier(.init(
            bundleID: AppStoreTestbed.bundleID, appAppleID: AppStoreTestbed.appAppleID, environments: environments,
            rootCertificates: [pki.rootDER]))
        dependencies.appStoreReceiptVerifier = try AppStoreReceiptVerifier(rootCertificates: [pki.rootDER])
        let emptyReceipt = Data(AppStoreSampleReceipt.make(
            bundleID: AppStoreTestbed.bundleID, inApp: [], receiptType: "Production", signer: pki.receiptSigner)).base64EncodedString()
        try await makeApplication(dependencies).test(.router) { client in
            let restore = try await postJSON(client, "/v1/users/user_1/appstore/restore", ["transactions": [String]()])
            #expect(restore.status == .ok, "\(restore.text)")
            #expect(restore.json["livemode"] as? Bool == livemode)
            let receipt = try await postJSON(client, "/v1/users/user_1/appstore/receipts", ["receipt_data": emptyReceipt])
            #expect(receipt.status == .ok, "\(receipt.text)")
            #expect(receipt.json["livemode"] as? Bool == livemode)
            #expect(receipt.json["restored_count"] as? Int == 0)
        }
    }
}
