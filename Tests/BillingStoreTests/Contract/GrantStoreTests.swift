import BillingCore
import BillingStore
import Foundation
import Synchronization
import Testing

/// Promotional grants through ``LedgerStore/grants`` alone, on both backends.
@Suite("Promotional grants, on both backends")
struct GrantStoreTests {
    static let t0: Int64 = 1_800_000_000
    static let day: Int64 = 86_400
    static let endpoint = "https://app.example.com/billing-hooks"
    static let catalog = try! PlanCatalog(tiers: [
        PlanTier(id: "free", name: "Free", rank: 0), PlanTier(id: "pro", name: "Pro", rank: 10),
    ])

    static func request(key: String? = nil, reason: String = "support ticket 4411", expiresAt: Int64 = t0 + 7 * day) -> GrantRequest {
        GrantRequest(
            tier: "pro", expiresAt: expiresAt, reason: reason, createdBy: "console:support", idempotencyKey: key,
            fingerprint: "tier=pro\nreason=\(reason)")
    }

    @Test("A grant is made, listed newest first, revoked once (kept, marked by whom), and the revocation repeats as it was", arguments: StoreBackend.allCases)
    func lifecycle(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let grants = ledger.store.grants
            guard case .created(let first) = try await grants.create(Self.request(), for: "user_1", in: .test, now: Self.t0) else {
                Issue.record("the first grant is created")
                return
            }
            #expect(first.id.hasPrefix("grant_") && first.id.count == 30)
            #expect(first.tier == "pro" && first.startsAt == Self.t0 && first.expiresAt == Self.t0 + 7 * Self.day)
            #expect(first.createdBy == "console:support" && first.revokedAt == nil)
            guard case .created(let second) = try await grants.create(Self.request(), for: "user_1", in: .test, now: Self.t0 + 10) else {
                Issue.record("a grant without a key is a new grant")
                return
            }
            #expect(try await grants.grants(of: "user_1", in: .test).map(\.id) == [second.id, first.id])

            let revoked = try #require(try await grants.revoke(first.id, of: "user_1", in: .test, by: "api:referrals", now: Self.t0 + 60))
            #expect(revoked.revokedAt == Self.t0 + 60 && revoked.revokedBy == "api:referrals")
            let again = try await grants.revoke(first.id, of: "user_1", in: .test, by: "console:other", now: Self.t0 + 120)
            #expect(again == revoked, "revoking twice keeps the first revocation")
            #expect(try await grants.revoke(first.id, of: "user_2", in: .test, by: "api:x", now: Self.t0) == nil, "another user's grant is unknown")
            #expect(try await grants.revoke("grant_nope", of: "user_1", in: .test, by: "api:x", now: Self.t0) == nil)
            #expect(try await grants.grants(of: "user_1", in: .test).count == 2, "a revoked grant is kept")
        }
    }

    @Test("An Idempotency-Key answers its grant for the same request, refuses another request, and is per user", arguments: StoreBackend.allCases)
    func idempotency(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let grants = ledger.store.grants
            guard case .created(let made) = try await grants.create(Self.request(key: "k1"), for: "user_1", in: .test, now: Self.t0) else {
                Issue.record("created")
                return
            }
            #expect(try await grants.create(Self.request(key: "k1"), for: "user_1", in: .test, now: Self.t0 + 5) == .replayed(made))
            #expect(try await grants.create(Self.request(key: "k1", reason: "other"), for: "user_1", in: .test, now: Self.t0 + 5) == .keyReused(made))
            guard case .created = try await grants.create(Self.request(key: "k1"), for: "user_2", in: .test, now: Self.t0) else {
                Issue.record("the key of another user is another key")
                return
            }
            #expect(try await grants.grants(of: "user_1", in: .test).count == 1)
        }
    }

    @Test("Grants are per user, mode and account; a user id with SQL wildcards matches only itself", arguments: StoreBackend.allCases)
    func isolation(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let grants = ledger.store.grants
            _ = try await grants.create(Self.request(), for: "user_1", in: .test, now: Self.t0)
            #expect(try await grants.grants(of: "user_1", in: ServiceScope(livemode: true)).isEmpty)
            #expect(try await grants.grants(of: "user_1", in: ServiceScope(account: "acct_1", livemode: false)).isEmpty)
            #expect(try await grants.grants(of: "user_%", in: .test).isEmpty)
            #expect(try await grants.grants(of: "user__", in: .test).isEmpty)
            #expect(try await grants.grants(of: "user_", in: .test).isEmpty)
        }
    }

    @Test("A user's billing holds their grants, and a grant entitles in the one resolution", arguments: StoreBackend.allCases)
    func billingHoldsGrants(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            _ = try await ledger.store.grants.create(Self.request(), for: "user_1", in: .test, now: Self.t0)
            let billing = try await ledger.users.billing(of: "user_1", in: .test)
            #expect(billing.grants.count == 1)
            let resolution = billing.resolve(Self.catalog, now: Self.t0 + 1)
            #expect(resolution.plan == "pro" && resolution.source == .grant)
            #expect(try await ledger.users.billing(of: "user_2", in: .test).grants.isEmpty)
        }
    }

    @Test("A grant announces the access it gives, its revocation and its expiry by date each announce the end, in the change's transaction", arguments: StoreBackend.allCases)
    func announces(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let clock = Mutex<Int64>(Self.t0)
            let policy = OutboxPolicy(
                catalog: Self.catalog, endpoints: [Self.endpoint], render: { billing, _ in Array(#"{"user":"\#(billing.user)"}"#.utf8) },
                now: { clock.withLock { $0 } })
            let store = ledger.store.announcing(policy)
            func types() async throws -> [String] {
                try await store.outbox.list(status: .pending, limit: 100).reversed().map { "\($0.event.user) \($0.event.type)" }
            }
            guard case .created(let grant) = try await store.grants.create(Self.request(), for: "user_1", in: .test, now: Self.t0) else {
                Issue.record("created")
                return
            }
            #expect(try await types() == ["user_1 subscription.started", "user_1 entitlement.updated"])
            _ = try await store.grants.revoke(grant.id, of: "user_1", in: .test, by: "console:support", now: Self.t0 + 60)
            #expect(try await types().suffix(2) == ["user_1 subscription.expired", "user_1 entitlement.updated"])
            _ = try await store.grants.revoke(grant.id, of: "user_1", in: .test, by: "console:support", now: Self.t0 + 90)
            #expect(try await types().count == 4, "a second revocation announces nothing")

            // The expiry: no job, the outbox's review of lapsed views announces it once time passes it.
            _ = try await store.grants.create(Self.request(expiresAt: Self.t0 + Self.day), for: "user_2", in: .test, now: Self.t0)
            #expect(try await types().count == 6)
            #expect(try await store.outbox.announceLapsed(now: Self.t0 * 1000, limit: 10) == 0, "nothing is due before the expiry")
            clock.withLock { $0 = Self.t0 + Self.day }
            #expect(try await store.outbox.announceLapsed(now: (Self.t0 + Self.day) * 1000, limit: 10) == 1)
            #expect(try await types().suffix(2) == ["user_2 subscription.expired", "user_2 entitlement.updated"])
        }
    }

    @Test("Replay keeps grants: they are not derived from the inbox", arguments: StoreBackend.allCases)
    func replayKeepsGrants(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            _ = try await ledger.store.grants.create(Self.request(), for: "user_1", in: .test, now: Self.t0)
            let before = try await ledger.store.grants.grants(of: "user_1", in: .test)
            _ = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(try await ledger.store.grants.grants(of: "user_1", in: .test) == before)
        }
    }
}
