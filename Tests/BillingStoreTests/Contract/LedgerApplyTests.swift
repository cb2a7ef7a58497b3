import BillingCore
import BillingSamples
import BillingStore
import Foundation
import Testing

@Suite("Applying each event type to the ledger, on both backends")
struct LedgerApplyTests {
    static let customerID = "cus_TqW7mZ2xLp9Kna"
    static let subscriptionID = "sub_1Sx4kLHd3QfR8sTaV9pWm2cE"
    static let invoiceID = "in_1Sx4kMHd3QfR8sTa0r7GJ2uQ"
    static let paymentMethodID = "pm_1Sx4jZHd3QfR8sTa4kT9sBnP"

    /// Runs `body` on a fresh ledger of `backend` that applied the sample event of `type`.
    func withSample(
        _ backend: StoreBackend, _ type: String, created: Int64 = 1_780_000_000, _ body: (LedgerUnderTest) async throws -> Void
    ) async throws {
        try await withLedger(backend) { ledger in
            try await applySample(type, to: ledger, created: created)
            try await body(ledger)
        }
    }

    func applySample(_ type: String, to ledger: LedgerUnderTest, created: Int64 = 1_780_000_000) async throws {
        let body = SampleEvent.body(
            type: type, eventID: "evt_\(type.replacingOccurrences(of: ".", with: "_"))", created: created,
            apiVersion: StripeAPIVersion.pinned, livemode: false, account: nil)
        let pass = try await ledger.deliver([body])
        #expect(pass.processed == 1)
        #expect(pass.failed + pass.dead == 0, "\(type) failed to apply")
    }

    @Test("customer.created / updated keep e-mail, name, app user and default payment method",
        arguments: StoreBackend.allCases, ["customer.created", "customer.updated"])
    func customer(_ backend: StoreBackend, type: String) async throws {
        try await withSample(backend, type) { ledger in
            let row = try #require(try await ledger.row("customer", id: Self.customerID))
            #expect(row["email"] == "ada@example.com")
            #expect(row["name"] == "Ada Lovelace")
            #expect(row["appUserID"] == "user_42")
            #expect(row["defaultPaymentMethod"] == Self.paymentMethodID)
            #expect(row.bool("vDeleted") == false)
            #expect(row["vEventID"] == "evt_\(type.replacingOccurrences(of: ".", with: "_"))")
        }
    }

    @Test("customer.deleted leaves a tombstone", arguments: StoreBackend.allCases)
    func customerDeleted(_ backend: StoreBackend) async throws {
        try await withSample(backend, "customer.deleted") { ledger in
            let row = try #require(try await ledger.row("customer", id: Self.customerID))
            #expect(row.bool("vDeleted") == true)
        }
    }

    @Test("Subscription events keep status, customer, period, items and cancellation", arguments: StoreBackend.allCases, [
        ("customer.subscription.created", "active"), ("customer.subscription.updated", "active"),
        ("customer.subscription.deleted", "canceled"), ("customer.subscription.paused", "paused"),
        ("customer.subscription.resumed", "active"), ("customer.subscription.trial_will_end", "trialing"),
        ("customer.subscription.pending_update_applied", "active"), ("customer.subscription.pending_update_expired", "active"),
    ])
    func subscription(_ backend: StoreBackend, _ sample: (String, String)) async throws {
        let (type, status) = sample
        try await withSample(backend, type) { ledger in
            let row = try #require(try await ledger.row("subscription", id: Self.subscriptionID))
            #expect(row["status"] == status)
            #expect(row["customer"] == Self.customerID)
            #expect(row.int("currentPeriodEnd") != nil)
            #expect(row.bool("vTerminal") == (status == "canceled"))
            let items = try await ledger.rows("SELECT * FROM subscriptionItem WHERE subscription = '\(Self.subscriptionID)'")
            #expect(items.count == 1)
            #expect(items.first?["lookupKey"] == "pro_monthly")
            #expect(items.first?.int("unitAmount") == 2000)
            #expect(items.first?["interval"] == "month")
            if status == "canceled" {
                #expect(row.int("endedAt") != nil)
            }
        }
    }

    @Test("Invoice events keep status, amounts to the cent and the subscription", arguments: StoreBackend.allCases, [
        ("invoice.created", "draft"), ("invoice.finalized", "open"), ("invoice.updated", "paid"), ("invoice.paid", "paid"),
        ("invoice.payment_succeeded", "paid"), ("invoice.payment_failed", "open"), ("invoice.payment_action_required", "open"),
        ("invoice.voided", "void"), ("invoice.marked_uncollectible", "uncollectible"), ("invoice.overdue", "open"),
        ("invoice.will_be_due", "open"),
    ])
    func invoice(_ backend: StoreBackend, _ sample: (String, String)) async throws {
        let (type, status) = sample
        try await withSample(backend, type) { ledger in
            let row = try #require(try await ledger.row("invoice", id: Self.invoiceID))
            #expect(row["status"] == status)
            #expect(row["subscription"] == Self.subscriptionID)
            #expect(row["customer"] == Self.customerID)
            #expect(row["currency"] == "usd")
            #expect(row.int("subtotal") == 2000)
            #expect(row.int("discount") == 200)
            #expect(row.int("tax") == 144)
            #expect(row.int("total") == 1944)
            #expect(row.int("amountDue") == 1944)
            let paid = try #require(row.int("amountPaid"))
            #expect(paid == (status == "paid" ? 1944 : 0))
            #expect(row.int("amountRemaining") == 1944 - paid)
            #expect((row.int("paidAt") != nil) == (status == "paid"))
            #expect((row.int("voidedAt") != nil) == (status == "void"))
            let lines = try await ledger.rows("SELECT * FROM invoiceLine WHERE invoice = '\(Self.invoiceID)' ORDER BY position")
            #expect(!lines.isEmpty)
            #expect(lines.compactMap { $0.int("amount") }.reduce(0, +) == 2000)
        }
    }

    @Test("invoice.deleted leaves a tombstone", arguments: StoreBackend.allCases)
    func invoiceDeleted(_ backend: StoreBackend) async throws {
        try await withSample(backend, "invoice.deleted") { (ledger: LedgerUnderTest) async throws in
            #expect(try await ledger.row("invoice", id: Self.invoiceID)?.bool("vDeleted") == true)
        }
    }

    @Test("invoice.upcoming is recorded and changes nothing", arguments: StoreBackend.allCases)
    func invoiceUpcoming(_ backend: StoreBackend) async throws {
        try await withSample(backend, "invoice.upcoming") { ledger in
            #expect(try await ledger.rows("SELECT * FROM invoice").isEmpty)
            let events = try await ledger.inbox.list(.init())
            #expect(events.first?.status == .applied)
            #expect(events.first?.effect == "recorded")
        }
    }

    @Test("invoice_payment.paid records the payment", arguments: StoreBackend.allCases)
    func invoicePayment(_ backend: StoreBackend) async throws {
        try await withSample(backend, "invoice_payment.paid") { ledger in
            let row = try #require(try await ledger.rows("SELECT * FROM invoicePayment").first)
            #expect(row["invoice"] == Self.invoiceID)
            #expect(row.int("amountPaid") == 1944)
            #expect(row["status"] == "paid")
        }
    }

    @Test("Payment method events keep only brand, last 4, expiry and fingerprint of the card", arguments: StoreBackend.allCases, [
        "payment_method.attached", "payment_method.updated", "payment_method.automatically_updated", "payment_method.detached",
    ])
    func paymentMethod(_ backend: StoreBackend, type: String) async throws {
        try await withSample(backend, type) { ledger in
            let row = try #require(try await ledger.row("paymentMethod", id: Self.paymentMethodID))
            #expect(row["brand"] == "visa")
            #expect(row["last4"] == "4242")
            #expect(row.int("expYear") != nil)
            #expect(row["fingerprint"] != nil)
            #expect(row["customer"] == (type == "payment_method.detached" ? nil : Self.customerID))
            #expect(row.bool("vTerminal") == (type == "payment_method.detached"))
            #expect(!row.hasColumn("raw"), "no raw card object is kept")
        }
    }

    @Test("Checkout session events keep status and tie the app user to the customer", arguments: StoreBackend.allCases, [
        ("checkout.session.completed", "complete"), ("checkout.session.expired", "expired"),
        ("checkout.session.async_payment_succeeded", "complete"), ("checkout.session.async_payment_failed", "complete"),
    ])
    func checkoutSession(_ backend: StoreBackend, _ sample: (String, String)) async throws {
        let (type, status) = sample
        try await withSample(backend, type) { ledger in
            let row = try #require(try await ledger.rows("SELECT * FROM checkoutSession").first)
            #expect(row["status"] == status)
            #expect(row["clientReferenceID"] == "user_42")
            let links = try await ledger.rows("SELECT appUserID, customer FROM userLink")
            if status == "complete" {
                #expect(links.map { $0["appUserID"] } == ["user_42"])
                #expect(links.map { $0["customer"] } == [Self.customerID])
            }
        }
    }

    @Test("entitlements.active_entitlement_summary.updated replaces the customer's active entitlements", arguments: StoreBackend.allCases)
    func entitlements(_ backend: StoreBackend) async throws {
        try await withSample(backend, "entitlements.active_entitlement_summary.updated") { ledger in
            let keys = try await ledger.rows("SELECT lookupKey FROM activeEntitlement WHERE customer = '\(Self.customerID)' ORDER BY lookupKey")
                .map { $0["lookupKey"] }
            #expect(keys == ["projects_unlimited", "storage_100gb"])
            // A newer summary with one entitlement replaces both.
            var summary = EventFactory.object("active_entitlement_summary")
            var list = summary["entitlements"] as! [String: Any]
            list["data"] = [(list["data"] as! [[String: Any]])[1]]
            summary["entitlements"] = list
            try await ledger.deliver([
                EventFactory.event(id: "evt_ent2", type: "entitlements.active_entitlement_summary.updated", created: 1_780_000_100, object: summary)
            ])
            let after = try await ledger.rows("SELECT lookupKey FROM activeEntitlement WHERE customer = '\(Self.customerID)'").map { $0["lookupKey"] }
            #expect(after == ["storage_100gb"])
        }
    }

    @Test("Catalog events: prices and products, deletions as tombstones", arguments: StoreBackend.allCases, [
        ("price.created", "price", false), ("price.updated", "price", false), ("price.deleted", "price", true),
        ("product.created", "product", false), ("product.updated", "product", false), ("product.deleted", "product", true),
    ])
    func catalog(_ backend: StoreBackend, _ sample: (String, String, Bool)) async throws {
        let (type, table, deleted) = sample
        try await withSample(backend, type) { ledger in
            let row = try #require(try await ledger.rows("SELECT * FROM \(table)").first)
            #expect(row.bool("vDeleted") == deleted)
            if table == "price" {
                #expect(row["lookupKey"] == "pro_monthly")
                #expect(row.int("unitAmount") == 2000)
                #expect(row["interval"] == "month")
            } else {
                #expect(row["name"] == "Pro")
            }
        }
    }

    @Test("Old (2023-08-16) and new API shapes give the same ledger row",
        arguments: StoreBackend.allCases, [("subscription", "customer.subscription.updated"), ("invoice", "invoice.paid")])
    func apiVersionsAgree(_ backend: StoreBackend, _ sample: (String, String)) async throws {
        let (name, type) = sample
        var rows: [LedgerRow] = []
        try await withLedger(backend) { newer in
            try await newer.deliver([EventFactory.event(id: "evt_new", type: type, created: 1_780_000_000, object: EventFactory.object(name))])
            rows.append(try #require(try await newer.rows("SELECT * FROM \(name)").first))
        }
        try await withLedger(backend) { older in
            let pass = try await older.deliver([
                EventFactory.event(
                    id: "evt_new", type: type, created: 1_780_000_000, object: EventFactory.object("\(name)_2023-08-16"), apiVersion: "2023-08-16")
            ])
            #expect(pass.otherAPIVersion == 1)
            rows.append(try #require(try await older.rows("SELECT * FROM \(name)").first))
        }
        let columns = ["status", "customer", "currentPeriodStart", "currentPeriodEnd", "subscription", "total", "tax", "amountPaid"]
        for column in columns where rows[0].hasColumn(column) {
            #expect(rows[0][column] == rows[1][column], "\(column)")
        }
    }

    @Test("Unmodelled types are stored and marked ignored", arguments: StoreBackend.allCases)
    func ignoredTypes(_ backend: StoreBackend) async throws {
        try await withSample(backend, "charge.succeeded") { ledger in
            let event = try #require(try await ledger.inbox.list(.init()).first)
            #expect(event.status == .ignored)
        }
    }

    @Test("Test and live mode, and connected accounts, never mix", arguments: StoreBackend.allCases)
    func keysSeparateModesAndAccounts(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            var live = EventFactory.object("customer")
            live["livemode"] = true
            live["email"] = "live@example.com"
            try await ledger.deliver([
                EventFactory.event(id: "evt_t", type: "customer.updated", created: 10, object: EventFactory.object("customer")),
                EventFactory.event(id: "evt_l", type: "customer.updated", created: 5, object: live, livemode: true),
                EventFactory.event(id: "evt_a", type: "customer.deleted", created: 20, object: EventFactory.object("customer"), account: "acct_1"),
            ])
            let rows = try await ledger.rows("SELECT account, livemode, email, vDeleted FROM customer ORDER BY account, livemode")
            #expect(rows.count == 3)
            #expect(rows.map { $0["email"] } == ["ada@example.com", "live@example.com", "ada@example.com"])
            #expect(rows.map { $0.bool("vDeleted") } == [false, false, true])
        }
    }
}
