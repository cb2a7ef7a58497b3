import BillingCore

/// One invoice's columns as an export reads them, whatever the backend: the rows every backend
/// hands ``InvoiceExportWriter``, so that the same ledger gives the same bytes on each.
struct InvoiceExportRow {
    var key: InvoiceSortKey
    var number: String?
    var status: String?
    var customer: String?
    var customerEmail: String?
    var customerName: String?
    var appUser: String?
    var subscription: String?
    var currency: String
    var subtotal: Int64
    var discount: Int64
    var tax: Int64
    var total: Int64
    var amountDue: Int64
    var amountPaid: Int64
    var amountRemaining: Int64
    var finalizedAt: Int64?
    var paidAt: Int64?
    var voidedAt: Int64?
    var markedUncollectibleAt: Int64?
    var periodStart: Int64?
    var periodEnd: Int64?
    var dueDate: Int64?
    var billingReason: String?
    var collectionMethod: String?
    var hostedInvoiceURL: String?
    var invoicePDF: String?
    var needsRefetch: Bool
}

/// One invoice line's columns as an export reads them.
struct InvoiceLineExportRow {
    var position: Int64
    var id: String?
    var description: String?
    var quantity: Int64?
    var amount: Int64
    var currency: String?
    var periodStart: Int64?
    var periodEnd: Int64?
    var price: String?
    var subscription: String?
    var proration: Bool
}

/// Turns invoice rows, in sort order, into export bytes and the summary's totals: the one
/// encoding of the export, shared by every backend.
struct InvoiceExportWriter {
    /// Bytes buffered before they are handed to the destination.
    static let flushThreshold = 256 * 1024
    /// Rows between cancellation checks and progress reports.
    static let checkpointInterval = 4096

    let request: InvoiceExportRequest
    var encoder: ExportRowEncoder
    var summary: InvoiceExportSummary
    /// The last invoice written's key: the next page starts after it.
    private(set) var last: InvoiceSortKey?
    /// The invoice's encoded columns, which each of its lines repeats without re-encoding.
    private var invoiceFields: [UInt8] = []
    private var currencyCode = ""
    private var currencyIndex = -1
    private var rowsSinceCheckpoint = 0

    /// A writer that continues `summary` after the invoice `after`; with `starting`, it first
    /// writes what starts the output: the byte order mark and the CSV header.
    init(_ request: InvoiceExportRequest, summary: InvoiceExportSummary? = nil, after: InvoiceSortKey? = nil, starting: Bool) {
        self.request = request
        self.summary = summary ?? InvoiceExportSummary(request: request)
        last = after
        encoder = ExportRowEncoder(
            format: request.format, columns: InvoiceExportSchema.columns(request.layout), capacity: Self.flushThreshold + 64 * 1024)
        if starting {
            if request.byteOrderMark { encoder.bytes.append(contentsOf: ExportRowEncoder.byteOrderMark) }
            encoder.header()
        }
    }

    /// The checkpoint of a whole export: stops a cancelled one, reports progress, and hands a
    /// full buffer to `destination`.
    static func flushing(
        to destination: some ExportDestination, cancellation: ExportCancellation?, progress: (@Sendable (Int) -> Void)?
    ) -> (Int, inout ExportRowEncoder) throws -> Void {
        { rows, encoder in
            if cancellation?.isCancelled == true { throw InvoiceExportError.interrupted }
            progress?(rows)
            if encoder.bytes.count >= flushThreshold {
                try destination.write(encoder.bytes)
                encoder.bytes.removeAll(keepingCapacity: true)
            }
        }
    }

    /// The paged stream of ``InvoiceExportStore/stream(_:invoicesPerPage:write:)`` on any
    /// backend: `readPage` encodes into the writer it is given the next invoices after its
    /// ``last`` — at most `invoicesPerPage`, stopping after the one that fills the buffer — each
    /// page read on its own, and its bytes go to `write` before the next is read.
    static func stream(
        _ request: InvoiceExportRequest, invoicesPerPage: Int,
        readPage: (InvoiceExportWriter) async throws -> InvoiceExportWriter, write: ([UInt8]) async throws -> Void
    ) async throws -> InvoiceExportSummary {
        try request.validate()
        precondition(invoicesPerPage > 0)
        var summary = InvoiceExportSummary(request: request)
        var after: InvoiceSortKey?
        var first = true
        while true {
            let page = try await readPage(InvoiceExportWriter(request, summary: summary, after: after, starting: first))
            let full = page.summary.invoices - summary.invoices == invoicesPerPage || page.isFull
            summary = page.summary
            first = false
            if !page.encoder.bytes.isEmpty { try await write(page.encoder.bytes) }
            guard full, let last = page.last, last != after else { return summary }
            after = last
        }
    }

    /// Whether the buffer has reached the size at which it is handed on.
    var isFull: Bool { encoder.bytes.count >= Self.flushThreshold }

    /// Encodes one invoice — with its lines, one row each, in the lines layout (`nextLine` gives
    /// them in position order, then nil) — and adds it to the summary. Calls `checkpoint` with the
    /// rows so far every ``checkpointInterval`` rows, and whenever the buffer is full.
    mutating func add(
        _ row: InvoiceExportRow, nextLine: () throws -> InvoiceLineExportRow?,
        checkpoint: (Int, inout ExportRowEncoder) throws -> Void
    ) throws {
        let key = row.key
        last = key
        // The currency's totals; rows of one currency usually follow each other.
        let code = Self.lowercased(row.currency)
        if code != currencyCode || currencyIndex < 0 {
            currencyCode = code
            currencyIndex = summary.totalsIndex(code)
        }
        let exponent = summary.currencies[currencyIndex].currency.exponent
        summary.invoices += 1
        if row.needsRefetch { summary.invoicesNeedingRefetch += 1 }
        summary.currencies[currencyIndex].add(
            subtotal: row.subtotal, discount: row.discount, tax: row.tax, total: row.total, amountDue: row.amountDue,
            amountPaid: row.amountPaid, amountRemaining: row.amountRemaining)

        encoder.beginRow()
        let start = encoder.bytes.count
        Self.encodeInvoice(row, currency: code, exponent: exponent, into: &encoder)
        var rows = 1
        if request.layout == .lines {
            invoiceFields.removeAll(keepingCapacity: true)
            invoiceFields.append(contentsOf: encoder.bytes[start...])
            rows = 0
            while let line = try nextLine() {
                if rows > 0 {
                    encoder.endRow()
                    summary.rows += 1
                    // An invoice with very many lines is flushed between its rows too.
                    if isFull { try checkpoint(summary.rows, &encoder) }
                    encoder.beginRow()
                    encoder.appendEncodedFields(invoiceFields, count: InvoiceExportSchema.invoiceColumns.count)
                }
                rows += 1
                let lineCurrency = line.currency.map(Self.lowercased) ?? code
                encoder.integer(line.position)
                encoder.text(line.id)
                encoder.text(line.description)
                encoder.integer(line.quantity)
                encoder.amount(line.amount, exponent: lineCurrency == code ? exponent : Currency.exponent(of: lineCurrency))
                encoder.text(lineCurrency)
                encoder.time(line.periodStart)
                encoder.time(line.periodEnd)
                encoder.text(line.price)
                encoder.text(line.subscription)
                encoder.boolean(line.proration)
                summary.currencies[currencyIndex].lines += 1
                summary.currencies[currencyIndex].lineAmount += Int128(line.amount)
            }
            if rows == 0 {
                // An invoice whose lines the ledger does not have still gets its row.
                for _ in InvoiceExportSchema.lineColumns { encoder.null() }
                rows = 1
            }
        }
        encoder.endRow()
        summary.rows += 1

        rowsSinceCheckpoint += rows
        if rowsSinceCheckpoint >= Self.checkpointInterval || isFull {
            rowsSinceCheckpoint = 0
            try checkpoint(summary.rows, &encoder)
        }
    }

    /// The invoice's columns of a row, in the schema's order.
    private static func encodeInvoice(_ row: InvoiceExportRow, currency: String, exponent: Int, into encoder: inout ExportRowEncoder) {
        encoder.integer(Int64(InvoiceExportSchema.version))
        encoder.text(row.key.id)
        for text in [row.number, row.status, row.customer, row.customerEmail, row.customerName, row.appUser, row.subscription] {
            encoder.text(text)
        }
        encoder.text(currency)
        encoder.integer(Int64(exponent))
        for amount in [row.subtotal, row.discount, row.tax, row.total, row.amountDue, row.amountPaid, row.amountRemaining] {
            encoder.amount(amount, exponent: exponent)
        }
        encoder.time(row.key.created)
        for time in [row.finalizedAt, row.paidAt, row.voidedAt, row.markedUncollectibleAt, row.periodStart, row.periodEnd, row.dueDate] {
            encoder.time(time)
        }
        for text in [row.billingReason, row.collectionMethod, row.hostedInvoiceURL, row.invoicePDF] {
            encoder.text(text)
        }
        encoder.boolean(row.key.livemode)
        encoder.text(row.key.account)
    }

    /// Stripe writes currency codes in lowercase; a ledger written otherwise is normalised.
    private static func lowercased(_ code: String) -> String {
        code.utf8.contains { (0x41...0x5A).contains($0) } ? code.lowercased() : code
    }
}
