import BillingCore
import BillingStore
import Foundation
import Synchronization
import Testing

/// A user's timeline through ``LedgerStore/timeline`` alone, on both backends: each source shows
/// with its kind, source, summary, ref and resulting access; pages cover every item once.
@Suite("The customer timeline, on both backends")
struct TimelineStoreTests {
    static let t0: Int64 = 1_800_000_000
    static let day: Int64 = 86_400
    static let endpoint = "https://app.example.com/billing-hooks?token=secret_in_query"
    static let catalog = try! PlanCatalog(tiers: [
        PlanTier(id: "free", name: "Free", rank: 0), PlanTier(id: "pro", name: "Pro", rank: 10),
    ])
    static let radars = UsageMeter(id: "radars", kind: .counter, limit: "radars", enforcement: .hard)

    static func grant(_ reason: String = "support ticket 4411", expiresAt: Int64 = t0 + 7 * day) -> GrantRequest {
        GrantRequest(tier: "pro", expiresAt: expiresAt, reason: reason, createdBy: "console:support", fingerprint: reason)
    }

    static func consume(_ key: String, at timestamp: Int64, period: UsagePeriod, user: String = "user_0") -> UsageOperation {
        .consume(UsageRecordInput(
            scope: .test, user: user, meter: radars, quantity: 1, timestamp: timestamp, idempotencyKey: key, period: period, limit: .count(1)))
    }

    /// Every item of a user's timeline, read `limit` at a time.
    static func all(_ store: any LedgerStore, _ user: String, limit: Int, now: Int64 = t0 + 400 * day) async throws -> [TimelineItem] {
        var items: [TimelineItem] = []
        var cursor: TimelineCursor?
        repeat {
            let page = try await store.timeline.timeline(of: user, in: .test, limit: limit, after: cursor, now: now)
            #expect(page.items.count <= limit)
            items += page.items
            cursor = page.nextCursor
            if cursor != nil { #expect(page.items.count == limit, "only the last page is short") }
        } while cursor != nil
        return items
    }

    /// The ids of the events of a lifecycle on an object of the user's customer, subscription,
    /// invoices or Checkout session.
    static func linkedEventIDs(_ bodies: [[UInt8]]) throws -> Set<String> {
        Set(try bodies.compactMap { body -> String? in
            let event = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
            let object = try #require((event["data"] as? [String: Any])?["object"] as? [String: Any])
            let id = object["id"] as? String ?? ""
            return ["cus_", "sub_", "in_", "cs_"].contains { id.hasPrefix($0) } ? event["id"] as? String : nil
        })
    }

    @Test("Each source shows with its kind, source, summary and ref, and each change of access with the entitlement it left", arguments: StoreBackend.allCases)
    func everySource(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let clock = Mutex<Int64>(Self.t0)
            let policy = OutboxPolicy(
                catalog: Self.catalog, endpoints: [Self.endpoint], render: { billing, _ in Array(#"{"user":"\#(billing.user)"}"#.utf8) },
                now: { clock.withLock { $0 } })
            let store = ledger.store.announcing(policy)

            // Stripe: user_0's lifecycle, and another user's that must not show.
            // Checkout sessions opened for a user before any customer (client_reference_id alone): user_0's shows, user_1's not.
            func openSession(_ user: Int) -> [UInt8] {
                var session = EventFactory.object("checkout_session")
                session["id"] = "cs_open_\(user)"
                session["customer"] = NSNull()
                session["client_reference_id"] = "user_\(user)"
                session["subscription"] = NSNull()
                session["status"] = "expired"
                return EventFactory.event(id: "evt_open_\(user)", type: "checkout.session.expired", created: Self.t0 - 500, object: session)
            }
            let lifecycle = Lifecycle.customerLifecycle(0).map(\.body) + [openSession(0)]
            _ = try await store.inbox.insert(try (lifecycle + Lifecycle.customerLifecycle(1).map(\.body) + [openSession(1)]).map(EventFactory.delivery))
            _ = try await store.applier(.init(firstRetryDelay: .zero)).drain()
            // Reconcile repairs sub_L0 from Stripe's API.
            var subscription = EventFactory.object("subscription")
            subscription["id"] = "sub_L0"
            subscription["customer"] = "cus_L0"
            subscription["status"] = "canceled"
            let json = try JSONSerialization.data(withJSONObject: subscription)
            let fetched = try LedgerSnapshot.decode(
                kind: .subscription, deletion: false, eventType: nil, eventID: "fetch:req_repair", eventCreated: Self.t0 - 10,
                objectJSON: ArraySlice(Array(json)))
            _ = try await store.reconciliation.applyFetched(fetched, account: "", livemode: false)

            // App Store: a purchase bought with user_0's appAccountToken.
            let token = try await store.appStore.accountToken(for: "user_0")
            _ = try await store.inbox.insert([
                try AppStoreFactory.delivery(AppStoreFactory.notification(
                    "SUBSCRIBED", "INITIAL_BUY", original: "700", transaction: "700", purchase: AppStoreFactory.t0,
                    expires: AppStoreFactory.t0 + 30 * AppStoreFactory.day, signed: AppStoreFactory.t0, token: token))
            ])
            _ = try await store.applier(.init(firstRetryDelay: .zero)).drain()

            // Grants: one made and revoked, one that runs out.
            guard case .created(let revoked) = try await store.grants.create(Self.grant(), for: "user_0", in: .test, now: Self.t0) else {
                Issue.record("created")
                return
            }
            clock.withLock { $0 = Self.t0 + 60 }
            _ = try await store.grants.revoke(revoked.id, of: "user_0", in: .test, by: "api:referrals", now: Self.t0 + 60)
            clock.withLock { $0 = Self.t0 + 70 }
            guard case .created(let lapsing) = try await store.grants.create(
                Self.grant("referral", expiresAt: Self.t0 + 100), for: "user_0", in: .test, now: Self.t0 + 70)
            else {
                Issue.record("created")
                return
            }

            // Usage: one consume fits, three are refused on one day, one the next; then a new period begins.
            let june = UsagePeriod(start: Self.t0 - 1000, end: Self.t0 + 40 * Self.day)
            let july = UsagePeriod(start: june.end, end: june.end + 30 * Self.day)
            _ = try await store.usage.apply([Self.consume("k1", at: Self.t0 + 200, period: june)], now: (Self.t0 + 200) * 1000)
            for (index, second) in [Int64(300), 400, 500].enumerated() {
                let outcome = try await store.usage.apply([Self.consume("r\(index)", at: Self.t0 + second, period: june)], now: (Self.t0 + second) * 1000)
                #expect(outcome.first.map { if case .refused = $0 { true } else { false } } == true, "over the limit: a 402")
            }
            _ = try await store.usage.apply([Self.consume("r3", at: Self.t0 + Self.day, period: june)], now: (Self.t0 + Self.day) * 1000)
            _ = try await store.usage.apply([Self.consume("k2", at: july.start + 5, period: july)], now: (july.start + 5) * 1000)

            let items = try await Self.all(store, "user_0", limit: 500)
            func of(_ kind: TimelineKind) -> [TimelineItem] { items.filter { $0.kind == kind } }

            // Newest first, every item once.
            #expect(zip(items, items.dropFirst()).allSatisfy { $0.at >= $1.at })
            #expect(Set(items.map { "\($0.kind.rawValue) \($0.tiebreak)" }).count == items.count)

            let stripe = of(.stripeEvent)
            #expect(Set(stripe.compactMap(\.ref)) == (try Self.linkedEventIDs(lifecycle)), "every event of the user's customer, subscription, invoices and Checkout session, nobody else's")
            #expect(stripe.allSatisfy { $0.source == "stripe" })
            #expect(stripe.contains { $0.ref == "evt_L0_1" && $0.summary == "customer.created on cus_L0" && $0.at == 1_780_000_000 })
            #expect(stripe.contains { $0.summary == "invoice.payment_failed on in_L0_2" })

            let repair = try #require(of(.reconcileRepair).first)
            #expect(repair.source == "stripe" && repair.ref == "sub_L0" && repair.at == Self.t0 - 10)
            #expect(repair.summary == "Subscription sub_L0 repaired from Stripe's API: canceled")

            let notification = try #require(of(.appStoreNotification).first)
            #expect(notification.source == "app_store" && notification.at == AppStoreFactory.t0 / 1000)
            #expect(notification.summary == "SUBSCRIBED (INITIAL_BUY) for original transaction 700")

            #expect(of(.grantCreated).map(\.ref) == [lapsing.id, revoked.id])
            #expect(of(.grantCreated).last?.summary == "Granted pro until \(UTCTimestamp.string(Self.t0 + 7 * Self.day)) by console:support: support ticket 4411")
            #expect(of(.grantRevoked).map(\.ref) == [revoked.id])
            #expect(of(.grantRevoked).first?.summary == "Grant of pro revoked by api:referrals" && of(.grantRevoked).first?.at == Self.t0 + 60)
            #expect(of(.grantExpired).map(\.ref) == [lapsing.id], "a revoked grant does not also expire")
            #expect(of(.grantExpired).first?.at == Self.t0 + 100 && of(.grantExpired).allSatisfy { $0.source == "grant" })

            let hits = of(.usageLimitHit)
            #expect(hits.map(\.at) == [Self.t0 + Self.day, Self.t0 + 300], "one item per day, at its first refusal")
            #expect(hits.last?.summary == "radars: 3 consumes refused at the limit (402) this day, 1 of 1 used, the last at \(UTCTimestamp.string(Self.t0 + 500))")
            #expect(hits.first?.summary == "radars: 1 consume refused at the limit (402) this day, 1 of 1 used")
            #expect(hits.allSatisfy { $0.source == "usage" && $0.ref == "radars" })
            let reset = try #require(of(.usagePeriodReset).first)
            #expect(reset.at == july.start && reset.ref == "radars")
            #expect(reset.summary == "radars: a new usage period began (\(UTCTimestamp.string(july.start)) to \(UTCTimestamp.string(july.end))); 1 had been used in the period before")

            let deliveries = of(.outboxDelivery)
            #expect(!deliveries.isEmpty && deliveries.allSatisfy { $0.source == "outbox" && ($0.ref ?? "").hasPrefix("msg_") })
            #expect(deliveries.allSatisfy { $0.summary.contains("to app.example.com: waiting to be sent") }, "\(deliveries.map(\.summary))")
            #expect(!items.contains { $0.summary.contains("secret_in_query") }, "an endpoint's query never shows")

            let changes = of(.entitlementChanged)
            #expect(changes.allSatisfy { $0.entitlement != nil && $0.source == "billingd" })
            #expect(items.filter { $0.entitlement != nil }.count == changes.count, "only changes of access carry one")
            let granted = try #require(changes.first { $0.at == Self.t0 && $0.entitlement?.source == "grant" })
            #expect(granted.entitlement == TimelineEntitlement(tier: "pro", source: "grant", validUntil: Self.t0 + 7 * Self.day))
            #expect(granted.ref == revoked.id)
            let ended = try #require(changes.first { $0.at == Self.t0 + 60 })
            #expect(ended.entitlement == TimelineEntitlement(tier: "free", source: nil, validUntil: nil), "the revocation ends the grant's access: \(ended.summary)")
            #expect(ended.summary.hasPrefix("No paid access: free"), "\(ended.summary)")
            // The access that resulted sorts above the grant that caused it, in the same second.
            let grantIndex = try #require(items.firstIndex { $0.kind == .grantCreated && $0.ref == revoked.id })
            #expect(try #require(items.firstIndex(of: granted)) < grantIndex)

            #expect(try await store.timeline.timeline(of: "user_nobody", in: .test, limit: 50, after: nil, now: Self.t0).items.isEmpty)
            #expect(try await store.timeline.timeline(of: "user_0", in: ServiceScope(livemode: true), limit: 50, after: nil, now: Self.t0).items.isEmpty,
                "test-mode history never shows in live mode")
            #expect(try await store.timeline.timeline(of: "user_%", in: .test, limit: 50, after: nil, now: Self.t0).items.isEmpty)
        }
    }

    @Test("Pages cover every item exactly once, same-second ties in one stable order, while newer items are written between pages", arguments: StoreBackend.allCases)
    func paging(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let grants = ledger.store.grants
            // Twelve grants in one second, five in the second before, three earlier apart.
            for index in 0..<12 { _ = try await grants.create(Self.grant("same \(index)"), for: "user_1", in: .test, now: Self.t0) }
            for index in 0..<5 { _ = try await grants.create(Self.grant("before \(index)"), for: "user_1", in: .test, now: Self.t0 - 1) }
            for index in 0..<3 { _ = try await grants.create(Self.grant("early \(index)"), for: "user_1", in: .test, now: Self.t0 - 100 * Int64(index + 1)) }
            let whole = try await Self.all(ledger.store, "user_1", limit: 500, now: Self.t0)
            #expect(whole.count == 20 && whole.allSatisfy { $0.kind == .grantCreated })
            #expect(try await Self.all(ledger.store, "user_1", limit: 500, now: Self.t0) == whole, "one order, read after read")
            for limit in [1, 3, 5, 7, 12, 19, 20] {
                #expect(try await Self.all(ledger.store, "user_1", limit: limit, now: Self.t0) == whole, "limit \(limit)")
            }

            // Newer grants written between pages never make a page repeat or skip an older item.
            var seen: [TimelineItem] = []
            var cursor: TimelineCursor?
            var round = 0
            repeat {
                let page = try await ledger.store.timeline.timeline(of: "user_1", in: .test, limit: 4, after: cursor, now: Self.t0)
                seen += page.items
                cursor = page.nextCursor
                round += 1
                _ = try await grants.create(Self.grant("newer \(round)"), for: "user_1", in: .test, now: Self.t0 + Int64(round))
            } while cursor != nil
            #expect(seen == whole)

            // The cursor survives its text form; others are refused.
            let page = try await ledger.store.timeline.timeline(of: "user_1", in: .test, limit: 2, after: nil, now: Self.t0)
            let next = try #require(page.nextCursor)
            #expect(TimelineCursor(encoded: next.encoded) == next)
            for bad in ["", "t1.", "abc", "t1.!!!", "t2." + next.encoded.dropFirst(3), "t1." + Data("x.1.y".utf8).base64EncodedString()] {
                #expect(TimelineCursor(encoded: bad) == nil, "\(bad)")
            }
        }
    }

    @Test("Refused consumes are counted per user, meter and day in one row, however many", arguments: StoreBackend.allCases)
    func refusalsCounted(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let period = UsagePeriod(start: Self.t0 - 10, end: Self.t0 + 40 * Self.day)
            _ = try await ledger.store.usage.apply([Self.consume("k", at: Self.t0, period: period, user: "user_2")], now: Self.t0 * 1000)
            for index in 0..<25 {
                _ = try await ledger.store.usage.apply(
                    [Self.consume("r\(index)", at: Self.t0 + Int64(index), period: period, user: "user_2")], now: (Self.t0 + Int64(index)) * 1000)
            }
            #expect(try await ledger.count("usageMark") == 1)
            let items = try await Self.all(ledger.store, "user_2", limit: 50, now: Self.t0)
            #expect(items.map(\.kind) == [.usageLimitHit])
            #expect(items.first?.summary.hasPrefix("radars: 25 consumes refused") == true)
        }
    }
}
