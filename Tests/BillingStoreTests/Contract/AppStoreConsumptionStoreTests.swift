import BillingCore
import BillingStore
import Foundation
import Testing

/// Apple's refund requests and each user's consent through ``LedgerStore/appStoreConsumption``
/// alone, on both backends.
@Suite("Refund requests (CONSUMPTION_REQUEST) and consent, on both backends")
struct AppStoreConsumptionStoreTests {
    typealias F = AppStoreFactory
    static let hour: Int64 = 3_600_000

    /// A `CONSUMPTION_REQUEST` for transaction `transaction` of `original`, signed at `signed`.
    static func request(
        original: String = "7000", transaction: String = "7001", signed: Int64 = F.t0, token: String? = nil,
        environment: AppStoreEnvironment = .sandbox, product: String = "com.example.pro.monthly"
    ) -> [UInt8] {
        F.notification(
            "CONSUMPTION_REQUEST", original: original, transaction: transaction, product: product, purchase: signed - 10 * F.day,
            expires: signed + 20 * F.day, signed: signed, environment: environment, token: token)
    }

    static func uuid(_ body: [UInt8]) throws -> String {
        try AppStoreNotification(storedBody: body).notificationUUID
    }

    @Test("A CONSUMPTION_REQUEST is recorded in the transaction that applies it, with the owner its token ties, once however often it comes; replay keeps it", arguments: StoreBackend.allCases)
    func recordedOnce(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let token = try await ledger.store.appStore.accountToken(for: "user_1")
            let body = Self.request(token: token)
            // The group commit of the webhook, which stamps it with its receipt time (0 here).
            #expect(try await ledger.ingestAppStore([body]) == 0)
            #expect(try await ledger.ingestAppStore([body]) == 0, "a repeated delivery is a duplicate")
            // Another notification of the same request through the applier's path.
            let later = Self.request(signed: F.t0 + 1000, token: token)
            _ = try await ledger.deliverAppStore([later, later])
            // Other types queue nothing.
            _ = try await ledger.deliverAppStore([F.notification(
                "REFUND", original: "7000", transaction: "7001", purchase: F.t0, expires: F.t0 + 30 * F.day, signed: F.t0 + 2000,
                transactionChanges: ["revocationDate": Int(F.t0 + 2000)], token: token)])

            let requests = try await ledger.store.appStoreConsumption.requests(status: nil, limit: 10)
            #expect(requests.map(\.notificationUUID).sorted() == [try Self.uuid(body), try Self.uuid(later)].sorted())
            let first = try #require(requests.first { $0.notificationUUID == (try? Self.uuid(body)) })
            #expect(first.environment == "Sandbox" && first.transactionID == "7001" && first.originalTransactionID == "7000")
            #expect(first.user == "user_1", "tied by the appAccountToken in the same transaction")
            #expect(first.reason == "UNINTENDED_PURCHASE")
            #expect(first.signedDate == F.t0 && first.receivedAt == 0 && first.deadline == F.t0 + 12 * Self.hour)
            #expect(first.status == .pending && first.attempts == 0 && first.nextAttemptAt == first.receivedAt)
            #expect(first.body == nil && first.sentAt == nil && first.appleStatus == nil && first.lastError == nil)
            // The notification also merged its transaction as every notification does.
            #expect(try await ledger.appStoreTransaction("7001") != nil)

            try await ledger.store.appStoreConsumption.record(.sent(appleStatus: 202), environment: "Sandbox", notificationUUID: first.notificationUUID, at: 5)
            _ = try await ledger.maintenance.replay(applier: ledger.applier) { _ in }
            let replayed = try await ledger.store.appStoreConsumption.requests(status: nil, limit: 10)
            #expect(replayed.count == 2, "replay adds no request")
            #expect(replayed.first { $0.notificationUUID == first.notificationUUID }?.status == .sent, "and keeps what was answered")
        }
    }

    @Test("Consent: none until recorded, then the last one given, per user", arguments: StoreBackend.allCases)
    func consent(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let consumption = ledger.store.appStoreConsumption
            #expect(try await consumption.consent(of: "user_1") == nil)
            #expect(try await consumption.setConsent(of: "user_1", consented: true, now: 100) == ConsumptionConsent(consented: true, updatedAt: 100))
            #expect(try await consumption.consent(of: "user_1") == ConsumptionConsent(consented: true, updatedAt: 100))
            _ = try await consumption.setConsent(of: "user_1", consented: false, now: 200)
            #expect(try await consumption.consent(of: "user_1") == ConsumptionConsent(consented: false, updatedAt: 200))
            #expect(try await consumption.consent(of: "user_2") == nil)
        }
    }

    @Test("Claims take due pending requests of the named environments, oldest first, and hold each for its lease", arguments: StoreBackend.allCases)
    func claims(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let consumption = ledger.store.appStoreConsumption
            let bodies = (0..<5).map { Self.request(original: "70\($0)0", transaction: "70\($0)1", signed: F.t0 + Int64($0) * 1000) }
            // Stored as the webhook does, at time 0: due from then on.
            #expect(try await ledger.ingestAppStore(bodies + [Self.request(original: "8000", transaction: "8001", environment: .production)]) == 0)
            let now: Int64 = 1_000_000

            #expect(try await consumption.claimDue(environments: ["Sandbox"], now: now, leaseUntil: now + 600_000, limit: 0).isEmpty)
            let first = try await consumption.claimDue(environments: ["Sandbox"], now: now, leaseUntil: now + 600_000, limit: 3)
            #expect(first.map(\.transactionID) == ["7001", "7011", "7021"])
            #expect(first.allSatisfy { $0.nextAttemptAt == now + 600_000 && $0.status == .pending })
            let second = try await consumption.claimDue(environments: ["Sandbox"], now: now, leaseUntil: now + 600_000, limit: 10)
            #expect(second.map(\.transactionID) == ["7031", "7041"], "a held request is not taken again")
            #expect(try await consumption.claimDue(environments: ["Sandbox"], now: now + 599_999, leaseUntil: now + 700_000, limit: 10).isEmpty)
            let afterLease = try await consumption.claimDue(environments: ["Sandbox"], now: now + 600_000, leaseUntil: now + 1_200_000, limit: 10)
            #expect(afterLease.count == 5, "a lease that ran out lets another claim take the request")
            let production = try await consumption.claimDue(environments: ["Production", "Sandbox"], now: now, leaseUntil: now + 1, limit: 10)
            #expect(production.map(\.transactionID) == ["8001"])
        }
    }

    @Test("Two claims at once never take one request", arguments: StoreBackend.allCases)
    func concurrentClaims(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let consumption = ledger.store.appStoreConsumption
            let bodies = (0..<40).map { Self.request(original: "9\($0)0", transaction: "9\($0)1", signed: F.t0 + Int64($0)) }
            #expect(try await ledger.ingestAppStore(bodies) == 0)
            let claims = try await withThrowingTaskGroup(of: [String].self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var taken: [String] = []
                        while true {
                            let batch = try await consumption.claimDue(environments: ["Sandbox"], now: 10, leaseUntil: 1_000_000, limit: 3)
                            if batch.isEmpty { return taken }
                            taken += batch.map(\.notificationUUID)
                        }
                    }
                }
                var all: [[String]] = []
                for try await taken in group { all.append(taken) }
                return all
            }
            let taken = claims.flatMap { $0 }
            #expect(taken.count == 40, "every request claimed")
            #expect(Set(taken).count == 40, "none claimed twice")
        }
    }

    @Test("Outcomes change only a pending request: the attempt before the call, then Apple's answer; a finished one stays as it is", arguments: StoreBackend.allCases)
    func outcomes(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let consumption = ledger.store.appStoreConsumption
            let bodies = (0..<5).map { Self.request(original: "70\($0)0", transaction: "70\($0)1", signed: F.t0 + Int64($0)) }
            _ = try await ledger.deliverAppStore(bodies)
            let uuids = try bodies.map(Self.uuid)
            let answer = ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, refundPreference: .decline)
            func request(_ uuid: String) async throws -> AppStoreConsumptionRequest {
                try #require(try await consumption.requests(status: nil, limit: 10).first { $0.notificationUUID == uuid })
            }

            #expect(try await consumption.record(.attempting(body: answer.json(), user: "user_1"), environment: "Sandbox", notificationUUID: uuids[0], at: 100))
            var sent = try await request(uuids[0])
            #expect(sent.status == .pending && sent.attempts == 1 && sent.lastAttemptAt == 100 && sent.user == "user_1")
            #expect(sent.answer == answer, "the body is kept before the call")
            #expect(try await consumption.record(.sent(appleStatus: 202), environment: "Sandbox", notificationUUID: uuids[0], at: 150))
            sent = try await request(uuids[0])
            #expect(sent.status == .sent && sent.sentAt == 150 && sent.appleStatus == 202 && sent.nextAttemptAt == nil && sent.lastError == nil)
            #expect(try await consumption.record(.retry(at: 900, error: "HTTP 503", appleStatus: 503), environment: "Sandbox", notificationUUID: uuids[0], at: 160) == false)
            #expect(try await request(uuids[0]).status == .sent, "a late outcome of another replica does not undo a sent answer")

            #expect(try await consumption.record(.retry(at: 900, error: "App Store Server API …: HTTP 503", appleStatus: 503), environment: "Sandbox", notificationUUID: uuids[1], at: 200))
            let retried = try await request(uuids[1])
            #expect(retried.status == .pending && retried.nextAttemptAt == 900 && retried.lastError == "App Store Server API …: HTTP 503" && retried.appleStatus == 503)

            #expect(try await consumption.record(.failed(error: "HTTP 400 4000035", appleStatus: 400), environment: "Sandbox", notificationUUID: uuids[2], at: 300))
            let failed = try await request(uuids[2])
            #expect(failed.status == .failed && failed.nextAttemptAt == nil && failed.lastError == "HTTP 400 4000035" && failed.appleStatus == 400)

            #expect(try await consumption.record(.noConsent(user: "user_9"), environment: "Sandbox", notificationUUID: uuids[3], at: 400))
            let refused = try await request(uuids[3])
            #expect(refused.status == .noConsent && refused.user == "user_9" && refused.nextAttemptAt == nil)

            #expect(try await consumption.record(.released, environment: "Sandbox", notificationUUID: uuids[4], at: 500))
            #expect(try await request(uuids[4]).nextAttemptAt == 500)
            #expect(try await consumption.record(.expired, environment: "Sandbox", notificationUUID: uuids[4], at: 600))
            #expect(try await request(uuids[4]).status == .expired)
            #expect(try await consumption.record(.sent(appleStatus: 202), environment: "Sandbox", notificationUUID: "no-such", at: 700) == false)

            #expect(try await consumption.requests(status: .failed, limit: 10).map(\.notificationUUID) == [uuids[2]])
            #expect(try await consumption.requests(status: nil, limit: 2).count == 2)
        }
    }

    @Test("Pending requests older than 12 hours expire, of any environment; answered ones and younger ones stay", arguments: StoreBackend.allCases)
    func expiry(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let consumption = ledger.store.appStoreConsumption
            let old = Self.request(original: "7000", transaction: "7001", signed: F.t0)
            let oldProduction = Self.request(original: "7100", transaction: "7101", signed: F.t0, environment: .production)
            let answered = Self.request(original: "7200", transaction: "7201", signed: F.t0)
            let young = Self.request(original: "7300", transaction: "7301", signed: F.t0 + 2 * Self.hour)
            _ = try await ledger.deliverAppStore([old, oldProduction, answered, young])
            try await consumption.record(.sent(appleStatus: 202), environment: "Sandbox", notificationUUID: try Self.uuid(answered), at: 1)

            #expect(try await consumption.expireOverdue(now: F.t0 + 12 * Self.hour - 1) == 0)
            #expect(try await consumption.expireOverdue(now: F.t0 + 12 * Self.hour) == 2)
            let statuses = Dictionary(uniqueKeysWithValues: try await consumption.requests(status: nil, limit: 10).map { ($0.transactionID, $0.status) })
            #expect(statuses == ["7001": .expired, "7101": .expired, "7201": .sent, "7301": .pending])
        }
    }

    @Test("The context of an answer: the owner now, their consent, the transaction, and the entitlement history that names the purchase", arguments: StoreBackend.allCases)
    func context(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let consumption = ledger.store.appStoreConsumption
            let token = try await ledger.store.appStore.accountToken(for: "user_1")
            _ = try await ledger.deliverAppStore([
                Self.request(original: "7000", transaction: "7001", signed: F.t0, token: token),
                Self.request(original: "7100", transaction: "7101", signed: F.t0),
            ])
            let requests = try await consumption.requests(status: nil, limit: 10)
            let owned = try #require(requests.first { $0.transactionID == "7001" })
            let orphan = try #require(requests.first { $0.transactionID == "7101" })

            var context = try await consumption.answerContext(for: owned)
            #expect(context.owner == "user_1" && context.consent == nil)
            #expect(context.transaction == AppStoreConsumptionContext.Transaction(
                productID: "com.example.pro.monthly", type: "Auto-Renewable Subscription", purchaseDate: F.t0 - 10 * F.day,
                expiresDate: F.t0 + 20 * F.day, revocationDate: nil))
            #expect(context.historyRecords == 0 && !context.entitledThroughPurchase)

            _ = try await consumption.setConsent(of: "user_1", consented: true, now: 50)
            // The access changes the outbox recorded for the user: another purchase, then this one.
            for (at, ref) in [(1, "6000"), (2, "7000")] {
                try await ledger.execute("""
                    INSERT INTO entitlementChange (account, livemode, "user", at, tier, entitled, source, validUntil, why, ref)
                    VALUES ('', false, 'user_1', \(at), 'pro', true, 'app_store', NULL, 'subscribed', '\(ref)')
                    """)
            }
            // A live-mode record is another mode's history.
            try await ledger.execute("""
                INSERT INTO entitlementChange (account, livemode, "user", at, tier, entitled, source, validUntil, why, ref)
                VALUES ('', true, 'user_1', 3, 'pro', true, 'app_store', NULL, 'subscribed', '7000')
                """)
            context = try await consumption.answerContext(for: owned)
            #expect(context.consent == ConsumptionConsent(consented: true, updatedAt: 50))
            #expect(context.historyRecords == 2 && context.entitledThroughPurchase)

            let other = try await consumption.answerContext(for: orphan)
            #expect(other.owner == nil && other.consent == nil && other.historyRecords == 0)
            #expect(other.transaction?.productID == "com.example.pro.monthly")
        }
    }

    @Test("The timeline shows each request of the user's purchases with what was answered, or why not", arguments: StoreBackend.allCases)
    func timeline(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let consumption = ledger.store.appStoreConsumption
            let token = try await ledger.store.appStore.accountToken(for: "user_1")
            let bodies = (0..<3).map { Self.request(original: "70\($0)0", transaction: "70\($0)1", signed: F.t0 + Int64($0) * 1000, token: token) }
            _ = try await ledger.deliverAppStore(bodies + [Self.request(original: "7900", transaction: "7901", signed: F.t0, token: token, environment: .production)])
            let uuids = try bodies.map(Self.uuid)
            let answer = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: true, refundPreference: .grantFull)
            try await consumption.record(.attempting(body: answer.json(), user: "user_1"), environment: "Sandbox", notificationUUID: uuids[0], at: F.t0 + 5000)
            try await consumption.record(.sent(appleStatus: 202), environment: "Sandbox", notificationUUID: uuids[0], at: F.t0 + 6000)
            try await consumption.record(.noConsent(user: "user_1"), environment: "Sandbox", notificationUUID: uuids[1], at: F.t0 + 5000)

            let page = try await ledger.store.timeline.timeline(of: "user_1", in: .test, limit: 50, after: nil, now: F.t0 / 1000 + 86_400)
            let items = page.items.filter { $0.kind == .appStoreConsumptionRequest }
            #expect(items.map(\.ref) == [uuids[2], uuids[1], uuids[0]], "the Sandbox requests, newest first; the Production one is live mode's")
            #expect(items.allSatisfy { $0.source == "app_store" && $0.kind.rawValue == "appstore.consumption_request" })
            #expect(items[2].at == F.t0 / 1000)
            #expect(items[2].summary == "Refund request (UNINTENDED_PURCHASE) for transaction 7001: answered Apple at \(UTCTimestamp.string((F.t0 + 6000) / 1000)): DELIVERED, refund preference GRANT_FULL, sample content provided")
            #expect(items[1].summary == "Refund request (UNINTENDED_PURCHASE) for transaction 7011: not answered: the user had not consented to share consumption data with Apple")
            #expect(items[0].summary == "Refund request (UNINTENDED_PURCHASE) for transaction 7021: waiting to be answered")
            let live = try await ledger.store.timeline.timeline(of: "user_1", in: ServiceScope(livemode: true), limit: 50, after: nil, now: F.t0 / 1000 + 86_400)
            #expect(live.items.filter { $0.kind == .appStoreConsumptionRequest }.map(\.summary) == ["Refund request (UNINTENDED_PURCHASE) for transaction 7901: waiting to be answered"])
        }
    }
}
