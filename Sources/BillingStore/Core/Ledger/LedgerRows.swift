import BillingCore

/// What a Stripe snapshot makes of the ledger's rows, the same on every backend: the version
/// guard's decision, the object's row and its child rows. The SQLite and PostgreSQL writers only
/// run the statements.
enum LedgerRows {
    /// What the version guard decides about an incoming snapshot given the held one.
    enum Decision: Equatable {
        /// The same event shaped the held row: nothing to do.
        case unchanged
        /// The held snapshot is newer: nothing to do.
        case stale
        /// Tied on all evidence and the held row wins: only mark it for re-fetch.
        case markForRefetch
        /// Write the snapshot's row (marked for re-fetch when asked); `ambiguous` when it won a tie.
        case write(needsRefetch: Bool, ambiguous: Bool)

        /// The effect reported once the decision is carried out.
        var effect: ApplyEffect {
            switch self {
            case .unchanged: .unchanged
            case .stale: .stale
            case .markForRefetch: .ambiguous
            case .write(_, let ambiguous): ambiguous ? .ambiguous : .applied
            }
        }
    }

    /// The version guard (BillingCore's ``SnapshotVersion``) applied to a snapshot and the
    /// version of the row the ledger holds (nil when it holds none).
    static func decide(_ snapshot: LedgerSnapshot, held: SnapshotVersion?) -> Decision {
        guard let held else { return .write(needsRefetch: snapshot.truncated, ambiguous: false) }
        switch snapshot.version.compared(with: held) {
        case .sameEvent: return .unchanged
        case .older: return .stale
        case .ambiguous(wins: false): return .markForRefetch
        case .ambiguous(wins: true): return .write(needsRefetch: true, ambiguous: true)
        case .newer: return .write(needsRefetch: snapshot.truncated, ambiguous: false)
        }
    }

    /// The version columns, in the order ``version(_:)`` reads them.
    static let versionColumns = "vDeleted, vTerminal, vCreated, vTransition, vRank, vEventID"

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

    /// The object's whole row: key, typed fields, raw JSON (where the kind keeps it) and version.
    static func row(_ snapshot: LedgerSnapshot, account: String, livemode: Bool, needsRefetch: Bool) -> [(column: String, value: LedgerValue)] {
        let version = snapshot.version
        var row: [(column: String, value: LedgerValue)] = [
            ("account", .text(account)), ("livemode", .boolean(livemode)), ("id", .text(snapshot.objectID)),
        ]
        row += typedFields(of: snapshot.object)
        if snapshot.kind.keepsRawJSON { row.append(("raw", .blob((snapshot.storedRaw ?? StoredJSON.encode(snapshot.raw))[...]))) }
        row += [
            ("vDeleted", .boolean(version.deleted)), ("vTerminal", .boolean(version.terminal)),
            ("vCreated", .integer(version.eventCreated)), ("vTransition", .integer(version.transitionAt)),
            ("vRank", .integer(Int64(version.statusRank))), ("vEventID", .text(version.eventID)), ("needsRefetch", .boolean(needsRefetch)),
        ]
        return row
    }

    /// The upsert of a row of `columns` (key first) into an object table, with `?` placeholders.
    static func upsertSQL(table: String, columns: [String]) -> String {
        let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ",")
        return "INSERT INTO \(table) (\(columns.joined(separator: ","))) VALUES (\(placeholders)) \(upsertConflict(columns: columns))"
    }

    /// The conflict clause of an object table's upsert of `columns` (key first): the row
    /// replaces the held one, whatever the values' source (one row, or a batch's).
    static func upsertConflict(columns: [String]) -> String {
        let updates = columns.dropFirst(3).map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return "ON CONFLICT (account, livemode, id) DO UPDATE SET \(updates)"
    }

    /// The rows an object owns in a child table, which a newer snapshot replaces as a whole.
    struct Children {
        let table: String
        /// The column naming the parent (besides account and livemode).
        let parentColumn: String
        let parentID: String
        let columns: [String]
        /// Whether a later row with the same key (the first four columns) replaces an earlier one.
        let replacesDuplicates: Bool
        let rows: [[LedgerValue]]

        /// The statement deleting the parent's rows, with `?` placeholders for account, livemode, parent.
        var deleteSQL: String { "DELETE FROM \(table) WHERE account = ? AND livemode = ? AND \(parentColumn) = ?" }

        /// The statement inserting one row, with `?` placeholders; both dialects read it alike.
        var insertSQL: String {
            let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ", ")
            return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(placeholders))\(conflictClause)"
        }

        /// What an insert does with a row whose key (the first four columns) is held: replace it
        /// when ``replacesDuplicates``; otherwise nothing is said, and a conflict is an error.
        var conflictClause: String {
            guard replacesDuplicates else { return "" }
            let updates = columns.dropFirst(4).map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
            return " ON CONFLICT (\(columns.prefix(4).joined(separator: ", "))) DO UPDATE SET \(updates)"
        }
    }

    /// The child rows a snapshot replaces: subscription items, invoice lines, active entitlements.
    static func children(of snapshot: LedgerSnapshot, account: String, livemode: Bool) -> Children? {
        let key: [LedgerValue] = [.text(account), .boolean(livemode)]
        switch snapshot.object {
        case .subscription(let subscription):
            return Children(
                table: "subscriptionItem", parentColumn: "subscription", parentID: subscription.id,
                columns: [
                    "account", "livemode", "subscription", "id", "price", "product", "lookupKey", "quantity", "unitAmount",
                    "currency", "interval", "intervalCount", "currentPeriodStart", "currentPeriodEnd",
                ],
                replacesDuplicates: true,
                rows: subscription.items.map { item in
                    let price = item.price
                    return key + [
                        .text(subscription.id), .text(item.id), price?.id.ledgerValue ?? .null, price?.product?.id.ledgerValue ?? .null,
                        price?.lookupKey.ledgerValue ?? .null, item.quantity.ledgerValue, price?.unitAmount.ledgerValue ?? .null,
                        price?.currency.ledgerValue ?? .null, price?.recurring?.interval.rawValue.ledgerValue ?? .null,
                        price?.recurring?.intervalCount.ledgerValue ?? .null,
                        (item.currentPeriodStart ?? subscription.currentPeriodStart).ledgerValue,
                        (item.currentPeriodEnd ?? subscription.currentPeriodEnd).ledgerValue,
                    ]
                })
        case .invoice(let invoice):
            return Children(
                table: "invoiceLine", parentColumn: "invoice", parentID: snapshot.objectID,
                columns: [
                    "account", "livemode", "invoice", "position", "id", "amount", "currency", "description", "quantity",
                    "periodStart", "periodEnd", "price", "subscription", "proration",
                ],
                replacesDuplicates: false,
                rows: invoice.lines.enumerated().map { position, line in
                    key + [
                        .text(snapshot.objectID), .integer(Int64(position)), .text(line.id), .integer(line.amount), .text(line.currency),
                        line.description.ledgerValue, line.quantity.ledgerValue, line.periodStart.ledgerValue, line.periodEnd.ledgerValue,
                        line.priceID.ledgerValue, line.subscription.ledgerValue, .boolean(line.proration),
                    ]
                })
        case .entitlementSummary(let summary):
            return Children(
                table: "activeEntitlement", parentColumn: "customer", parentID: summary.customer,
                columns: ["account", "livemode", "customer", "lookupKey", "id", "feature"],
                replacesDuplicates: true,
                rows: summary.entitlements.map { entitlement in
                    key + [.text(summary.customer), .text(entitlement.lookupKey), .text(entitlement.id), entitlement.featureID.ledgerValue]
                })
        default:
            return nil
        }
    }

    /// The app user a completed Checkout session ties to its customer, if any. Links are only
    /// added, so the result does not depend on the order of events.
    static func checkoutLink(_ snapshot: LedgerSnapshot) -> (user: String, customer: String)? {
        guard case .checkoutSession(let session) = snapshot.object, let user = session.clientReferenceID, !user.isEmpty,
            let customer = session.customer?.id
        else { return nil }
        return (user, customer)
    }

    /// The statement recording a Checkout link (both dialects), with `?` placeholders for
    /// account, livemode, user and customer.
    static let checkoutLinkSQL =
        "INSERT INTO userLink (\(checkoutLinkColumns.joined(separator: ", ")), source) VALUES (?, ?, ?, ?, \(checkoutLinkSource)) ON CONFLICT DO NOTHING"

    /// A Checkout link's bound columns (its source is always ``checkoutLinkSource``).
    static let checkoutLinkColumns = ["account", "livemode", "appUserID", "customer"]

    /// The source of a link made by Checkout, as SQL.
    static let checkoutLinkSource = "'checkout'"

    /// The typed columns a snapshot fills (raw JSON and version excluded), in table order. Reconcile
    /// compares these with the ledger's row to say which fields drifted.
    static func typedFields(of object: LedgerObject) -> [(column: String, value: LedgerValue)] {
        var fields: [(column: String, value: LedgerValue)] = []
        func put(_ column: String, _ value: (any LedgerValueConvertible)?) {
            fields.append((column, value?.ledgerValue ?? .null))
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
            put("charge", invoice.charge?.id)
            put("paymentIntent", invoice.paymentIntent?.id)
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
        case .entitlementSummary:
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
            put("charge", payment.charge?.id)
            put("paymentIntent", payment.paymentIntent?.id)
        }
        return fields
    }

    /// The row query of `table` for a dump or `inspect` (`condition` and `order` name its columns
    /// unqualified): every column, and for a Stripe object table the body of the event whose
    /// `data.object` is the row's JSON (``StoredJSON/eventBodyColumn(of:)``).
    static func selectSQL(_ table: String, where condition: String?, orderBy order: String) -> String {
        let body = keepsEventBodies(table) ? ", \(StoredJSON.eventBodyColumn(of: table))" : ""
        return "SELECT \(table).*\(body) FROM \(table)" + (condition.map { " WHERE \($0)" } ?? "") + " ORDER BY \(order)"
    }

    /// Whether `table` is a Stripe object table whose rows may keep their JSON in their event's body.
    static func keepsEventBodies(_ table: String) -> Bool {
        LedgerObjectKind.allCases.contains { $0.keepsRawJSON && Self.table($0) == table }
    }

    /// The JSON of a row ``selectSQL(_:where:orderBy:)`` read, from its `raw` (or App Store
    /// `renewalRaw`) column and, for a row that keeps it in its event's body, that body; nil when
    /// the column is NULL or cannot be read.
    static func json(_ column: String, of row: [(name: String, value: LedgerValue)]) -> [UInt8]? {
        guard case .blob(let stored) = row.first(where: { $0.name == column })?.value else { return nil }
        return try? StoredJSON.json(stored: stored, eventBody: eventBody(of: row))
    }

    /// The `eventBody` column of a row ``selectSQL(_:where:orderBy:)`` read (PostgreSQL names it
    /// in lower case), nil when NULL or absent.
    static func eventBody(of row: [(name: String, value: LedgerValue)]) -> [UInt8]? {
        guard case .blob(let body) = row.first(where: { isEventBody($0.name) })?.value else { return nil }
        return Array(body)
    }

    static func isEventBody(_ column: String) -> Bool { column.lowercased() == "eventbody" }

    /// One line of a ledger dump: the table and every column's value, as both backends print it.
    /// Raw JSON is printed as the JSON it holds, so that a row written compressed, or keeping its
    /// JSON in its event's body, dumps as the same row written by a billingd before either.
    static func dumpLine(table: String, _ columns: [(name: String, value: LedgerValue)]) -> String {
        table + " " + columns.filter { !isEventBody($0.name) }.map { column in
            if column.name == "raw" || column.name == "renewalRaw", let json = json(column.name, of: columns) {
                return "\(column.name)=\(LedgerValue.blob(json[...]))"
            }
            return "\(column.name)=\(column.value)"
        }.joined(separator: " ")
    }
}

extension LedgerObjectKind {
    /// Whether the kind's table keeps the object's raw JSON (payment methods keep only the card
    /// fields billingd may hold).
    var keepsRawJSON: Bool { self != .paymentMethod }
}

extension LedgerRows {
    /// The tables that `replay` empties and rebuilds from the inbox.
    static let ledgerTables = [
        "customer", "subscription", "subscriptionItem", "invoice", "invoiceLine", "paymentMethod", "price", "product",
        "checkoutSession", "entitlementSummary", "activeEntitlement", "invoicePayment", "userLink", "stripeRefund",
    ] + appStoreLedgerTables

    /// The tables a ledger dump prints: the ledger's, and the subscription facts, which replay
    /// rebuilds from the inbox (save those of reconcile's fetches, which it keeps).
    static let dumpTables = ledgerTables + [MetricsFactRows.subscriptionFactTable]

    /// The App Store ledger's tables (keyed by environment).
    static let appStoreLedgerTables = ["appStoreTransaction", "appStoreSubscription", "appStoreOwner"]
}
