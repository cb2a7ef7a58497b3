import GRDB

/// The export's columns: a stable, versioned schema. Adding, removing, renaming or reordering a
/// column, or changing what one means, bumps ``version`` (and the README's table).
public enum InvoiceExportSchema {
    /// Written in every row as `schema_version`.
    public static let version = 1

    /// The columns of the invoices layout, in order.
    public static let invoiceColumns: [String] = [
        "schema_version",
        "invoice_id", "invoice_number", "status",
        "customer_id", "customer_email", "customer_name", "app_user_id", "subscription_id",
        "currency", "currency_exponent",
        "subtotal", "subtotal_minor", "discount", "discount_minor", "tax", "tax_minor", "total", "total_minor",
        "amount_due", "amount_due_minor", "amount_paid", "amount_paid_minor", "amount_remaining", "amount_remaining_minor",
        "created", "finalized_at", "paid_at", "voided_at", "marked_uncollectible_at",
        "period_start", "period_end", "due_date",
        "billing_reason", "collection_method", "hosted_invoice_url", "invoice_pdf_url",
        "livemode", "account",
    ]

    /// The columns the lines layout adds after the invoice's.
    public static let lineColumns: [String] = [
        "line_position", "line_id", "line_description", "line_quantity", "line_amount", "line_amount_minor",
        "line_currency", "line_period_start", "line_period_end", "line_price_id", "line_subscription_id", "line_proration",
    ]

    /// The columns of a layout, in order.
    public static func columns(_ layout: InvoiceExportRequest.Layout) -> [String] {
        switch layout {
        case .invoices: invoiceColumns
        case .lines: invoiceColumns + lineColumns
        }
    }
}

/// The position in a page of invoices after which the next page starts: the sort key of the
/// last invoice (created, id, account, livemode).
struct InvoiceSortKey: Sendable, Equatable {
    var created: Int64?
    var id: String
    var account: String
    var livemode: Bool
}

/// The SQL that reads export rows: the invoices ordered by (created, id, account, livemode)
/// through the `invoice_created` index, so they stream in order without a sort, and for the
/// lines layout each invoice's lines in position order through invoiceLine's primary key.
enum InvoiceExportQuery {
    /// Indices of the invoice statement's columns.
    enum Column {
        static let account = 0, livemode = 1, id = 2, number = 3, status = 4, customer = 5, customerEmail = 6,
            customerName = 7, appUser = 8, subscription = 9, currency = 10, subtotal = 11, discount = 12, tax = 13,
            total = 14, amountDue = 15, amountPaid = 16, amountRemaining = 17, created = 18, finalizedAt = 19,
            paidAt = 20, voidedAt = 21, markedUncollectibleAt = 22, periodStart = 23, periodEnd = 24, dueDate = 25,
            billingReason = 26, collectionMethod = 27, hostedInvoiceURL = 28, invoicePDF = 29, needsRefetch = 30
    }

    /// Indices of the line statement's columns.
    enum LineColumn {
        static let position = 0, id = 1, description = 2, quantity = 3, amount = 4, currency = 5, periodStart = 6,
            periodEnd = 7, price = 8, subscription = 9, proration = 10
    }

    /// The lines of one invoice (account, livemode, invoice id), in position order.
    static let linesSQL = """
        SELECT position, id, description, quantity, amount, currency, periodStart, periodEnd, price, subscription, proration
        FROM invoiceLine WHERE account = ? AND livemode = ? AND invoice = ? ORDER BY position
        """

    /// The invoice statement's SQL and arguments: every matching invoice when `limit` is nil
    /// (one cursor), else the next `limit` invoices after `after` (one page).
    static func sql(_ request: InvoiceExportRequest, after: InvoiceSortKey? = nil, limit: Int? = nil) -> (String, StatementArguments) {
        var conditions = ["i.vDeleted = 0", "i.livemode = ?"]
        var arguments: StatementArguments = [request.livemode]
        if let from = request.createdFrom {
            conditions.append("i.created >= ?")
            arguments += [from]
        }
        if let before = request.createdBefore {
            conditions.append("i.created < ?")
            arguments += [before]
        }
        if !request.statuses.isEmpty {
            conditions.append("i.status IN (\(Array(repeating: "?", count: request.statuses.count).joined(separator: ", ")))")
            arguments += StatementArguments(request.statuses)
        }
        if let customer = request.customer {
            conditions.append("i.customer = ?")
            arguments += [customer]
        }
        if let currency = request.currency {
            conditions.append("i.currency = ? COLLATE NOCASE")
            arguments += [currency.lowercased()]
        }
        if let account = request.account {
            conditions.append("i.account = ?")
            arguments += [account]
        }
        if let user = request.appUser {
            conditions.append("""
                (i.account, i.livemode, i.customer) IN (
                    SELECT account, livemode, id FROM customer WHERE appUserID = ?
                    UNION SELECT account, livemode, customer FROM userLink WHERE appUserID = ?)
                """)
            arguments += [user, user]
        }
        if let after {
            if let created = after.created {
                conditions.append("(i.created, i.id, i.account, i.livemode) > (?, ?, ?, ?)")
                arguments += [created, after.id, after.account, after.livemode]
            } else {
                // SQLite sorts NULL first: after a NULL-created invoice come the other
                // NULL-created ones with a greater key, then every dated invoice.
                conditions.append("(i.created IS NOT NULL OR (i.id, i.account, i.livemode) > (?, ?, ?))")
                arguments += [after.id, after.account, after.livemode]
            }
        }
        let sql = """
            SELECT i.account, i.livemode, i.id, i.number, i.status, i.customer,
                COALESCE(i.customerEmail, c.email), COALESCE(i.customerName, c.name),
                COALESCE(c.appUserID, (SELECT MIN(u.appUserID) FROM userLink u
                    WHERE u.account = i.account AND u.livemode = i.livemode AND u.customer = i.customer)),
                i.subscription, i.currency, i.subtotal, i.discount, i.tax, i.total, i.amountDue, i.amountPaid,
                i.amountRemaining, i.created, i.finalizedAt, i.paidAt, i.voidedAt, i.markedUncollectibleAt,
                i.periodStart, i.periodEnd, i.dueDate, i.billingReason, i.collectionMethod, i.hostedInvoiceURL,
                i.invoicePDF, i.needsRefetch
            FROM invoice i
            LEFT JOIN customer c ON c.account = i.account AND c.livemode = i.livemode AND c.id = i.customer
            WHERE \(conditions.joined(separator: " AND "))
            ORDER BY i.created, i.id, i.account, i.livemode
            \(limit.map { "LIMIT \($0)" } ?? "")
            """
        return (sql, arguments)
    }
}
