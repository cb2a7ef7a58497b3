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
    /// After every event of ``Lifecycle/customerLifecycle(_:)``: when reconcile's fetches answer.
    static let fetchedAt: Int64 = 1_900_000_000
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
    /// invoices, payment method or Checkout session.
    static func linkedEventIDs(_ bodies: [[UInt8]]) throws -> Set<String> {
        Set(try bodies.compactMap { body -> String? in
            let event = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
            let object = try #require((event["data"] as? [String: Any])?["object"] as? [String: Any])
            let id = object["id"] as? String ?? ""
            return ["cus_", "sub_", "in_", "cs_", "pm_"].contains { id.hasPrefix($0) } ? event["id"] as? String : nil
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
            // Reconcile run 7 repairs sub_L0 from Stripe's API.
            var subscription = EventFactory.object("subscription")
            subscription["id"] = "sub_L0"
            subscription["customer"] = "cus_L0"
            subscription["status"] = "canceled"
            let fetched = try Self.fetched(subscription, kind: .subscription, at: Self.fetchedAt)
            _ = try await store.reconciliation.reconcile([fetched], account: "", livemode: false, dryRun: false, trackSeen: false, run: 7)

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
            #expect(stripe.contains { $0.summary == "payment_method.detached on pm_L0" }, "a detached payment method's events stay with its customer")

            let repair = try #require(of(.reconcileRepair).first)
            #expect(repair.source == "reconcile" && repair.ref == "sub_L0" && repair.at == Self.fetchedAt)
            #expect(repair.summary.hasPrefix("Subscription sub_L0 repaired from Stripe's API: "), "\(repair.summary)")
            #expect(repair.summary.hasSuffix(" differed (now canceled) (reconcile run 7)"), "\(repair.summary)")

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

    /// An object as reconcile builds it from an API read at `fetchedAt`; a payment method that
    /// names no customer is final, as the detach event would make it.
    static func fetched(_ object: [String: Any], kind: LedgerObjectKind, at fetchedAt: Int64) throws -> LedgerSnapshot {
        let json = Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        let detached = kind == .paymentMethod && object["customer"] is NSNull
        return try LedgerSnapshot.decode(
            kind: kind, deletion: false, eventType: detached ? "payment_method.detached" : nil, eventID: "fetch:req_\(fetchedAt)",
            eventCreated: fetchedAt, objectJSON: json[...])
    }

    @Test("A reconcile run's repairs of a user's customer, invoice and payment method, and what it marks gone, show on that user's timeline naming the run, and on nobody else's", arguments: StoreBackend.allCases)
    func repairsOfARun(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver((Lifecycle.customerLifecycle(0) + Lifecycle.customerLifecycle(1)).map(\.body))
            let reconciliation = ledger.store.reconciliation
            var customer = EventFactory.object("customer")
            customer["id"] = "cus_L0"
            customer["name"] = "Renamed B 0"
            customer["email"] = "new0@example.com"
            customer["metadata"] = ["app_user_id": "user_0"]
            var settings = customer["invoice_settings"] as! [String: Any]
            settings["default_payment_method"] = NSNull()
            customer["invoice_settings"] = settings
            var invoice = EventFactory.object("invoice")
            invoice["id"] = "in_L0_1"
            invoice["customer"] = "cus_L0"
            invoice["status"] = "void"
            // Detached since the lifecycle: Stripe's object names no customer; the link still does.
            var method = EventFactory.object("payment_method")
            method["id"] = "pm_L0"
            method["customer"] = NSNull()
            var card = method["card"] as! [String: Any]
            card["exp_year"] = 2033
            method["card"] = card
            let page = [
                try Self.fetched(customer, kind: .customer, at: Self.fetchedAt), try Self.fetched(invoice, kind: .invoice, at: Self.fetchedAt + 1),
                try Self.fetched(method, kind: .paymentMethod, at: Self.fetchedAt + 2),
            ]
            let dry = try await reconciliation.reconcile(page, account: "", livemode: false, dryRun: true, trackSeen: false, run: 41)
            #expect(dry.drifts.count == 3 && dry.drifts.allSatisfy { $0.outcome == .dryRun })
            #expect(try await ledger.count("reconcileRepair") == 0, "a dry run logs nothing")

            let result = try await reconciliation.reconcile(page, account: "", livemode: false, dryRun: false, trackSeen: false, run: 42)
            #expect(result.drifts.map(\.outcome) == [.repaired, .repaired, .repaired], "\(result.drifts)")
            let repairs = try await Self.all(ledger.store, "user_0", limit: 50, now: Self.fetchedAt + 10).filter { $0.kind == .reconcileRepair }
            #expect(repairs.map(\.ref) == ["pm_L0", "in_L0_1", "cus_L0"], "newest first")
            #expect(repairs.map(\.at) == [Self.fetchedAt + 2, Self.fetchedAt + 1, Self.fetchedAt])
            #expect(repairs.allSatisfy { $0.source == "reconcile" && $0.summary.hasSuffix(" (reconcile run 42)") }, "\(repairs.map(\.summary))")
            #expect(repairs.last?.summary == "Customer cus_L0 repaired from Stripe's API: email differed (reconcile run 42)")
            #expect(repairs.first?.summary.hasPrefix("Payment method pm_L0 repaired from Stripe's API: ") == true)
            #expect(repairs.first?.summary.contains("(now detached)") == true, "\(repairs.first?.summary ?? "")")
            #expect(repairs.allSatisfy { $0.entitlement == nil })
            #expect(try await Self.all(ledger.store, "user_1", limit: 50, now: Self.fetchedAt + 10).filter { $0.kind == .reconcileRepair }.isEmpty)

            // Run 43 finds the subscription gone from Stripe.
            #expect(try await reconciliation.markGone(.subscription, id: "sub_L0", account: "", livemode: false, fetchedAt: Self.fetchedAt + 5, fetchID: "fetch:req_gone", run: 43))
            let gone = try #require(try await Self.all(ledger.store, "user_0", limit: 50, now: Self.fetchedAt + 10).first)
            #expect(gone.kind == .reconcileRepair && gone.ref == "sub_L0" && gone.at == Self.fetchedAt + 5)
            #expect(gone.summary == "Subscription sub_L0 is gone from Stripe; marked deleted (reconcile run 43)")
            #expect(try await Self.all(ledger.store, "user_1", limit: 50, now: Self.fetchedAt + 10).filter { $0.kind == .reconcileRepair }.isEmpty)
        }
    }

    @Test("A payment method's events show on its customer's user's timeline before and after it is detached", arguments: StoreBackend.allCases)
    func detachedPaymentMethod(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            func method(_ customer: String?, expYear: Int = 2030) -> [String: Any] {
                var object = EventFactory.object("payment_method")
                object["id"] = "pm_D1"
                object["customer"] = customer ?? NSNull()
                var card = object["card"] as! [String: Any]
                card["exp_year"] = expYear
                object["card"] = card
                return object
            }
            var customer = EventFactory.object("customer")
            customer["id"] = "cus_D1"
            customer["metadata"] = ["app_user_id": "user_d"]
            // The detach arrives before the attach: the link is made all the same.
            try await ledger.deliver([
                EventFactory.event(id: "evt_D1_1", type: "customer.created", created: Self.t0, object: customer),
                EventFactory.event(id: "evt_D1_4", type: "payment_method.detached", created: Self.t0 + 30, object: method(nil)),
                EventFactory.event(id: "evt_D1_2", type: "payment_method.attached", created: Self.t0 + 10, object: method("cus_D1")),
                EventFactory.event(id: "evt_D1_3", type: "payment_method.updated", created: Self.t0 + 20, object: method("cus_D1", expYear: 2031)),
            ])
            #expect(try await ledger.value("paymentMethod", "pm_D1", "customer") == nil, "Stripe's detached object names no customer")
            let items = try await Self.all(ledger.store, "user_d", limit: 50, now: Self.t0 + 100)
            #expect(items.filter { $0.kind == .stripeEvent }.map(\.ref) == ["evt_D1_4", "evt_D1_3", "evt_D1_2", "evt_D1_1"])
            #expect(items.first?.summary == "payment_method.detached on pm_D1")
            #expect(try await Self.all(ledger.store, "user_0", limit: 50, now: Self.t0 + 100).isEmpty)
            let links = try await ledger.rows("SELECT customer, firstSeen FROM paymentMethodCustomer WHERE paymentMethod = 'pm_D1'")
            #expect(links.map { $0["customer"] } == ["cus_D1"])
            #expect(links.map { $0.int("firstseen") } == [Self.t0 + 10], "the earliest sighting, whatever the order of delivery")
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
