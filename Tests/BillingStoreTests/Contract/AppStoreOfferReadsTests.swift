import BillingCore
import BillingStore
import Testing

@Suite("App Store offer reads, on both backends")
struct AppStoreOfferReadsTests {
    typealias F = AppStoreFactory

    @Test("A user's introductory-offer transactions are read per mode, theirs only, oldest first", arguments: StoreBackend.allCases)
    func introductoryOffers(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let store = ledger.store.appStore
            let mine = try await store.accountToken(for: "user_7")
            let theirs = try await store.accountToken(for: "user_8")
            let intro: [String: any Sendable] = ["offerType": 1]
            _ = try await ledger.deliverAppStore([
                // user_7, Sandbox: a trial, then a paid renewal (no offer), then a later purchase with an intro offer.
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "710", transaction: "710", purchase: F.t0, expires: F.t0 + 7 * F.day,
                    signed: F.t0, transactionChanges: intro, token: mine),
                F.notification("DID_RENEW", original: "710", transaction: "711", purchase: F.t0 + 7 * F.day, expires: F.t0 + 37 * F.day,
                    signed: F.t0 + 7 * F.day, token: mine),
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "730", transaction: "730", product: "com.example.basic.monthly",
                    purchase: F.t0 + 40 * F.day, expires: F.t0 + 47 * F.day, signed: F.t0 + 40 * F.day, transactionChanges: intro, token: mine),
                // user_7, Production: one more.
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "740", transaction: "740", purchase: F.t0, expires: F.t0 + 7 * F.day,
                    signed: F.t0, environment: .production, transactionChanges: intro, token: mine),
                // user_8's trial is not user_7's.
                F.notification("SUBSCRIBED", "INITIAL_BUY", original: "720", transaction: "720", purchase: F.t0, expires: F.t0 + 7 * F.day,
                    signed: F.t0, transactionChanges: intro, token: theirs),
            ])
            let sandbox = try await store.introductoryOffers(of: "user_7", livemode: false)
            #expect(sandbox.map(\.transactionID) == ["710", "730"])
            #expect(sandbox.map(\.productID) == ["com.example.pro.monthly", "com.example.basic.monthly"])
            #expect(sandbox.first?.subscriptionGroupIdentifier == "21000000")
            #expect(sandbox.first?.purchaseDate == F.t0)
            #expect(sandbox.allSatisfy { $0.environment == "Sandbox" })
            let production = try await store.introductoryOffers(of: "user_7", livemode: true)
            #expect(production.map(\.transactionID) == ["740"])
            #expect(try await store.introductoryOffers(of: "user_8", livemode: false).map(\.transactionID) == ["720"])
            #expect(try await store.introductoryOffers(of: "nobody", livemode: false).isEmpty)
        }
    }
}
