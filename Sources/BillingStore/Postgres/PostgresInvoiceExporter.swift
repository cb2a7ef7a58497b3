import BillingCore
import Logging
import PostgresNIO

/// Invoice exports on PostgreSQL: the same statement as SQLite's (``InvoiceExportQuery`` in
/// PostgreSQL's dialect, text ordered by bytes) and the same encoding (``InvoiceExportWriter``),
/// so the same ledger exports byte-identical files on both backends. Invoices are read a page at
/// a time by their sort key, with each page's lines in one query: memory stays flat. A whole
/// export reads its pages inside one `REPEATABLE READ` transaction, one snapshot of the ledger.
struct PostgresInvoiceExporter: InvoiceExportStore {
    let client: PostgresClient
    let logger: Logger
    /// Invoices per page of a whole export.
    static let exportPageSize = 1000

    func export(
        _ request: InvoiceExportRequest, to destination: some ExportDestination,
        cancellation: ExportCancellation?, progress: (@Sendable (Int) -> Void)?
    ) async throws -> InvoiceExportSummary {
        try request.validate()
        return try await client.transaction(logger: logger) { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            var writer = InvoiceExportWriter(request, starting: true)
            let checkpoint = InvoiceExportWriter.flushing(to: destination, cancellation: cancellation, progress: progress)
            while true {
                let page = try await Self.page(request, after: writer.last, limit: Self.exportPageSize, connection: connection, logger: logger)
                for invoice in page.invoices {
                    var lines = page.lines(of: invoice.key).makeIterator()
                    try writer.add(invoice, nextLine: { lines.next() }, checkpoint: checkpoint)
                }
                if page.invoices.count < Self.exportPageSize { break }
            }
            try destination.write(writer.encoder.bytes)
            return writer.summary
        }
    }

    func stream(
        _ request: InvoiceExportRequest, invoicesPerPage: Int, write: ([UInt8]) async throws -> Void
    ) async throws -> InvoiceExportSummary {
        try await InvoiceExportWriter.stream(request, invoicesPerPage: invoicesPerPage, readPage: { writer in
            var writer = writer
            let page = try await client.withConnection { connection in
                try await Self.page(request, after: writer.last, limit: invoicesPerPage, connection: connection, logger: logger)
            }
            for invoice in page.invoices {
                var lines = page.lines(of: invoice.key).makeIterator()
                try writer.add(invoice, nextLine: { lines.next() }, checkpoint: { _, _ in })
                if writer.isFull { break }
            }
            return writer
        }, write: write)
    }

    /// One page of invoices and their lines.
    struct Page {
        var invoices: [InvoiceExportRow] = []
        /// Lines by invoice, each in position order.
        var linesByInvoice: [InvoiceLineKey: [InvoiceLineExportRow]] = [:]

        func lines(of key: InvoiceSortKey) -> [InvoiceLineExportRow] {
            linesByInvoice[InvoiceLineKey(account: key.account, livemode: key.livemode, invoice: key.id)] ?? []
        }
    }

    struct InvoiceLineKey: Hashable {
        let account: String
        let livemode: Bool
        let invoice: String
    }

    /// The next `limit` invoices after `after`, with their lines in the lines layout.
    static func page(
        _ request: InvoiceExportRequest, after: InvoiceSortKey?, limit: Int, connection: PostgresConnection, logger: Logger
    ) async throws -> Page {
        let (sql, binds) = InvoiceExportQuery.sql(request, after: after, limit: limit, dialect: .postgres)
        var bindings = PostgresBindings()
        for bind in binds {
            switch bind {
            case .text(let value): bindings.append(value)
            case .integer(let value): bindings.append(value)
            case .boolean(let value): bindings.append(value)
            }
        }
        var page = Page()
        for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger) {
            page.invoices.append(try invoiceRow(row))
        }
        guard request.layout == .lines, !page.invoices.isEmpty else { return page }
        let keys = page.invoices.map(\.key)
        let rows = try await connection.query(
            """
            SELECT l.account, l.livemode, l.invoice, \(unescaped: InvoiceExportQuery.linesColumns.split(separator: ", ").map { "l.\($0)" }.joined(separator: ", "))
            FROM invoiceLine l
            JOIN unnest(\(keys.map(\.account))::text[], \(keys.map(\.livemode))::boolean[], \(keys.map(\.id))::text[])
                AS k (account, livemode, invoice)
                ON l.account = k.account AND l.livemode = k.livemode AND l.invoice = k.invoice
            ORDER BY l.account, l.livemode, l.invoice, l.position
            """, logger: logger)
        for try await row in rows {
            let columns = try row.decode(
                (String, Bool, String, Int64, String?, String?, Int64?, Int64, String?, Int64?, Int64?, String?, String?, Bool).self)
            page.linesByInvoice[InvoiceLineKey(account: columns.0, livemode: columns.1, invoice: columns.2), default: []].append(
                InvoiceLineExportRow(
                    position: columns.3, id: columns.4, description: columns.5, quantity: columns.6, amount: columns.7,
                    currency: columns.8, periodStart: columns.9, periodEnd: columns.10, price: columns.11,
                    subscription: columns.12, proration: columns.13))
        }
        return page
    }

    /// An invoice row from the columns of ``InvoiceExportQuery/sql(_:after:limit:dialect:)``, in order.
    private static func invoiceRow(_ row: PostgresRow) throws -> InvoiceExportRow {
        let cells = row.makeRandomAccess()
        func text(_ index: Int) throws -> String? { try cells[index].decode(String?.self) }
        func integer(_ index: Int) throws -> Int64? { try cells[index].decode(Int64?.self) }
        func amount(_ index: Int) throws -> Int64 { try cells[index].decode(Int64.self) }
        return InvoiceExportRow(
            key: InvoiceSortKey(
                created: try integer(18), id: try cells[2].decode(String.self), account: try cells[0].decode(String.self),
                livemode: try cells[1].decode(Bool.self)),
            number: try text(3), status: try text(4), customer: try text(5), customerEmail: try text(6), customerName: try text(7),
            appUser: try text(8), subscription: try text(9), currency: try cells[10].decode(String.self), subtotal: try amount(11),
            discount: try amount(12), tax: try amount(13), total: try amount(14), amountDue: try amount(15), amountPaid: try amount(16),
            amountRemaining: try amount(17), finalizedAt: try integer(19), paidAt: try integer(20), voidedAt: try integer(21),
            markedUncollectibleAt: try integer(22), periodStart: try integer(23), periodEnd: try integer(24), dueDate: try integer(25),
            billingReason: try text(26), collectionMethod: try text(27), hostedInvoiceURL: try text(28), invoicePDF: try text(29),
            needsRefetch: try cells[30].decode(Bool.self))
    }
}
