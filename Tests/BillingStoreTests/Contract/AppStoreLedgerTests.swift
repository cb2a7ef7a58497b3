import BillingCore
import BillingSamples
import BillingStore
import Foundation
import GRDB
import Testing

/// App Store notifications as the inbox stores them, built from `AppStoreSampleNotification`
/// with explicit dates. The JWS are unsigned here: the ledger reads data that was verified before
/// it was stored (verification has its own suite in BillingCoreTests).
enum AppStoreFactory {
    static let day: Int64 = 86_400_000
    static let t0: Int64 = 1_760_000_000_000

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func unsignedJWS(_ payload: [UInt8]) -> String {
        base64URL(Array(#"{"alg":"ES256"}"#.utf8)) + "." + base64URL(payload) + ".c2ln"
    }

    /// A notification body `{"signedPayload": …}` for one original transaction.
    static func notification(
        _ type: String, _ subtype: String? = nil, original: String, transaction: String, product: String = "com.example.pro.monthly",
        purchase: Int64, expires: Int64?, signed: Int64, environment: AppStoreEnvironment = .sandbox,
        transactionChanges: [String: any Sendable] = [:], renewalChanges: [String: any Sendable] = [:], token: String? = nil
    ) -> [UInt8] {
        var sample = AppStoreSampleNotification(
            type: type, subtype: subtype, productID: product, originalTransactionID: original, transactionID: transaction,
            bundleID: "com.example.app", environment: environment, appAccountToken: token, now: signed)
        sample.notificationUUID = "\(type)-\(subtype ?? "")-\(original)-\(transaction)-\(signed)"
        sample.transaction["purchaseDate"] = Int(purchase)
        sample.transaction["originalPurchaseDate"] = Int(t0)
        if let expires { sample.transaction["expiresDate"] = Int(expires) }
        for (key, value) in transactionChanges { sample.transaction[key] = value }
        if sample.renewalInfo != nil {
            sample.renewalInfo?["renewalDate"] = Int(expires ?? signed)
            for (key, value) in renewalChanges { sample.renewalInfo?[key] = value }
        }
        let jws = sample.signedPayload(unsignedJWS)
        return Array(try! JSONSerialization.data(withJSONObject: ["signedPayload": jws]))
    }

    static func delivery(_ body: [UInt8]) throws -> InboxDelivery {
        let notification = try AppStoreNotification(storedBody: body)
        return InboxDelivery.appStore(notification, body: body, receivedAt: 0)
    }

    /// Five lifecycles, in the order Apple would send them.
    static let lifecycles: [[UInt8]] = {
        var bodies: [[UInt8]] = []
        // 1000: purchase → renewal → billing retry with grace → recovery → refund of the first
        // period → auto-renew off.
        bodies.append(notification("SUBSCRIBED", "INITIAL_BUY", original: "1000", transaction: "1000", purchase: t0, expires: t0 + 30 * day, signed: t0))
        bodies.append(notification("DID_RENEW", original: "1000", transaction: "1001", purchase: t0 + 30 * day, expires: t0 + 60 * day, signed: t0 + 30 * day))
        bodies.append(notification(
            "DID_FAIL_TO_RENEW", "GRACE_PERIOD", original: "1000", transaction: "1001", purchase: t0 + 30 * day, expires: t0 + 60 * day,
            signed: t0 + 60 * day + 3_600_000, renewalChanges: ["gracePeriodExpiresDate": Int(t0 + 66 * day)]))
        bodies.append(notification(
            "DID_RENEW", "BILLING_RECOVERY", original: "1000", transaction: "1002", purchase: t0 + 62 * day, expires: t0 + 92 * day,
            signed: t0 + 62 * day))
        bodies.append(notification(
            "REFUND", original: "1000", transaction: "1000", purchase: t0, expires: t0 + 30 * day, signed: t0 + 70 * day,
            transactionChanges: ["revocationDate": Int(t0 + 70 * day)]))
        bodies.append(notification(
            "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", original: "1000", transaction: "1002", purchase: t0 + 62 * day,
            expires: t0 + 92 * day, signed: t0 + 80 * day))
        // 2000: basic, then an upgrade to pro that takes effect now; the old transaction is upgraded away.
        bodies.append(notification(
            "SUBSCRIBED", "INITIAL_BUY", original: "2000", transaction: "2000", product: "com.example.basic.monthly", purchase: t0,
            expires: t0 + 30 * day, signed: t0))
        bodies.append(notification(
            "DID_CHANGE_RENEWAL_PREF", "UPGRADE", original: "2000", transaction: "2001", product: "com.example.pro.monthly",
            purchase: t0 + 10 * day, expires: t0 + 40 * day, signed: t0 + 10 * day))
        bodies.append(notification(
            "REFUND", original: "2000", transaction: "2000", product: "com.example.basic.monthly", purchase: t0, expires: t0 + 30 * day,
            signed: t0 + 10 * day + 1000, transactionChanges: ["isUpgraded": true]))
        // 2000 then downgrades at the next renewal: the pending product shows, the current stays.
        bodies.append(notification(
            "DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", original: "2000", transaction: "2001", product: "com.example.pro.monthly",
            purchase: t0 + 10 * day, expires: t0 + 40 * day, signed: t0 + 20 * day,
            renewalChanges: ["autoRenewProductId": "com.example.basic.monthly"]))
        // 3000: refunded, then the refund reversed.
        bodies.append(notification("SUBSCRIBED", "INITIAL_BUY", original: "3000", transaction: "3000", purchase: t0, expires: t0 + 30 * day, signed: t0))
        bodies.append(notification(
            "REFUND", original: "3000", transaction: "3000", purchase: t0, expires: t0 + 30 * day, signed: t0 + 5 * day,
            transactionChanges: ["revocationDate": Int(t0 + 5 * day), "revocationReason": 1]))
        bodies.append(notification("REFUND_REVERSED", original: "3000", transaction: "3000", purchase: t0, expires: t0 + 30 * day, signed: t0 + 7 * day))
        // 4000: a non-consumable shared through family sharing, then revoked.
        bodies.append(notification("ONE_TIME_CHARGE", original: "4000", transaction: "4000", product: "com.example.lifetime", purchase: t0, expires: nil, signed: t0))
        bodies.append(notification(
            "REVOKE", original: "4000", transaction: "4000", product: "com.example.lifetime", purchase: t0, expires: nil, signed: t0 + 3 * day,
            transactionChanges: ["revocationDate": Int(t0 + 3 * day), "type": "Non-Consumable", "inAppOwnershipType": "FAMILY_SHARED"]))
        // 5000: auto-renew turned off, then expired voluntarily.
        bodies.append(notification("SUBSCRIBED", "INITIAL_BUY", original: "5000", transaction: "5000", purchase: t0, expires: t0 + 30 * day, signed: t0))
        bodies.append(notification(
            "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", original: "5000", transaction: "5000", purchase: t0, expires: t0 + 30 * day,
            signed: t0 + 12 * day))
        bodies.append(notification("EXPIRED", "VOLUNTARY", original: "5000", transaction: "5000", purchase: t0, expires: t0 + 30 * day, signed: t0 + 30 * day + 60_000))
        return bodies
    }()
}

extension LedgerUnderTest {
    func deliverAppStore(_ bodies: [[UInt8]]) async throws -> ApplyPass {
        _ = try await inbox.insert(bodies.map(AppStoreFactory.delivery))
        return try await applier.drain()
    }

    /// Stores the notifications as the App Store webhook does when it answers 2xx: stored and
    /// applied in one group commit. Returns how many were left queued for the applier.
    func ingestAppStore(_ bodies: [[UInt8]]) async throws -> Int {
        let batch = try bodies.map { applier.prepare(try AppStoreFactory.delivery($0)) }
        return try await applier.ingest(batch, now: 0).queued
    }

    func appStoreSubscription(_ original: String, environment: String = "Sandbox") async throws -> LedgerRow? {
        try await rows(
            "SELECT * FROM appStoreSubscription WHERE environment = '\(environment)' AND originalTransactionID = '\(original)'"
        ).first
    }

    func appStoreTransaction(_ id: String, environment: String = "Sandbox") async throws -> LedgerRow? {
        try await rows("SELECT * FROM appStoreTransaction WHERE environment = '\(environment)' AND transactionID = '\(id)'").first
    }
}

@Suite("App Store ledger, on both backends")
struct AppStoreLedgerTests {
    typealias F = AppStoreFactory

    static func inOrderDump(_ backend: StoreBackend) async throws -> String {
        var dump = ""
        try await withLedger(backend) { ledger in
            let pass = try await ledger.deliverAppStore(F.lifecycles)
            #expect(pass.failed + pass.dead == 0)
            dump = try await ledger.dump()
        }
        return dump
    }

    @Test("In-order delivery ends in the true state of every lifecycle", arguments: StoreBackend.allCases)
    func inOrderState(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            _ = try await ledger.deliverAppStore(F.lifecycles)
            let renewed = try #require(try await ledger.appStoreSubscription("1000"))
            #expect(renewed["transactionID"] == "1002", "a refund of the first period leaves the current period alone")
            #expect(renewed.int("expiresDate") == F.t0 + 92 * F.day)
            #expect(renewed.bool("autoRenewStatus") == false)
            #expect(renewed.bool("isInBillingRetryPeriod") == false, "recovered")
            #expect(renewed["lastNotificationType"] == "DID_CHANGE_RENEWAL_STATUS")
            #expect(try await ledger.appStoreTransaction("1000")?.bool("revoked") == true)

            let upgraded = try #require(try await ledger.appStoreSubscription("2000"))
            #expect(upgraded["productID"] == "com.example.pro.monthly")
            #expect(upgraded["autoRenewProductID"] == "com.example.basic.monthly", "the downgrade waits for the renewal")
            #expect(try await ledger.appStoreTransaction("2000")?.bool("isUpgraded") == true)

            let reversed = try #require(try await ledger.appStoreSubscription("3000"))
            #expect(reversed.bool("revoked") == false, "REFUND_REVERSED signed after the refund reinstates it")
            let revoked = try #require(try await ledger.appStoreSubscription("4000"))
            #expect(revoked.bool("revoked") == true)
            #expect(revoked["status"] == "revoked")
            let expired = try #require(try await ledger.appStoreSubscription("5000"))
            #expect(expired["status"] == "expired")
            #expect(expired.int("expirationIntent") == 1)
        }
    }

    /// Seeds per block of ``randomOrders(_:block:)``: 1,000 orders on SQLite, in memory; the first
    /// 10 of every block (40) on PostgreSQL, where each order needs a database of its own.
    static func seeds(_ backend: StoreBackend, block: Int) -> Range<Int> {
        switch backend {
        case .sqlite: (block * 250)..<(block * 250 + 250)
        case .postgres: (block * 250)..<(block * 250 + 10)
        }
    }

    /// Even seeds go through the inbox and the applier; odd seeds through the group commit that
    /// answers the App Store's POST (stored and applied in one transaction).
    @Test("Seeded random orders with duplicates end in the in-order ledger (1,000 on SQLite, 40 on PostgreSQL; half through the inbox and applier, half through the live ingest)",
        arguments: StoreBackend.allCases, 0..<4)
    func randomOrders(_ backend: StoreBackend, block: Int) async throws {
        let reference = try await Self.inOrderDump(backend)
        for seed in Self.seeds(backend, block: block) {
            var random = SplitMix64(seed: UInt64(seed) &+ 7_000)
            var deliveries: [[UInt8]] = []
            for body in F.lifecycles {
                deliveries.append(body)
                if Int.random(in: 0..<10, using: &random) < 3 { deliveries.append(body) }
            }
            deliveries.shuffle(using: &random)
            var dump = ""
            try await withLedger(backend) { ledger in
                var index = 0
                while index < deliveries.count {
                    let burst = Int.random(in: 1...6, using: &random)
                    let bodies = Array(deliveries[index..<min(index + burst, deliveries.count)])
                    if seed % 2 == 0 {
                        _ = try await ledger.deliverAppStore(bodies)
                    } else {
                        let queued = try await ledger.ingestAppStore(bodies)
                        #expect(queued == 0, "seed \(seed): \(queued) left queued by the group commit")
                    }
                    index += burst
                }
                dump = try await ledger.dump()
            }
            #expect(dump == reference, "seed \(seed) differs")
            if dump != reference { return }
        }
    }

    @Test("An older copy without the revocation never undoes a refund", arguments: StoreBackend.allCases)
    func revocationIsSticky(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            _ = try await ledger.deliverAppStore([
                F.notification("REFUND", original: "9", transaction: "9", purchase: F.t0, expires: F.t0 + 30 * F.day, signed: F.t0 + 5 * F.day,
                    transactionChanges: ["revocationDate": Int(F.t0 + 5 * F.day)]),
                // A later-signed copy from an ordinary notification, still without the revocation.
                F.notification("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", original: "9", transaction: "9", purchase: F.t0,
                    expires: F.t0 + 30 * F.day, signed: F.t0 + 6 * F.day),
            ])
            #expect(try await ledger.appStoreTransaction("9")?.bool("revoked") == true)
            #expect(try await ledger.appStoreTransaction("9")?.int("revocationDate") == F.t0 + 5 * F.day)
        }
    }

    @Test("Duplicates of a notification are stored once and change nothing", arguments: StoreBackend.allCases)
    func duplicates(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let body = F.lifecycles[0]
            _ = try await ledger.deliverAppStore([body])
            let before = try await ledger.dump()
            let outcomes = try await ledger.inbox.insert([try F.delivery(body), try F.delivery(body)])
            #expect(outcomes == [.duplicate, .duplicate])
            #expect(try await ledger.dump() == before)
        }
    }

    @Test("Sandbox and Production never mix", arguments: StoreBackend.allCases)
    func environmentsApart(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            _ = try await ledger.deliverAppStore([
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "77", transaction: "77", purchase: F.t0, expires: F.t0 + F.day, signed: F.t0),
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "77", transaction: "77", purchase: F.t0, expires: F.t0 + 2 * F.day, signed: F.t0,
                    environment: .production),
            ])
            #expect(try await ledger.appStoreSubscription("77")?.int("expiresDate") == F.t0 + F.day)
            #expect(try await ledger.appStoreSubscription("77", environment: "Production")?.int("expiresDate") == F.t0 + 2 * F.day)
            let events = try await ledger.inbox.list(.init())
            #expect(Set(events.map(\.livemode)) == [false, true])
        }
    }

    @Test("Types billingd does not apply are stored and ignored; TEST is recorded", arguments: StoreBackend.allCases)
    func unknownTypes(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let pass = try await ledger.deliverAppStore([
                F.notification("SOMETHING_NEW", original: "55", transaction: "55", purchase: F.t0, expires: F.t0 + F.day, signed: F.t0),
                F.notification("TEST", original: "56", transaction: "56", purchase: F.t0, expires: F.t0 + F.day, signed: F.t0),
            ])
            #expect(pass.ignored == 1)
            #expect(pass.applied == 1)
            #expect(try await ledger.appStoreSubscription("55") == nil)
            let events = try await ledger.inbox.list(.init())
            #expect(events.map(\.status).sorted { $0.rawValue < $1.rawValue } == [.applied, .ignored])
            #expect(events.first { $0.type == "TEST" }?.effect == "recorded")
        }
    }

    @Test("A purchase made with a user's appAccountToken is tied to that user, before or after the token is remembered", arguments: StoreBackend.allCases)
    func accountTokenTies(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let store = ledger.store.appStore
            let token = try await store.accountToken(for: "user_7")
            #expect(try await store.accountToken(for: "user_7") == token, "the token is stable")
            #expect(try await store.accountToken(for: "user_8") != token)
            _ = try await ledger.deliverAppStore([
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "700", transaction: "700", purchase: F.t0, expires: F.t0 + F.day, signed: F.t0,
                    token: token),
            ])
            let owners = try await ledger.rows("SELECT appUserID, source FROM appStoreOwner WHERE originalTransactionID = '700'")
            #expect(owners.map { $0["appUserID"] } == ["user_7"])
        }
        // A device that never reached the app's backend: the notification comes first.
        try await withLedger(backend) { other in
            let otherStore = other.store.appStore
            _ = try await otherStore.accountToken(for: "someone else")
            let namespace = try #require(try await other.store.metaValue("appstore_account_token_namespace"))
            let later = AppAccountToken.derive(user: "user_9", namespace: Self.bytes(namespace))
            _ = try await other.deliverAppStore([
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "900", transaction: "900", purchase: F.t0, expires: F.t0 + F.day, signed: F.t0,
                    token: later),
            ])
            #expect(try await other.rows("SELECT * FROM appStoreOwner").isEmpty, "nobody holds that token yet")
            #expect(try await otherStore.accountToken(for: "user_9") == later)
            #expect(try await other.rows("SELECT appUserID FROM appStoreOwner WHERE originalTransactionID = '900'").map { $0["appUserID"] } == ["user_9"])
        }
    }

    static func bytes(_ uuid: String) -> [UInt8] {
        let hex = Array(uuid.utf8.filter { $0 != UInt8(ascii: "-") })
        return stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)! }
    }

    @Test("Replay rebuilds the App Store ledger exactly", arguments: StoreBackend.allCases)
    func replay(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let pass = try await ledger.deliver(F.lifecycles.map(F.delivery))
            #expect(pass.failed + pass.dead == 0)
            let live = try await ledger.dump()
            _ = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(try await ledger.dump() == live)
        }
    }
}
