import BillingCore
import Foundation
import GRDB

/// What applying one snapshot did to the ledger.
public enum ApplyEffect: String, Sendable, Codable {
    /// The snapshot was newer and is now the ledger's state of the object.
    case applied
    /// The ledger already held a newer snapshot; nothing changed.
    case stale
    /// The same event had already shaped the object.
    case unchanged
    /// Tied with the held snapshot on all evidence; the ledger chose by event id and marked the
    /// object for re-fetch.
    case ambiguous
    /// Stored for the record, nothing in the ledger to change (`invoice.upcoming`).
    case recorded
}

/// Writes snapshots into the ledger tables under the version guard. Every method runs inside
/// the caller's transaction.
enum LedgerWriter {
    /// Applies one snapshot for an account ('' = platform) and mode.
    static func apply(_ snapshot: LedgerSnapshot, account: String, livemode: Bool, db: Database) throws -> ApplyEffect {
        let table = Self.table(snapshot.kind)
        let key: StatementArguments = [account, livemode, snapshot.objectID]
        if let held = try heldVersion(table: table, key: key, db: db) {
            switch snapshot.version.compared(with: held) {
            case .sameEvent:
                return .unchanged
            case .older:
                return .stale
            case .ambiguous(wins: false):
                try db.execute(sql: "UPDATE \(table) SET needsRefetch = 1 WHERE account = ? AND livemode = ? AND id = ?", arguments: key)
                return .ambiguous
            case .ambiguous(wins: true):
                try write(snapshot, account: account, livemode: livemode, needsRefetch: true, db: db)
                return .ambiguous
            case .newer:
                break
            }
        }
        try write(snapshot, account: account, livemode: livemode, needsRefetch: snapshot.truncated, db: db)
        return .applied
    }

    /// The version of the snapshot the ledger holds for a key, nil when it holds none.
    static func heldVersion(table: String, key: StatementArguments, db: Database) throws -> SnapshotVersion? {
        let statement = try db.cachedStatement(
            sql: "SELECT vDeleted, vTerminal, vCreated, vTransition, vRank, vEventID FROM \(table) WHERE account = ? AND livemode = ? AND id = ?")
        guard let row = try Row.fetchOne(statement, arguments: key) else { return nil }
        return SnapshotVersion(
            deleted: row[0], terminal: row[1], eventCreated: row[2], transitionAt: row[3], statusRank: row[4], eventID: row[5])
    }

    static func table(_ kind: LedgerObjectKind) -> String {
        switch kind {
        case .customer: "customer"
        case .subscription: "subscription"
        case .invoice: "invoice"
        case .paymentMethod: "paymentMethod"
        case .price: "price"
        case .product: "product"
        case .checkoutSession: "checkoutSession"
        case .entitlementSummary: "entitlementSummary"
        case .invoicePayment: "invoicePayment"
        }
    }

    /// The typed columns a snapshot fills (raw JSON and version excluded), in table order. Reconcile
    /// compares these with the ledger's row to say which fields drifted.
    static func typedFields(of object: LedgerObject) -> [(column: String, value: DatabaseValue)] {
        var fields: [(column: String, value: DatabaseValue)] = []
        func put(_ column: String, _ value: (any DatabaseValueConvertible)?) {
            fields.append((column, value?.databaseValue ?? .null))
        }
        switch object {
        case .customer(let customer):
            put("email", customer.email)
            put("name", customer.name)
            put("appUserID", customer.appUserID)
            put("currency", customer.currency)
            put("delinquent", customer.delinquent)
            put("defaultPaymentMethod", customer.defaultPaymentMethod?.id)
            put("defaultSource", customer.defaultSource?.id)
            put("created", customer.created)
        case .subscription(let subscription):
            put("customer", subscription.customer.id)
            put("status", subscription.status.rawValue)
            put("currency", subscription.currency)
            put("cancelAtPeriodEnd", subscription.cancelAtPeriodEnd)
            put("cancelAt", subscription.cancelAt)
            put("canceledAt", subscription.canceledAt)
            put("endedAt", subscription.endedAt)
            put("trialStart", subscription.trialStart)
            put("trialEnd", subscription.trialEnd)
            put("currentPeriodStart", subscription.currentPeriodStart)
            put("currentPeriodEnd", subscription.currentPeriodEnd)
            put("startDate", subscription.startDate)
            put("collectionMethod", subscription.collectionMethod)
            put("defaultPaymentMethod", subscription.defaultPaymentMethod?.id)
            put("latestInvoice", subscription.latestInvoice?.id)
            put("cancellationReason", subscription.cancellationReason)
            put("pauseBehavior", subscription.pauseBehavior)
            put("created", subscription.created)
        case .invoice(let invoice):
            put("number", invoice.number)
            put("customer", invoice.customer?.id)
            put("customerEmail", invoice.customerEmail)
            put("customerName", invoice.customerName)
            put("subscription", invoice.subscription?.id)
            put("status", invoice.status?.rawValue)
            put("currency", invoice.currency)
            put("subtotal", invoice.subtotal)
            put("discount", invoice.discountAmount)
            put("tax", invoice.taxAmount)
            put("total", invoice.total)
            put("amountDue", invoice.amountDue)
            put("amountPaid", invoice.amountPaid)
            put("amountRemaining", invoice.amountRemaining)
            put("created", invoice.created)
            put("finalizedAt", invoice.statusTransitions.finalizedAt)
            put("paidAt", invoice.statusTransitions.paidAt)
            put("voidedAt", invoice.statusTransitions.voidedAt)
            put("markedUncollectibleAt", invoice.statusTransitions.markedUncollectibleAt)
            put("periodStart", invoice.periodStart)
            put("periodEnd", invoice.periodEnd)
            put("dueDate", invoice.dueDate)
            put("billingReason", invoice.billingReason)
            put("collectionMethod", invoice.collectionMethod)
            put("hostedInvoiceURL", invoice.hostedInvoiceURL)
            put("invoicePDF", invoice.invoicePDF)
            put("attemptCount", invoice.attemptCount)
        case .paymentMethod(let method):
            put("customer", method.customer?.id)
            put("type", method.type)
            put("brand", method.card?.brand)
            put("last4", method.card?.last4)
            put("expMonth", method.card?.expMonth)
            put("expYear", method.card?.expYear)
            put("fingerprint", method.card?.fingerprint)
            put("funding", method.card?.funding)
            put("country", method.card?.country)
            put("created", method.created)
        case .price(let price):
            put("product", price.product?.id)
            put("active", price.active)
            put("currency", price.currency)
            put("unitAmount", price.unitAmount)
            put("lookupKey", price.lookupKey)
            put("nickname", price.nickname)
            put("type", price.type)
            put("interval", price.recurring?.interval.rawValue)
            put("intervalCount", price.recurring?.intervalCount)
            put("created", price.created)
        case .product(let product):
            put("name", product.name)
            put("active", product.active)
            put("description", product.description)
            put("defaultPrice", product.defaultPrice?.id)
            put("created", product.created)
            put("updated", product.updated)
        case .checkoutSession(let session):
            put("customer", session.customer?.id)
            put("clientReferenceID", session.clientReferenceID)
            put("status", session.status?.rawValue)
            put("mode", session.mode)
            put("paymentStatus", session.paymentStatus)
            put("subscription", session.subscription?.id)
            put("invoice", session.invoice?.id)
            put("amountSubtotal", session.amountSubtotal)
            put("amountTotal", session.amountTotal)
            put("currency", session.currency)
            put("created", session.created)
            put("expiresAt", session.expiresAt)
            put("url", session.url)
        case .entitlementSummary(let summary):
            break
        case .invoicePayment(let payment):
            put("invoice", payment.invoice?.id)
            put("amountPaid", payment.amountPaid)
            put("amountRequested", payment.amountRequested)
            put("currency", payment.currency)
            put("status", payment.status)
            put("paidAt", payment.paidAt)
            put("isDefault", payment.isDefault)
            put("created", payment.created)
        }
        return fields
    }

    private static func write(_ snapshot: LedgerSnapshot, account: String, livemode: Bool, needsRefetch: Bool, db: Database) throws {
        let version = snapshot.version
        var columns: [String] = ["account", "livemode", "id"]
        var values: [DatabaseValue] = [account.databaseValue, livemode.databaseValue, snapshot.objectID.databaseValue]
        func put(_ column: String, _ value: (any DatabaseValueConvertible)?) {
            columns.append(column)
            values.append(value?.databaseValue ?? .null)
        }
        for field in typedFields(of: snapshot.object) { put(field.column, field.value) }
        if snapshot.kind.keepsRawJSON { put("raw", Data(snapshot.raw)) }
        switch snapshot.object {
        case .subscription(let subscription): try replaceItems(of: subscription, account: account, livemode: livemode, db: db)
        case .invoice(let invoice): try replaceLines(of: invoice, id: snapshot.objectID, account: account, livemode: livemode, db: db)
        case .entitlementSummary(let summary): try replaceEntitlements(of: summary, account: account, livemode: livemode, db: db)
        default: break
        }
        put("vDeleted", version.deleted)
        put("vTerminal", version.terminal)
        put("vCreated", version.eventCreated)
        put("vTransition", version.transitionAt)
        put("vRank", version.statusRank)
        put("vEventID", version.eventID)
        put("needsRefetch", needsRefetch)

        let table = Self.table(snapshot.kind)
        let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ",")
        let updates = columns.dropFirst(3).map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        let statement = try db.cachedStatement(
            sql: "INSERT INTO \(table) (\(columns.joined(separator: ","))) VALUES (\(placeholders)) ON CONFLICT (account, livemode, id) DO UPDATE SET \(updates)")
        try statement.execute(arguments: StatementArguments(values))
    }

    private static func replaceItems(of subscription: Subscription, account: String, livemode: Bool, db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM subscriptionItem WHERE account = ? AND livemode = ? AND subscription = ?")
            .execute(arguments: [account, livemode, subscription.id])
        let insert = try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO subscriptionItem (account, livemode, subscription, id, price, product, lookupKey, quantity,
                unitAmount, currency, interval, intervalCount, currentPeriodStart, currentPeriodEnd)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        for item in subscription.items {
            let price = item.price
            try insert.execute(arguments: [
                account, livemode, subscription.id, item.id, price?.id, price?.product?.id, price?.lookupKey, item.quantity,
                price?.unitAmount, price?.currency, price?.recurring?.interval.rawValue, price?.recurring?.intervalCount,
                item.currentPeriodStart ?? subscription.currentPeriodStart, item.currentPeriodEnd ?? subscription.currentPeriodEnd,
            ])
        }
    }

    private static func replaceLines(of invoice: Invoice, id: String, account: String, livemode: Bool, db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM invoiceLine WHERE account = ? AND livemode = ? AND invoice = ?")
            .execute(arguments: [account, livemode, id])
        let insert = try db.cachedStatement(sql: """
            INSERT INTO invoiceLine (account, livemode, invoice, position, id, amount, currency, description, quantity,
                periodStart, periodEnd, price, subscription, proration)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        for (position, line) in invoice.lines.enumerated() {
            try insert.execute(arguments: [
                account, livemode, id, position, line.id, line.amount, line.currency, line.description, line.quantity,
                line.periodStart, line.periodEnd, line.priceID, line.subscription, line.proration,
            ])
        }
    }

    private static func replaceEntitlements(of summary: ActiveEntitlementSummary, account: String, livemode: Bool, db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM activeEntitlement WHERE account = ? AND livemode = ? AND customer = ?")
            .execute(arguments: [account, livemode, summary.customer])
        let insert = try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO activeEntitlement (account, livemode, customer, lookupKey, id, feature) VALUES (?, ?, ?, ?, ?, ?)
            """)
        for entitlement in summary.entitlements {
            try insert.execute(arguments: [account, livemode, summary.customer, entitlement.lookupKey, entitlement.id, entitlement.featureID])
        }
    }

    /// Ties the app user of a completed Checkout session to its customer. Links are only added,
    /// so the result does not depend on the order of events.
    static func linkCheckoutUser(_ snapshot: LedgerSnapshot, account: String, livemode: Bool, db: Database) throws {
        guard case .checkoutSession(let session) = snapshot.object, let user = session.clientReferenceID, !user.isEmpty,
            let customer = session.customer?.id
        else { return }
        try db.cachedStatement(sql: "INSERT OR IGNORE INTO userLink (account, livemode, appUserID, customer, source) VALUES (?, ?, ?, ?, 'checkout')")
            .execute(arguments: [account, livemode, user, customer])
    }
}

extension LedgerObjectKind {
    /// Whether the kind's table keeps the object's raw JSON (payment methods keep only the card
    /// fields billingd may hold).
    var keepsRawJSON: Bool { self != .paymentMethod }
}
