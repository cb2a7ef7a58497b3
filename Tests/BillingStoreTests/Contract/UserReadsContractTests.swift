import BillingCore
import BillingStore
import Testing

@Suite("The service API's reads of a user, on both backends")
struct UserReadsContractTests {
    /// What the service API reads of each lifecycle's user: billing, pages of invoices, payment methods.
    static func reads(_ ledger: LedgerUnderTest) async throws -> [String] {
        try await ledger.deliver(Lifecycle.events())
        var lines: [String] = []
        for n in 0..<3 {
            let user = "user_\(n)"
            let billing = try await ledger.users.billing(of: user, in: .test)
            let page = try await ledger.users.invoices(of: user, in: .test, limit: 2, startingAfter: nil)
            let methods = try await ledger.users.paymentMethods(of: user, in: .test)
            lines += [String(describing: billing), String(describing: page), String(describing: methods)]
            if let first = page?.invoices.first {
                let next = try await ledger.users.invoices(of: user, in: .test, limit: 5, startingAfter: first.id)
                lines.append(String(describing: next))
            }
        }
        return lines
    }

    @Test("The service API's reads find the lifecycles, and answer on every backend as on SQLite", arguments: StoreBackend.allCases)
    func userReadsAgree(_ backend: StoreBackend) async throws {
        var reference: [String] = []
        try await withLedger(.sqlite) { reference = try await Self.reads($0) }
        #expect(reference.contains { $0.contains("sub_L0") }, "the user reads find the lifecycles")
        try await withLedger(backend) { ledger in
            let lines = try await Self.reads(ledger)
            #expect(lines.contains { $0.contains("sub_L0") })
            #expect(lines == reference)
        }
    }

    @Test("A user's billing holds their customer and subscription, and nobody else's", arguments: StoreBackend.allCases)
    func billingOfOneUser(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(Lifecycle.events())
            let billing = String(describing: try await ledger.users.billing(of: "user_1", in: .test))
            #expect(billing.contains("cus_L1") && billing.contains("sub_L1"))
            #expect(!billing.contains("cus_L0") && !billing.contains("sub_L2"))
            let nobody = String(describing: try await ledger.users.billing(of: "user_nobody", in: .test))
            #expect(!nobody.contains("cus_L"), "a user with no customer has no billing")
            #expect(try await ledger.users.invoices(of: "user_1", in: ServiceScope(livemode: true), limit: 5, startingAfter: nil)?.invoices.isEmpty ?? true,
                "test-mode invoices never show in live mode")
        }
    }

    @Test("The console's search finds a user by id, e-mail (in any case), Stripe customer, subscription and original transaction, in the mode searched only", arguments: StoreBackend.allCases)
    func searchFindsUsers(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(Lifecycle.events())
            let store = ledger.store.appStore
            let token = try await store.accountToken(for: "user_7")
            _ = try await ledger.deliverAppStore([
                AppStoreFactory.notification(
                    "SUBSCRIBED", "INITIAL_BUY", original: "700", transaction: "700", purchase: AppStoreFactory.t0,
                    expires: AppStoreFactory.t0 + AppStoreFactory.day, signed: AppStoreFactory.t0, token: token)
            ])
            func search(_ term: String, _ scope: ServiceScope = .test) async throws -> [UserMatch] {
                try await ledger.users.users(matching: term, in: scope, limit: 10)
            }
            #expect(try await search("user_1") == [UserMatch(user: "user_1", field: .appUserID)])
            #expect(try await search("c1@example.com") == [UserMatch(user: "user_1", field: .email)])
            #expect(try await search("C1@Example.COM") == [UserMatch(user: "user_1", field: .email)], "an e-mail is found whatever its case")
            #expect(try await search("cus_L2") == [UserMatch(user: "user_2", field: .stripeCustomer)])
            #expect(try await search("sub_L0") == [UserMatch(user: "user_0", field: .subscription)])
            #expect(try await search("700") == [UserMatch(user: "user_7", field: .originalTransactionID)])
            #expect(try await search("user_7") == [UserMatch(user: "user_7", field: .appUserID)], "an App Store user is found by id")
            #expect(try await search("nobody@example.com").isEmpty)
            #expect(try await search("cus_L2", ServiceScope(livemode: true)).isEmpty, "test-mode customers never show in live mode")
            #expect(try await search("700", ServiceScope(livemode: true)).isEmpty, "Sandbox purchases never show in live mode")
            #expect(try await search("' OR 1=1 --").isEmpty, "the term is a value, never SQL")
        }
    }
}
