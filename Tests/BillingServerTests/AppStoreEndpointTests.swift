import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// An App Store set-up for endpoint tests: a test PKI of Apple's shape that the verifier trusts
/// instead of Apple's root, and helpers that sign notifications and transactions with it.
struct AppStoreTestbed {
    static let bundleID = "com.example.app"
    static let appAppleID: Int64 = 1_234_567_890
    let pki: AppStoreTestPKI
    let verifier: AppStoreVerifier
    /// Unix milliseconds; the samples are signed around it.
    let now: Int64

    init(ownership: AppStoreOwnershipRule = .keep) throws {
        pki = try AppStoreTestPKI()
        verifier = try AppStoreVerifier(.init(
            bundleID: Self.bundleID, appAppleID: Self.appAppleID, environments: [.production, .sandbox], rootCertificates: [pki.rootDER]))
        now = Int64(Date().timeIntervalSince1970 * 1000)
    }

    func sample(
        _ type: String, _ subtype: String? = nil, original: String, product: String = "com.example.pro.monthly",
        environment: AppStoreEnvironment = .sandbox, token: String? = nil, at time: Int64? = nil
    ) -> AppStoreSampleNotification {
        AppStoreSampleNotification(
            type: type, subtype: subtype, productID: product, originalTransactionID: original, bundleID: Self.bundleID,
            environment: environment, appAppleID: Self.appAppleID, appAccountToken: token, now: time ?? now)
    }

    func body(_ sample: AppStoreSampleNotification, signer: AppStoreTestPKI? = nil) -> [UInt8] {
        let jws = sample.signedPayload((signer ?? pki).sign(payload:))
        return Array(try! JSONSerialization.data(withJSONObject: ["signedPayload": jws]))
    }

    func signedTransaction(_ sample: AppStoreSampleNotification) -> String {
        pki.sign(payload: sample.transactionJSON)
    }

    func application(
        _ ledger: TemporaryLedger, catalog: PlanCatalog, ownership: AppStoreOwnershipRule = .keep, scope: ServiceScope = .test
    ) -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [userAPIToken]
        dependencies.plans = catalog
        dependencies.scope = scope
        dependencies.appStoreVerifier = verifier
        dependencies.appStoreOwnership = ownership
        return makeApplication(dependencies)
    }
}

let jsonHeaders: HTTPFields = [.authorization: "Bearer \(userAPIToken)", .contentType: "application/json"]

func postJSON(_ client: some TestClientProtocol, _ path: String, _ object: [String: Any]) async throws -> TestResponse {
    try await client.execute(
        uri: path, method: .post, headers: jsonHeaders,
        body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: object)))
}

@Suite("POST /webhooks/appstore")
struct AppStoreWebhookTests {
    @Test("A genuine notification is stored once, applied, and ties the purchase through the appAccountToken")
    func storedAppliedAndTied() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let token = try await SQLiteAppStore(database: ledger.database).accountToken(for: "user_42")
        let body = bed.body(bed.sample("SUBSCRIBED", "INITIAL_BUY", original: "2000000001", token: token))
        try await bed.application(ledger, catalog: try fixtureCatalog("free-pro-enterprise")).test(.router) { client in
            let first = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: body))
            #expect(first.status == .ok, "\(first.text)")
            #expect(first.json["duplicate"] as? Bool == false)
            let again = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: body))
            #expect(again.json["duplicate"] as? Bool == true, "Apple's retry is a duplicate")
            #expect(try await SQLiteInbox(database: ledger.database).count() == 1)
            _ = try await SQLiteApplier(database: ledger.database).drain()
            let view = try await client.execute(uri: "/v1/users/user_42/subscription", method: .get, headers: authorized)
            #expect(view.json["subscribed"] as? Bool == true, "\(view.text)")
            #expect(view.json["plan"] as? String == "pro")
            #expect(view.json["source"] as? String == "app_store")
            #expect(view.json["status"] as? String == "active")
            #expect(view.json["environment"] as? String == "Sandbox")
            #expect(view.json["will_renew"] as? Bool == true)
            #expect(view.json["product_id"] as? String == "com.example.pro.monthly")
        }
    }

    @Test("Data that is not genuine is refused with its code and nothing is stored", arguments: [
        "foreign_root", "wrong_bundle", "production_wrong_app", "not_a_jws", "no_signed_payload",
    ])
    func refused(_ case: String) async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var sample = bed.sample("SUBSCRIBED", "INITIAL_BUY", original: "2000000002")
        var body: [UInt8]
        let expected: String
        switch `case` {
        case "foreign_root":
            body = bed.body(sample, signer: try AppStoreTestPKI())
            expected = "untrusted_chain"
        case "wrong_bundle":
            sample.bundleID = "com.attacker.app"
            sample.transaction["bundleId"] = "com.attacker.app"
            body = bed.body(sample)
            expected = "wrong_bundle_id"
        case "production_wrong_app":
            sample = bed.sample("SUBSCRIBED", "INITIAL_BUY", original: "2000000002", environment: .production)
            sample.appAppleID = 42
            body = bed.body(sample)
            expected = "wrong_app_apple_id"
        case "not_a_jws":
            body = Array(#"{"signedPayload":"not.a.jws!"}"#.utf8)
            expected = "invalid_jws"
        default:
            body = Array(#"{"notification":"x"}"#.utf8)
            expected = "invalid_body"
        }
        let sent = body
        try await bed.application(ledger, catalog: .freeOnly).test(.router) { client in
            let response = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: sent))
            #expect(response.status == .badRequest)
            #expect((response.json["error"] as? [String: Any])?["code"] as? String == expected, "\(response.text)")
        }
        #expect(try await SQLiteInbox(database: ledger.database).count() == 0)
    }
}

@Suite("App Store service API")
struct AppStoreServiceAPITests {
    @Test("A forwarded StoreKit 2 transaction entitles the user at once, and is idempotent")
    func forwardedTransaction() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let jws = bed.signedTransaction(bed.sample("SUBSCRIBED", original: "3000000001"))
        try await bed.application(ledger, catalog: try fixtureCatalog("free-pro-enterprise")).test(.router) { client in
            for _ in 0..<2 {
                let response = try await postJSON(client, "/v1/users/user_1/appstore/transactions", ["signed_transaction": jws])
                #expect(response.status == .ok, "\(response.text)")
                #expect(response.json["plan"] as? String == "pro")
                #expect(response.json["source"] as? String == "app_store")
                #expect(response.json["original_transaction_id"] as? String == "3000000001")
            }
            let other = try await postJSON(client, "/v1/users/user_2/appstore/transactions", ["signed_transaction": jws])
            #expect(other.status == .conflict)
            #expect((other.json["error"] as? [String: Any])?["code"] as? String == "transaction_owned_by_other_user")
            let restore = try await postJSON(client, "/v1/users/user_2/appstore/restore", ["transactions": [jws]])
            #expect(restore.status == .ok)
            #expect(restore.json["restored_count"] as? Int == 0)
            #expect(restore.json["subscribed"] as? Bool == false)
            #expect((restore.json["not_restored"] as? [[String: Any]])?.first?["original_transaction_id"] as? String == "3000000001")
            let cancel = try await client.execute(uri: "/v1/users/user_1/subscription/cancel", method: .post, headers: jsonHeaders)
            #expect(cancel.status == .conflict)
            let error = cancel.json["error"] as? [String: Any]
            #expect(error?["code"] as? String == "managed_by_app_store")
            #expect(error?["manage_url"] as? String == "https://apps.apple.com/account/subscriptions")
            let bad = try await postJSON(client, "/v1/users/user_1/appstore/transactions", ["signed_transaction": "eyJ.e30.x"])
            #expect(bad.status == .badRequest)
        }
        #expect(try await SQLiteInbox(database: ledger.database).count() == 1, "the same report twice is one event")
    }

    @Test("With APPSTORE_OWNERSHIP=transfer a restore moves the purchase to the restoring user")
    func transfer() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let jws = bed.signedTransaction(bed.sample("SUBSCRIBED", original: "3000000002"))
        try await bed.application(ledger, catalog: try fixtureCatalog("free-pro-enterprise"), ownership: .transfer).test(.router) { client in
            _ = try await postJSON(client, "/v1/users/user_1/appstore/transactions", ["signed_transaction": jws])
            let restore = try await postJSON(client, "/v1/users/user_2/appstore/restore", ["transactions": [jws]])
            #expect(restore.json["restored_count"] as? Int == 1)
            #expect(restore.json["plan"] as? String == "pro")
            let first = try await client.execute(uri: "/v1/users/user_1/entitlements", method: .get, headers: authorized)
            #expect(first.json["plan"] as? String == "free")
        }
    }

    @Test("Stripe and the App Store side by side: the highest tier wins, and an App Store status ends at its expiry date")
    func unifiedView() async throws {
        let bed = try AppStoreTestbed()
        var builder = UserLedgerBuilder()
        builder.add("customer.created", UserFixtures.customer("cus_1", user: "user_5"))
        builder.add("customer.subscription.created", UserFixtures.subscription("sub_1", customer: "cus_1", status: "active", lookupKey: "pro_monthly"))
        let ledger = try await builder.ledger()
        defer { ledger.remove() }
        let catalog = try fixtureCatalog("free-pro-enterprise")
        try await bed.application(ledger, catalog: catalog).test(.router) { client in
            let enterprise = bed.signedTransaction(bed.sample("SUBSCRIBED", original: "3000000005", product: "com.example.enterprise.yearly"))
            let answer = try await postJSON(client, "/v1/users/user_5/appstore/transactions", ["signed_transaction": enterprise])
            #expect(answer.json["plan"] as? String == "enterprise", "\(answer.text)")
            #expect(answer.json["source"] as? String == "app_store")
        }
        // Stale by date: an App Store purchase whose period ended while no renewal arrived.
        var stale = bed.sample("DID_RENEW", original: "3000000006", at: bed.now - 40 * 86_400_000)
        stale.transaction["signedDate"] = Int(bed.now - 40 * 86_400_000)
        let view = try await SQLiteAppStore(database: ledger.database).record(
            [AppStoreAppTransaction(
                user: "user_6", ownership: .keep, signedTransaction: "",
                transaction: try AppStoreTransaction(json: stale.transactionJSON))],
            receivedAt: 0)
        #expect(view == [.recorded(originalTransactionID: "3000000006", duplicate: false)])
        let billing = try await SQLiteUsers(database: ledger.database).billing(of: "user_6", in: .test)
        let resolution = billing.resolve(catalog, now: bed.now / 1000)
        #expect(resolution.entitled == false, "never trusted past its expiry date")
        #expect(resolution.appStoreStatus == .expired)
        #expect(resolution.source == .appStore)
    }

    @Test("The account token is a stable UUID per user")
    func accountToken() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await bed.application(ledger, catalog: .freeOnly).test(.router) { client in
            let first = try await client.execute(uri: "/v1/users/user_1/appstore/account-token", method: .get, headers: authorized)
            let again = try await client.execute(uri: "/v1/users/user_1/appstore/account-token", method: .get, headers: authorized)
            let token = try #require(first.json["app_account_token"] as? String)
            #expect(AppAccountToken.isUUID(token))
            #expect(again.json["app_account_token"] as? String == token)
        }
    }
}

@Suite("POST /webhooks/appstore: a notification type Apple adds later")
struct AppStoreNewNotificationTypeTests {
    @Test("is stored under its own name and subtype, answered 200, counted as other, and ignored by the ledger")
    func storedCountedIgnored() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let body = bed.body(bed.sample("SUBSCRIPTION_PAUSED", "BY_USER", original: "2000000077"))
        try await bed.application(ledger, catalog: .freeOnly).test(.router) { client in
            let response = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: body))
            #expect(response.status == .ok, "\(response.text)")
            let events = try await SQLiteInbox(database: ledger.database).list(InboxFilter())
            #expect(events.map(\.type) == ["SUBSCRIPTION_PAUSED"])
            #expect(events.first?.subtype == "BY_USER")
            #expect(events.first?.account == "appstore:Sandbox")
            #expect(events.first?.status == .ignored)
            try await client.execute(uri: "/metrics", method: .get) { metrics in
                let text = String(buffer: metrics.body)
                #expect(text.contains(#"billingd_appstore_notifications_total{outcome="accepted",type="other"} 1"#), "\(text)")
                #expect(!text.contains("SUBSCRIPTION_PAUSED"))
            }
        }
    }
}
