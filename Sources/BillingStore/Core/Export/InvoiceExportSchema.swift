/// The export's columns: a stable, versioned schema. Adding, removing, renaming or reordering a
/// column, or changing what one means, bumps ``version`` (and docs/export.md's table).
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

/// A value bound to an export query, whatever the backend.
enum ExportBind: Sendable, Equatable {
    case text(String)
    case integer(Int64)
    case boolean(Bool)
}

/// How the export's SQL differs between backends: how a parameter is written, and the collation
/// that makes text sort by bytes (SQLite's default; PostgreSQL's depends on the database's locale).
struct ExportSQLDialect: Sendable {
    /// The `n`-th parameter (from 1).
    let parameter: @Sendable (Int) -> String
    /// Appended to a text column to sort and compare it by bytes.
    let byteOrder: String
    /// Appended to the sort's first column so that NULL sorts first (SQLite's default, which its
    /// planner matches to the index only when left unsaid).
    let nullsFirst: String

    static let sqlite = ExportSQLDialect(parameter: { _ in "?" }, byteOrder: "", nullsFirst: "")
    static let postgres = ExportSQLDialect(parameter: { "$\($0)" }, byteOrder: #" COLLATE "C""#, nullsFirst: " NULLS FIRST")
}

/// The SQL that reads export rows: the invoices ordered by (created, id, account, livemode) —
/// NULL `created` first, text by bytes — through the `invoice_created` index, so they stream in
/// order without a sort, and for the lines layout each invoice's lines in position order through
/// invoiceLine's primary key. The same statement on every backend, in its ``ExportSQLDialect``.
enum InvoiceExportQuery {
    /// The lines of one invoice (account, livemode, invoice id), in position order.
    static let linesColumns = "position, id, description, quantity, amount, currency, periodStart, periodEnd, price, subscription, proration"

    /// The invoice statement's SQL and binds: every matching invoice when `limit` is nil (one
    /// cursor), else the next `limit` invoices after `after` (one page).
    static func sql(
        _ request: InvoiceExportRequest, after: InvoiceSortKey? = nil, limit: Int? = nil, dialect: ExportSQLDialect
    ) -> (String, [ExportBind]) {
        var binds: [ExportBind] = []
        func bind(_ value: ExportBind) -> String {
            binds.append(value)
            return dialect.parameter(binds.count)
        }
        let c = dialect.byteOrder
        var conditions = ["NOT i.vDeleted", "i.livemode = \(bind(.boolean(request.livemode)))"]
        if let from = request.createdFrom {
            conditions.append("i.created >= \(bind(.integer(from)))")
        }
        if let before = request.createdBefore {
            conditions.append("i.created < \(bind(.integer(before)))")
        }
        if !request.statuses.isEmpty {
            conditions.append("i.status IN (\(request.statuses.map { bind(.text($0)) }.joined(separator: ", ")))")
        }
        if let customer = request.customer {
            conditions.append("i.customer = \(bind(.text(customer)))")
        }
        if let currency = request.currency {
            conditions.append("lower(i.currency) = \(bind(.text(currency.lowercased())))")
        }
        if let account = request.account {
            conditions.append("i.account = \(bind(.text(account)))")
        }
        if let user = request.appUser {
            conditions.append("""
                (i.account, i.livemode, i.customer) IN (
                    SELECT account, livemode, id FROM customer WHERE appUserID = \(bind(.text(user)))
                    UNION SELECT account, livemode, customer FROM userLink WHERE appUserID = \(bind(.text(user))))
                """)
        }
        if let after {
            if let created = after.created {
                conditions.append(
                    "(i.created, i.id\(c), i.account\(c), i.livemode) > (\(bind(.integer(created))), \(bind(.text(after.id))), "
                        + "\(bind(.text(after.account))), \(bind(.boolean(after.livemode))))")
            } else {
                // NULL sorts first: after a NULL-created invoice come the other NULL-created ones
                // with a greater key, then every dated invoice.
                conditions.append(
                    "(i.created IS NOT NULL OR (i.id\(c), i.account\(c), i.livemode) > (\(bind(.text(after.id))), "
                        + "\(bind(.text(after.account))), \(bind(.boolean(after.livemode)))))")
            }
        }
        let sql = """
            SELECT i.account, i.livemode, i.id, i.number, i.status, i.customer,
                COALESCE(i.customerEmail, c.email), COALESCE(i.customerName, c.name),
                COALESCE(c.appUserID, (SELECT MIN(u.appUserID\(c)) FROM userLink u
                    WHERE u.account = i.account AND u.livemode = i.livemode AND u.customer = i.customer)),
                i.subscription, i.currency, i.subtotal, i.discount, i.tax, i.total, i.amountDue, i.amountPaid,
                i.amountRemaining, i.created, i.finalizedAt, i.paidAt, i.voidedAt, i.markedUncollectibleAt,
                i.periodStart, i.periodEnd, i.dueDate, i.billingReason, i.collectionMethod, i.hostedInvoiceURL,
                i.invoicePDF, i.needsRefetch
            FROM invoice i
            LEFT JOIN customer c ON c.account = i.account AND c.livemode = i.livemode AND c.id = i.customer
            WHERE \(conditions.joined(separator: " AND "))
            ORDER BY i.created\(dialect.nullsFirst), i.id\(c), i.account\(c), i.livemode
            \(limit.map { "LIMIT \($0)" } ?? "")
            """
        return (sql, binds)
    }
}
