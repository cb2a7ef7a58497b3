import BillingCore
import BillingSamples
import BillingStore
import Foundation
import GRDB
import Testing

@Suite("Applying each event type to the ledger")
struct LedgerApplyTests {
    static let customerID = "cus_TqW7mZ2xLp9Kna"
    static let subscriptionID = "sub_1Sx4kLHd3QfR8sTaV9pWm2cE"
    static let invoiceID = "in_1Sx4kMHd3QfR8sTa0r7GJ2uQ"
    static let paymentMethodID = "pm_1Sx4jZHd3QfR8sTa4kT9sBnP"

    func applySample(_ type: String, created: Int64 = 1_780_000_000) async throws -> TestLedger {
        let ledger = try TestLedger()
        let body = SampleEvent.body(
            type: type, eventID: "evt_\(type.replacingOccurrences(of: ".", with: "_"))", created: created,
            apiVersion: StripeAPIVersion.pinned, livemode: false, account: nil)
        let pass = try await ledger.deliver([body])
        #expect(pass.processed == 1)
        #expect(pass.failed + pass.dead == 0, "\(type) failed to apply")
        return ledger
    }

    @Test("customer.created / updated keep e-mail, name, app user and default payment method", arguments: ["customer.created", "customer.updated"])
    func customer(type: String) async throws {
        let ledger = try await applySample(type)
        let row = try #require(try await ledger.row("customer", id: Self.customerID))
        #expect(row["email"] as String? == "ada@example.com")
        #expect(row["name"] as String? == "Ada Lovelace")
        #expect(row["appUserID"] as String? == "user_42")
        #expect(row["defaultPaymentMethod"] as String? == Self.paymentMethodID)
        #expect(row["vDeleted"] as Bool == false)
        #expect(row["vEventID"] as String == "evt_\(type.replacingOccurrences(of: ".", with: "_"))")
    }

    @Test("customer.deleted leaves a tombstone")
    func customerDeleted() async throws {
        let ledger = try await applySample("customer.deleted")
        let row = try #require(try await ledger.row("customer", id: Self.customerID))
        #expect(row["vDeleted"] as Bool == true)
    }

    @Test("Subscription events keep status, customer, period, items and cancellation", arguments: [
        ("customer.subscription.created", "active"), ("customer.subscription.updated", "active"),
        ("customer.subscription.deleted", "canceled"), ("customer.subscription.paused", "paused"),
        ("customer.subscription.resumed", "active"), ("customer.subscription.trial_will_end", "trialing"),
        ("customer.subscription.pending_update_applied", "active"), ("customer.subscription.pending_update_expired", "active"),
    ])
    func subscription(type: String, status: String) async throws {
        let ledger = try await applySample(type)
        let row = try #require(try await ledger.row("subscription", id: Self.subscriptionID))
        #expect(row["status"] as String == status)
        #expect(row["customer"] as String == Self.customerID)
        #expect(row["currentPeriodEnd"] as Int64? != nil)
        #expect(row["vTerminal"] as Bool == (status == "canceled"))
        let items = try await ledger.rows("SELECT * FROM subscriptionItem WHERE subscription = ?", [Self.subscriptionID])
        #expect(items.count == 1)
        #expect(items.first?["lookupKey"] as String? == "pro_monthly")
        #expect(items.first?["unitAmount"] as Int64? == 2000)
        #expect(items.first?["interval"] as String? == "month")
        if status == "canceled" {
            #expect(row["endedAt"] as Int64? != nil)
        }
    }

    @Test("Invoice events keep status, amounts to the cent and the subscription", arguments: [
        ("invoice.created", "draft"), ("invoice.finalized", "open"), ("invoice.updated", "paid"), ("invoice.paid", "paid"),
        ("invoice.payment_succeeded", "paid"), ("invoice.payment_failed", "open"), ("invoice.payment_action_required", "open"),
        ("invoice.voided", "void"), ("invoice.marked_uncollectible", "uncollectible"), ("invoice.overdue", "open"),
        ("invoice.will_be_due", "open"),
    ])
    func invoice(type: String, status: String) async throws {
        let ledger = try await applySample(type)
        let row = try #require(try await ledger.row("invoice", id: Self.invoiceID))
        #expect(row["status"] as String? == status)
        #expect(row["subscription"] as String? == Self.subscriptionID)
        #expect(row["customer"] as String? == Self.customerID)
        #expect(row["currency"] as String == "usd")
        #expect(row["subtotal"] as Int64 == 2000)
        #expect(row["discount"] as Int64 == 200)
        #expect(row["tax"] as Int64 == 144)
        #expect(row["total"] as Int64 == 1944)
        #expect(row["amountDue"] as Int64 == 1944)
        let paid = row["amountPaid"] as Int64
        #expect(paid == (status == "paid" ? 1944 : 0))
        #expect(row["amountRemaining"] as Int64 == 1944 - paid)
        #expect((row["paidAt"] as Int64? != nil) == (status == "paid"))
        #expect((row["voidedAt"] as Int64? != nil) == (status == "void"))
        let lines = try await ledger.rows("SELECT * FROM invoiceLine WHERE invoice = ? ORDER BY position", [Self.invoiceID])
        #expect(!lines.isEmpty)
        #expect(lines.map { $0["amount"] as Int64 }.reduce(0, +) == 2000)
    }

    @Test("invoice.deleted leaves a tombstone; invoice.upcoming is recorded and changes nothing")
    func invoiceDeletedAndUpcoming() async throws {
        let deleted = try await applySample("invoice.deleted")
        #expect(try await deleted.row("invoice", id: Self.invoiceID)?["vDeleted"] as Bool? == true)
        let upcoming = try await applySample("invoice.upcoming")
        #expect(try await upcoming.rows("SELECT * FROM invoice").isEmpty)
        let events = try await upcoming.inbox.list(.init())
        #expect(events.first?.status == .applied)
        #expect(events.first?.effect == "recorded")
    }

    @Test("invoice_payment.paid records the payment")
    func invoicePayment() async throws {
        let ledger = try await applySample("invoice_payment.paid")
        let row = try #require(try await ledger.rows("SELECT * FROM invoicePayment").first)
        #expect(row["invoice"] as String? == Self.invoiceID)
        #expect(row["amountPaid"] as Int64? == 1944)
        #expect(row["status"] as String? == "paid")
    }

    @Test("Payment method events keep only brand, last 4, expiry and fingerprint of the card", arguments: [
        "payment_method.attached", "payment_method.updated", "payment_method.automatically_updated", "payment_method.detached",
    ])
    func paymentMethod(type: String) async throws {
        let ledger = try await applySample(type)
        let row = try #require(try await ledger.row("paymentMethod", id: Self.paymentMethodID))
        #expect(row["brand"] as String? == "visa")
        #expect(row["last4"] as String? == "4242")
        #expect(row["expYear"] as Int64? != nil)
        #expect(row["fingerprint"] as String? != nil)
        #expect(row["customer"] as String? == (type == "payment_method.detached" ? nil : Self.customerID))
        #expect(row["vTerminal"] as Bool == (type == "payment_method.detached"))
        #expect(!row.hasColumn("raw"), "no raw card object is kept")
    }

    @Test("Checkout session events keep status and tie the app user to the customer", arguments: [
        ("checkout.session.completed", "complete"), ("checkout.session.expired", "expired"),
        ("checkout.session.async_payment_succeeded", "complete"), ("checkout.session.async_payment_failed", "complete"),
    ])
    func checkoutSession(type: String, status: String) async throws {
        let ledger = try await applySample(type)
        let row = try #require(try await ledger.rows("SELECT * FROM checkoutSession").first)
        #expect(row["status"] as String? == status)
        #expect(row["clientReferenceID"] as String? == "user_42")
        let links = try await ledger.rows("SELECT appUserID, customer FROM userLink")
        if status == "complete" {
            #expect(links.map { $0["appUserID"] as String } == ["user_42"])
            #expect(links.map { $0["customer"] as String } == [Self.customerID])
        }
    }

    @Test("entitlements.active_entitlement_summary.updated replaces the customer's active entitlements")
    func entitlements() async throws {
        let ledger = try await applySample("entitlements.active_entitlement_summary.updated")
        let keys = try await ledger.rows("SELECT lookupKey FROM activeEntitlement WHERE customer = ? ORDER BY lookupKey", [Self.customerID])
            .map { $0["lookupKey"] as String }
        #expect(keys == ["projects_unlimited", "storage_100gb"])
        // A newer summary with one entitlement replaces both.
        var summary = EventFactory.object("active_entitlement_summary")
        var list = summary["entitlements"] as! [String: Any]
        list["data"] = [(list["data"] as! [[String: Any]])[1]]
        summary["entitlements"] = list
        try await ledger.deliver([EventFactory.event(id: "evt_ent2", type: "entitlements.active_entitlement_summary.updated", created: 1_780_000_100, object: summary)])
        let after = try await ledger.rows("SELECT lookupKey FROM activeEntitlement WHERE customer = ?", [Self.customerID]).map { $0["lookupKey"] as String }
        #expect(after == ["storage_100gb"])
    }

    @Test("Catalog events: prices and products, deletions as tombstones", arguments: [
        ("price.created", "price", false), ("price.updated", "price", false), ("price.deleted", "price", true),
        ("product.created", "product", false), ("product.updated", "product", false), ("product.deleted", "product", true),
    ])
    func catalog(type: String, table: String, deleted: Bool) async throws {
        let ledger = try await applySample(type)
        let row = try #require(try await ledger.rows("SELECT * FROM \(table)").first)
        #expect(row["vDeleted"] as Bool == deleted)
        if table == "price" {
            #expect(row["lookupKey"] as String? == "pro_monthly")
            #expect(row["unitAmount"] as Int64? == 2000)
            #expect(row["interval"] as String? == "month")
        } else {
            #expect(row["name"] as String? == "Pro")
        }
    }

    @Test("Old (2023-08-16) and new API shapes give the same ledger row", arguments: [("subscription", "customer.subscription.updated"), ("invoice", "invoice.paid")])
    func apiVersionsAgree(name: String, type: String) async throws {
        let newer = try TestLedger()
        try await newer.deliver([EventFactory.event(id: "evt_new", type: type, created: 1_780_000_000, object: EventFactory.object(name))])
        let older = try TestLedger()
        let pass = try await older.deliver([
            EventFactory.event(id: "evt_new", type: type, created: 1_780_000_000, object: EventFactory.object("\(name)_2023-08-16"), apiVersion: "2023-08-16")
        ])
        #expect(pass.otherAPIVersion == 1)
        let table = name == "subscription" ? "subscription" : "invoice"
        let columns = ["status", "customer", "currentPeriodStart", "currentPeriodEnd", "subscription", "total", "tax", "amountPaid"]
        let a = try #require(try await newer.rows("SELECT * FROM \(table)").first)
        let b = try #require(try await older.rows("SELECT * FROM \(table)").first)
        for column in columns where a.hasColumn(column) {
            #expect(a[column] as DatabaseValue == b[column] as DatabaseValue, "\(column)")
        }
    }

    @Test("Unmodelled types are stored and marked ignored")
    func ignoredTypes() async throws {
        let ledger = try await applySample("charge.succeeded")
        let event = try #require(try await ledger.inbox.list(.init()).first)
        #expect(event.status == .ignored)
    }

    @Test("Test and live mode, and connected accounts, never mix")
    func keysSeparateModesAndAccounts() async throws {
        let ledger = try TestLedger()
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
        #expect(rows.map { $0["email"] as String? } == ["ada@example.com", "live@example.com", "ada@example.com"])
        #expect(rows.map { $0["vDeleted"] as Bool } == [false, false, true])
    }
}
