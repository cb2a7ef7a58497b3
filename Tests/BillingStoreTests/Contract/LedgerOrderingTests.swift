import BillingCore
import BillingSamples
import BillingStore
import Foundation
import GRDB
import Testing

/// Realistic lifecycles of several customers, as the events Stripe would send, in the order
/// Stripe created them. Many events share a second, as they do in Stripe.
enum Lifecycle {
    static let day: Int64 = 86_400

    static func events(customers: Int = 3) -> [[UInt8]] {
        var events: [(created: Int64, body: [UInt8])] = []
        for index in 0..<customers {
            events += customerLifecycle(index)
        }
        // Stripe's order: by creation time; the generator's order breaks ties.
        return events.enumerated().sorted { ($0.element.created, $0.offset) < ($1.element.created, $1.offset) }.map(\.element.body)
    }

    static func customerLifecycle(_ n: Int) -> [(created: Int64, body: [UInt8])] {
        let t0: Int64 = 1_780_000_000 + Int64(n) * 7
        let customerID = "cus_L\(n)", subscriptionID = "sub_L\(n)", methodID = "pm_L\(n)", sessionID = "cs_test_L\(n)"
        var out: [(Int64, [UInt8])] = []
        var sequence = 0
        func emit(_ type: String, _ created: Int64, _ object: [String: Any]) {
            sequence += 1
            out.append((created, EventFactory.event(id: "evt_L\(n)_\(sequence)", type: type, created: created, object: object)))
        }

        func customer(name: String = "Customer \(n)", defaultMethod: String? = nil) -> [String: Any] {
            var object = EventFactory.object("customer")
            object["id"] = customerID
            object["name"] = name
            object["email"] = "c\(n)@example.com"
            object["metadata"] = ["app_user_id": "user_\(n)"]
            var settings = object["invoice_settings"] as! [String: Any]
            settings["default_payment_method"] = defaultMethod ?? NSNull()
            object["invoice_settings"] = settings
            return object
        }
        func subscription(_ status: String, price: String = "price_1SmQ2aHd3QfR8sTaYq7Vh3Lc", cancelAtPeriodEnd: Bool = false,
                          canceledAt: Int64? = nil, endedAt: Int64? = nil, periodStart: Int64, periodEnd: Int64) -> [String: Any] {
            var object = EventFactory.object("subscription")
            object["id"] = subscriptionID
            object["customer"] = customerID
            object["status"] = status
            object["cancel_at_period_end"] = cancelAtPeriodEnd
            object["canceled_at"] = canceledAt.map { $0 as Any } ?? NSNull()
            object["ended_at"] = endedAt.map { $0 as Any } ?? NSNull()
            var items = object["items"] as! [String: Any]
            var item = (items["data"] as! [[String: Any]])[0]
            item["id"] = "si_L\(n)"
            item["subscription"] = subscriptionID
            item["current_period_start"] = periodStart
            item["current_period_end"] = periodEnd
            var priceObject = item["price"] as! [String: Any]
            if price != priceObject["id"] as! String {
                priceObject = EventFactory.object("price_yearly")
            }
            item["price"] = priceObject
            items["data"] = [item]
            object["items"] = items
            return object
        }
        func invoice(_ k: Int, _ status: String, total: Int64, created: Int64, finalizedAt: Int64? = nil, paidAt: Int64? = nil, attempts: Int = 0) -> [String: Any] {
            var object = EventFactory.object("invoice")
            object["id"] = "in_L\(n)_\(k)"
            object["customer"] = customerID
            object["status"] = status
            object["created"] = created
            object["attempt_count"] = attempts
            object["amount_paid"] = status == "paid" ? total : 0
            object["amount_remaining"] = status == "paid" ? 0 : total
            object["status_transitions"] = [
                "finalized_at": finalizedAt.map { $0 as Any } ?? NSNull(), "paid_at": paidAt.map { $0 as Any } ?? NSNull(),
                "voided_at": NSNull(), "marked_uncollectible_at": NSNull(),
            ] as [String: Any]
            var parent = object["parent"] as! [String: Any]
            var details = parent["subscription_details"] as! [String: Any]
            details["subscription"] = subscriptionID
            parent["subscription_details"] = details
            object["parent"] = parent
            return object
        }
        func paymentMethod(attached: Bool, expYear: Int = 2030) -> [String: Any] {
            var object = EventFactory.object("payment_method")
            object["id"] = methodID
            object["customer"] = attached ? customerID : NSNull()
            var card = object["card"] as! [String: Any]
            card["exp_year"] = expYear
            object["card"] = card
            return object
        }
        func entitlements(_ keys: [String]) -> [String: Any] {
            var object = EventFactory.object("active_entitlement_summary")
            object["customer"] = customerID
            var list = object["entitlements"] as! [String: Any]
            list["data"] = keys.map { key in
                ["id": "ent_L\(n)_\(key)", "object": "entitlements.active_entitlement", "feature": "feat_\(key)", "livemode": false, "lookup_key": key] as [String: Any]
            }
            object["entitlements"] = list
            return object
        }
        func session() -> [String: Any] {
            var object = EventFactory.object("checkout_session")
            object["id"] = sessionID
            object["customer"] = customerID
            object["client_reference_id"] = "user_\(n)"
            object["subscription"] = subscriptionID
            return object
        }

        let signup = t0 + 60, trialEnd = signup + 14 * day
        emit("customer.created", t0, customer())
        // Checkout completes: a burst of events in one second.
        emit("checkout.session.completed", signup, session())
        emit("payment_method.attached", signup, paymentMethod(attached: true))
        emit("customer.updated", signup, customer(defaultMethod: methodID))
        emit("customer.subscription.created", signup, subscription("incomplete", periodStart: signup, periodEnd: trialEnd))
        emit("customer.subscription.updated", signup, subscription("trialing", periodStart: signup, periodEnd: trialEnd))
        emit("invoice.created", signup, invoice(1, "draft", total: 0, created: signup))
        emit("invoice.finalized", signup, invoice(1, "open", total: 0, created: signup, finalizedAt: signup))
        emit("invoice.paid", signup, invoice(1, "paid", total: 0, created: signup, finalizedAt: signup, paidAt: signup))
        emit("entitlements.active_entitlement_summary.updated", signup + 1, entitlements(["projects_unlimited", "storage_100gb"]))
        // Trial ends; the first charge fails, the retry succeeds three days later.
        let periodEnd1 = trialEnd + 30 * day
        emit("customer.subscription.updated", trialEnd, subscription("active", periodStart: trialEnd, periodEnd: periodEnd1))
        emit("invoice.created", trialEnd, invoice(2, "draft", total: 1944, created: trialEnd))
        emit("invoice.finalized", trialEnd + 3600, invoice(2, "open", total: 1944, created: trialEnd, finalizedAt: trialEnd + 3600))
        emit("invoice.payment_failed", trialEnd + 3605, invoice(2, "open", total: 1944, created: trialEnd, finalizedAt: trialEnd + 3600, attempts: 1))
        emit("customer.subscription.updated", trialEnd + 3605, subscription("past_due", periodStart: trialEnd, periodEnd: periodEnd1))
        let retry = trialEnd + 3 * day
        emit("payment_method.updated", retry - 60, paymentMethod(attached: true, expYear: 2031))
        emit("invoice.paid", retry, invoice(2, "paid", total: 1944, created: trialEnd, finalizedAt: trialEnd + 3600, paidAt: retry, attempts: 2))
        emit("invoice.payment_succeeded", retry, invoice(2, "paid", total: 1944, created: trialEnd, finalizedAt: trialEnd + 3600, paidAt: retry, attempts: 2))
        emit("customer.subscription.updated", retry, subscription("active", periodStart: trialEnd, periodEnd: periodEnd1))
        // Plan change to yearly, then cancel at period end, then the end.
        let change = trialEnd + 10 * day, yearEnd = change + 365 * day
        emit("customer.subscription.updated", change, subscription("active", price: "price_1SmQ2bHd3QfR8sTaR5zW8nJd", periodStart: change, periodEnd: yearEnd))
        emit("invoice.created", change, invoice(3, "draft", total: 19_900, created: change))
        emit("invoice.finalized", change, invoice(3, "open", total: 19_900, created: change, finalizedAt: change))
        emit("invoice.paid", change, invoice(3, "paid", total: 19_900, created: change, finalizedAt: change, paidAt: change))
        let cancel = change + 20 * day
        emit("customer.subscription.updated", cancel, subscription("active", price: "price_1SmQ2bHd3QfR8sTaR5zW8nJd", cancelAtPeriodEnd: true, canceledAt: cancel, periodStart: change, periodEnd: yearEnd))
        emit("customer.subscription.deleted", yearEnd, subscription("canceled", price: "price_1SmQ2bHd3QfR8sTaR5zW8nJd", cancelAtPeriodEnd: true, canceledAt: cancel, endedAt: yearEnd, periodStart: change, periodEnd: yearEnd))
        emit("entitlements.active_entitlement_summary.updated", yearEnd, entitlements([]))
        emit("payment_method.detached", yearEnd + 10, paymentMethod(attached: false, expYear: 2031))
        // Two profile edits in one second: ambiguous, so the customer is marked for re-fetch.
        emit("customer.updated", yearEnd + 100, customer(name: "Renamed A \(n)", defaultMethod: nil))
        emit("customer.updated", yearEnd + 100, customer(name: "Renamed B \(n)", defaultMethod: nil))
        if n == 2 {
            emit("customer.deleted", yearEnd + 200, customer(name: "Renamed B \(n)"))
        }
        return out
    }
}

@Suite("Ordering: any delivery order gives the in-order ledger, on both backends")
struct LedgerOrderingTests {
    static let inOrder = Lifecycle.events()

    /// The dump of the ledger that in-order, duplicate-free delivery gives on `backend`.
    static func referenceDump(_ backend: StoreBackend) async throws -> String {
        var dump = ""
        try await withLedger(backend) { ledger in
            try await ledger.deliver(inOrder)
            dump = try await ledger.dump()
        }
        return dump
    }

    @Test("In-order delivery ends in the true final state", arguments: StoreBackend.allCases)
    func inOrderIsTrue(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            try await ledger.deliver(Self.inOrder)
            for n in 0..<3 {
                let subscription = try #require(try await ledger.row("subscription", id: "sub_L\(n)"))
                #expect(subscription["status"] == "canceled")
                #expect(subscription.bool("cancelAtPeriodEnd") == true)
                let items = try await ledger.rows("SELECT price FROM subscriptionItem WHERE subscription = 'sub_L\(n)'")
                #expect(items.map { $0["price"] } == ["price_1SmQ2bHd3QfR8sTaR5zW8nJd"])
                #expect(try await ledger.row("invoice", id: "in_L\(n)_2")?["status"] == "paid")
                #expect(try await ledger.row("invoice", id: "in_L\(n)_2")?.int("amountPaid") == 1944)
                let method = try #require(try await ledger.row("paymentMethod", id: "pm_L\(n)"))
                #expect(method["customer"] == nil)
                #expect(method.int("expYear") == 2031)
                #expect(try await ledger.rows("SELECT * FROM activeEntitlement WHERE customer = 'cus_L\(n)'").isEmpty)
                let customer = try #require(try await ledger.row("customer", id: "cus_L\(n)"))
                #expect(customer.bool("vDeleted") == (n == 2))
                #expect(customer.bool("needsRefetch") == (n != 2), "same-second edits are ambiguous")
                #expect(try await ledger.rows("SELECT * FROM userLink WHERE appUserID = 'user_\(n)'").count == 1)
            }
        }
    }

    /// Seeds per block of ``randomOrders(_:block:)``: SQLite runs 1,000 orders in memory; each
    /// PostgreSQL order needs a database of its own, so it runs the first 5 seeds of every block.
    static func seeds(_ backend: StoreBackend, block: Int) -> Range<Int> {
        switch backend {
        case .sqlite: (block * 100)..<(block * 100 + 100)
        case .postgres: (block * 100)..<(block * 100 + 5)
        }
    }

    /// Even seeds go through the inbox and the applier (`insert`, then `drain`: the path of
    /// reconcile's recoveries and retries); odd seeds through the group commit that answers a
    /// webhook 2xx (`ingest`: stored and applied in one transaction), with nothing left queued.
    @Test("Seeded random orders with random duplicates end in the in-order ledger (1,000 on SQLite, 50 on PostgreSQL; half through the inbox and applier, half through the live ingest)",
        arguments: StoreBackend.allCases, 0..<10)
    func randomOrders(_ backend: StoreBackend, block: Int) async throws {
        let reference = try await Self.referenceDump(backend)
        for seed in Self.seeds(backend, block: block) {
            var random = SplitMix64(seed: UInt64(seed))
            var deliveries: [[UInt8]] = []
            for body in Self.inOrder {
                deliveries.append(body)
                if Int.random(in: 0..<10, using: &random) < 2 {
                    for _ in 0..<Int.random(in: 1...2, using: &random) { deliveries.append(body) }
                }
            }
            deliveries.shuffle(using: &random)
            var dump = ""
            try await withLedger(backend) { ledger in
                // Deliveries arrive in bursts; the applier runs between them.
                var index = 0
                while index < deliveries.count {
                    let burst = Int.random(in: 1...12, using: &random)
                    let bodies = Array(deliveries[index..<min(index + burst, deliveries.count)])
                    if seed % 2 == 0 {
                        try await ledger.deliver(bodies)
                    } else {
                        let queued = try await ledger.ingest(bodies)
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

    @Test("Replay rebuilds exactly the live ledger", arguments: StoreBackend.allCases)
    func replayEqualsLive(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            var random = SplitMix64(seed: 42)
            try await ledger.deliver(Self.inOrder.shuffled(using: &random))
            let live = try await ledger.dump()
            let pass = try await ledger.maintenance.replay(applier: ledger.applier, progress: { _ in })
            #expect(pass.processed == Self.inOrder.count)
            #expect(try await ledger.dump() == live)
        }
    }

    @Test("A deleted object never comes back, whatever arrives after", arguments: StoreBackend.allCases)
    func tombstones(backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            let customer = EventFactory.object("customer")
            let id = customer["id"] as! String
            try await ledger.deliver([EventFactory.event(id: "evt_del", type: "customer.deleted", created: 100, object: customer)])
            var renamed = customer
            renamed["name"] = "Back from the dead"
            let pass = try await ledger.deliver([
                EventFactory.event(id: "evt_old", type: "customer.updated", created: 50, object: renamed),
                EventFactory.event(id: "evt_later", type: "customer.updated", created: 200, object: renamed),
            ])
            #expect(pass.stale == 2)
            #expect(try await ledger.value("customer", id, "vDeleted") == "1")
            #expect(try await ledger.value("customer", id, "name") == "Ada Lovelace")
        }
    }

    @Test("A poison event ends dead after bounded retries without blocking the events behind it", arguments: StoreBackend.allCases)
    func poisonEvent(backend: StoreBackend) async throws {
        try await withLedger(backend, configuration: .init(maximumAttempts: 3, firstRetryDelay: .zero)) { ledger in
            let poison = Array(#"{"id":"evt_poison","object":"event","type":"customer.subscription.updated","created":1,"livemode":false,"data":{"object":{"id":42,"status":["nonsense"]}}}"#.utf8)
            let good = EventFactory.event(id: "evt_good", type: "customer.updated", created: 2, object: EventFactory.object("customer"))
            let first = try await ledger.deliver([poison, good])
            #expect(first.applied == 1)
            #expect(first.failed == 1)
            #expect(try await ledger.value("customer", "cus_TqW7mZ2xLp9Kna", "id") != nil)
            try await ledger.applier.drain()
            try await ledger.applier.drain()
            let events = try await ledger.inbox.list(.init(statuses: [.dead]))
            #expect(events.map(\.eventID) == ["evt_poison"])
            #expect(events.first?.attempts == 3)
            #expect(events.first?.lastError?.contains("subscription") == true)
            // An operator re-queues it; it fails again, but is back in the queue first.
            #expect(try await ledger.inbox.retry(eventID: "evt_poison", account: nil, livemode: false))
            #expect(try await ledger.inbox.list(.init(statuses: [.pending])).map(\.eventID) == ["evt_poison"])
        }
    }

    @Test("Failed events wait for their backoff before the next try", arguments: StoreBackend.allCases)
    func backoff(backend: StoreBackend) async throws {
        try await withLedger(backend, configuration: .init(maximumAttempts: 5, firstRetryDelay: .seconds(60))) { ledger in
            let poison = Array(#"{"id":"evt_p","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1","currency":7}}}"#.utf8)
            try await ledger.deliver([poison])
            let again = try await ledger.applier.drain()
            #expect(again.processed == 0, "not due for about a minute")
            let later = try await ledger.applier.drain(now: { Int64(Date().timeIntervalSince1970 * 1000) + 120_000 }, progress: { _ in })
            #expect(later.processed == 1)
        }
    }
}
