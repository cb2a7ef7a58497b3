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
}
