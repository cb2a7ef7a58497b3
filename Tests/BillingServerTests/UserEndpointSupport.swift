import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// Stripe objects of the real shapes in `Fixtures/objects`, varied for the user endpoints'
/// tests, and a ledger filled by applying them as events through the real inbox and applier.
enum UserFixtures {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `Fixtures/<path>`.
    static func url(_ path: String) -> URL {
        root.appendingPathComponent("Fixtures").appendingPathComponent(path)
    }

    static func object(_ name: String) -> [String: Any] {
        let data = try! Data(contentsOf: url("objects/\(name).json"))
        return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    static func customer(_ id: String, user: String?, defaultPaymentMethod: String? = nil, created: Int64 = 1_769_939_695) -> [String: Any] {
        var object = object("customer")
        object["id"] = id
        object["created"] = created
        object["metadata"] = user.map { ["app_user_id": $0] } ?? [:]
        var settings = object["invoice_settings"] as! [String: Any]
        settings["default_payment_method"] = defaultPaymentMethod ?? NSNull()
        object["invoice_settings"] = settings
        return object
    }

    /// A subscription of the 2026 shape (periods on the items) with one item.
    static func subscription(
        _ id: String, customer: String, status: String, lookupKey: String = "pro_monthly", price: String = "price_ProMonthly",
        product: String = "prod_Pro", quantity: Int = 1, unitAmount: Int = 999, periodStart: Int64 = 1_769_940_000,
        periodEnd: Int64 = 1_772_359_200, latestInvoice: String? = nil, defaultPaymentMethod: String? = nil,
        members: [String: Any] = [:]
    ) -> [String: Any] {
        var object = object("subscription")
        object["id"] = id
        object["customer"] = customer
        object["status"] = status
        object["latest_invoice"] = latestInvoice ?? NSNull()
        object["default_payment_method"] = defaultPaymentMethod ?? NSNull()
        var items = object["items"] as! [String: Any]
        var item = (items["data"] as! [[String: Any]])[0]
        item["id"] = "si_\(id)"
        item["subscription"] = id
        item["quantity"] = quantity
        item["current_period_start"] = periodStart
        item["current_period_end"] = periodEnd
        var priceObject = item["price"] as! [String: Any]
        priceObject["id"] = price
        priceObject["lookup_key"] = lookupKey
        priceObject["product"] = product
        priceObject["unit_amount"] = unitAmount
        priceObject["unit_amount_decimal"] = String(unitAmount)
        item["price"] = priceObject
        item.removeValue(forKey: "plan")
        items["data"] = [item]
        items["url"] = "/v1/subscription_items?subscription=\(id)"
        object["items"] = items
        for (key, value) in members { object[key] = value }
        return object
    }

    static func invoice(
        _ id: String, customer: String, status: String, created: Int64, subscription: String? = nil, total: Int = 1944,
        currency: String = "usd", dueDate: Int64? = nil
    ) -> [String: Any] {
        var object = object("invoice")
        object["id"] = id
        object["customer"] = customer
        object["status"] = status
        object["created"] = created
        object["number"] = "N-\(id)"
        object["currency"] = currency
        object["due_date"] = dueDate ?? NSNull()
        object["amount_due"] = total
        object["amount_paid"] = status == "paid" ? total : 0
        object["amount_remaining"] = status == "paid" ? 0 : total
        object["hosted_invoice_url"] = status == "draft" ? NSNull() : "https://invoice.stripe.com/i/\(id)"
        object["invoice_pdf"] = status == "draft" ? NSNull() : "https://pay.stripe.com/invoice/\(id)/pdf"
        object["status_transitions"] = [
            "finalized_at": status == "draft" ? NSNull() : created + 1, "paid_at": status == "paid" ? created + 3 : NSNull(),
            "voided_at": NSNull(), "marked_uncollectible_at": NSNull(),
        ] as [String: Any]
        var parent = object["parent"] as! [String: Any]
        var details = parent["subscription_details"] as! [String: Any]
        details["subscription"] = subscription ?? NSNull()
        parent["subscription_details"] = details
        object["parent"] = parent
        var lines = object["lines"] as! [String: Any]
        lines["data"] = (lines["data"] as! [[String: Any]]).map { line in
            var line = line
            line["currency"] = currency
            line["invoice"] = id
            return line
        }
        object["lines"] = lines
        return object
    }

    /// A refunded charge of the 2023-08-16 shape, which names the invoice it paid.
    static func refundedCharge(_ id: String, customer: String, invoice: String?, amount: Int = 1944, refunded: Int) -> [String: Any] {
        var object = object("charge_refunded_2023-08-16")
        (object["id"], object["customer"], object["invoice"]) = (id, customer, invoice ?? NSNull())
        (object["amount"], object["amount_captured"], object["amount_refunded"]) = (amount, amount, refunded)
        object["refunded"] = refunded >= amount
        return object
    }

    static func paymentMethod(_ id: String, customer: String?, brand: String = "visa", last4: String = "4242", created: Int64 = 1_769_939_990) -> [String: Any] {
        var object = object("payment_method")
        object["id"] = id
        object["customer"] = customer ?? NSNull()
        object["created"] = created
        var card = object["card"] as! [String: Any]
        card["brand"] = brand
        card["last4"] = last4
        object["card"] = card
        return object
    }

    static func entitlements(customer: String, lookupKeys: [String]) -> [String: Any] {
        var object = object("active_entitlement_summary")
        object["customer"] = customer
        var list = object["entitlements"] as! [String: Any]
        list["data"] = lookupKeys.enumerated().map { index, key in
            ["id": "ent_\(customer)_\(index)", "object": "entitlements.active_entitlement", "feature": "feat_\(key)", "livemode": false, "lookup_key": key] as [String: Any]
        }
        object["entitlements"] = list
        return object
    }

    static func checkoutSession(_ id: String, customer: String, user: String, subscription: String) -> [String: Any] {
        var object = object("checkout_session")
        object["id"] = id
        object["customer"] = customer
        object["client_reference_id"] = user
        object["subscription"] = subscription
        object["metadata"] = [String: String]()
        return object
    }
}

/// Events for the user endpoints' ledger, applied through the real inbox and applier.
struct UserLedgerBuilder {
    private(set) var bodies: [[UInt8]] = []
    private var sequence = 0
    /// Event ids are this and a number: a second builder for the same ledger needs its own.
    private let eventPrefix: String

    init(eventPrefix: String = "evt_user_") {
        self.eventPrefix = eventPrefix
    }

    mutating func add(_ type: String, _ object: [String: Any], created: Int64 = 1_769_940_100, account: String? = nil, livemode: Bool = false) {
        sequence += 1
        var object = object
        object["livemode"] = livemode
        var envelope: [String: Any] = [
            "id": "\(eventPrefix)\(sequence)", "object": "event", "api_version": StripeAPIVersion.pinned, "created": created + Int64(sequence),
            "livemode": livemode, "pending_webhooks": 1, "type": type, "data": ["object": object],
            "request": ["id": NSNull(), "idempotency_key": NSNull()],
        ]
        if let account { envelope["account"] = account }
        bodies.append(Array(try! JSONSerialization.data(withJSONObject: envelope, options: [.sortedKeys])))
    }

    /// Stores and applies the events in an existing ledger.
    func apply(to ledger: TemporaryLedger) async throws {
        let deliveries = try bodies.map { body in
            InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
        }
        _ = try await SQLiteInbox(database: ledger.database).insert(deliveries)
        let pass = try await SQLiteApplier(database: ledger.database).drain()
        #expect(pass.failed + pass.dead == 0, "every event applies")
    }

    /// A fresh on-disk ledger holding the events' effects.
    func ledger() async throws -> TemporaryLedger {
        let ledger = try TemporaryLedger()
        let deliveries = try bodies.map { body in
            InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
        }
        _ = try await SQLiteInbox(database: ledger.database).insert(deliveries)
        let pass = try await SQLiteApplier(database: ledger.database).drain()
        #expect(pass.failed + pass.dead == 0, "every seeded event applies")
        return ledger
    }
}

let userAPIToken = "tok_users_0123456789abcdef"

/// The plan catalog `Fixtures/plans/<name>.yaml`.
func fixtureCatalog(_ name: String) throws -> PlanCatalog {
    try PlanCatalogLoader.load(path: UserFixtures.url("plans/\(name).yaml").path)
}

/// The application with the service API on, answering at a fixed `now`.
func userApplication(
    _ ledger: TemporaryLedger, catalog: PlanCatalog, now: Int64 = 1_770_000_000, scope: ServiceScope = .test
) -> some ApplicationProtocol {
    var dependencies = makeDependencies(ledger)
    dependencies.apiTokens = [userAPIToken]
    dependencies.plans = catalog
    dependencies.scope = scope
    dependencies.now = { Date(timeIntervalSince1970: TimeInterval(now)) }
    return makeApplication(dependencies)
}

let authorized: HTTPFields = [.authorization: "Bearer \(userAPIToken)"]

extension TestResponse {
    /// The body as text, for messages.
    var text: String { String(decoding: body.readableBytesView, as: UTF8.self) }
}

/// A JSON value as compact JSON text with sorted keys, to compare objects of mixed types.
func jsonText(_ value: Any?) -> String {
    guard let value, JSONSerialization.isValidJSONObject(value),
        let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
    else { return String(describing: value) }
    return String(decoding: data, as: UTF8.self)
}

/// The JSON text of an amount object: `{"amount":999,"currency":"usd","decimal":"9.99"}`.
func moneyText(_ amount: Int, _ currency: String, _ decimal: String) -> String {
    #"{"amount":\#(amount),"currency":"\#(currency)","decimal":"\#(decimal)"}"#
}
