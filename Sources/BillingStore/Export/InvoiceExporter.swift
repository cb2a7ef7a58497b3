import BillingCore
import Foundation
import GRDB
import Synchronization

/// The SQLite ``InvoiceExportStore``: exports the ledger's invoices for finance as CSV or JSON
/// Lines, streamed: rows go from a SQLite cursor through a fixed-size buffer to their destination,
/// so memory stays flat whatever the number of invoices. The same ledger always gives
/// byte-identical output.
public struct InvoiceExporter: InvoiceExportStore {
    let database: LedgerDatabase

    public init(database: LedgerDatabase) {
        self.database = database
    }

    /// Bytes buffered before they are handed to the destination.
    static let flushThreshold = 256 * 1024
    /// Rows between cancellation checks and progress reports.
    static let checkpointInterval = 4096

    /// Writes the whole export to `destination` from one read transaction, so that it is one
    /// consistent snapshot of the ledger even while `serve` keeps applying events.
    /// - Parameter progress: called with the number of rows written so far, every few thousand rows.
    public func export(
        _ request: InvoiceExportRequest, to destination: some ExportDestination,
        cancellation: ExportCancellation? = nil, progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> InvoiceExportSummary {
        try request.validate()
        return try await database.writer.read { db in
            var summary = InvoiceExportSummary(request: request)
            var encoder = Self.startEncoder(request)
            let (sql, arguments) = InvoiceExportQuery.sql(request)
            let cursor = try Row.fetchCursor(try db.makeStatement(sql: sql), arguments: arguments)
            _ = try Self.encode(cursor, db: db, request: request, encoder: &encoder, summary: &summary) { rows, encoder in
                if cancellation?.isCancelled == true { throw InvoiceExportError.interrupted }
                progress?(rows)
                if encoder.bytes.count >= Self.flushThreshold {
                    try destination.write(encoder.bytes)
                    encoder.bytes.removeAll(keepingCapacity: true)
                }
            }
            try destination.write(encoder.bytes)
            return summary
        }
    }

    /// Streams the export for an async consumer (the HTTP API): pages of at most
    /// `invoicesPerPage` invoices (fewer once a page holds ``flushThreshold`` bytes), each read in
    /// its own short transaction and handed to `write` before the next is read, so a slow client
    /// holds no snapshot open and memory stays flat.
    /// Pages follow the sort key, so no invoice is skipped or repeated while the ledger changes;
    /// each row is the invoice as it was when its page was read.
    public func stream(
        _ request: InvoiceExportRequest, invoicesPerPage: Int = 1000, write: ([UInt8]) async throws -> Void
    ) async throws -> InvoiceExportSummary {
        try request.validate()
        precondition(invoicesPerPage > 0)
        var summary = InvoiceExportSummary(request: request)
        var after: InvoiceSortKey?
        var first = true
        while true {
            let page = try await database.writer.read { [summary, after, first] db in
                var summary = summary
                var encoder = first ? Self.startEncoder(request) : Self.encoder(request)
                let (sql, arguments) = InvoiceExportQuery.sql(request, after: after, limit: invoicesPerPage)
                let cursor = try Row.fetchCursor(try db.makeStatement(sql: sql), arguments: arguments)
                let invoicesBefore = summary.invoices
                let last = try Self.encode(
                    cursor, db: db, request: request, encoder: &encoder, summary: &summary, stopAtBytes: Self.flushThreshold
                ) { _, _ in }
                let full = summary.invoices - invoicesBefore == invoicesPerPage || encoder.bytes.count >= Self.flushThreshold
                return (bytes: encoder.bytes, summary: summary, last: last, full: full)
            }
            summary = page.summary
            first = false
            if !page.bytes.isEmpty { try await write(page.bytes) }
            guard page.full, let last = page.last else { return summary }
            after = last
        }
    }

    private static func encoder(_ request: InvoiceExportRequest) -> ExportRowEncoder {
        ExportRowEncoder(
            format: request.format, columns: InvoiceExportSchema.columns(request.layout),
            capacity: flushThreshold + 64 * 1024)
    }

    /// An encoder that has written what starts the output: the byte order mark and the CSV header.
    private static func startEncoder(_ request: InvoiceExportRequest) -> ExportRowEncoder {
        var encoder = encoder(request)
        if request.byteOrderMark { encoder.bytes.append(contentsOf: ExportRowEncoder.byteOrderMark) }
        encoder.header()
        return encoder
    }

    /// Encodes the invoices of the cursor — with its lines, one row each, in the lines layout —
    /// and adds them to the summary; calls `checkpoint` with the number of rows so far every
    /// ``checkpointInterval`` rows. Stops after the invoice that brings the encoded bytes to
    /// `stopAtBytes`, if given. Returns the last invoice's key.
    private static func encode(
        _ cursor: RowCursor, db: Database, request: InvoiceExportRequest, encoder: inout ExportRowEncoder,
        summary: inout InvoiceExportSummary, stopAtBytes: Int? = nil,
        checkpoint: (Int, inout ExportRowEncoder) throws -> Void
    ) throws -> InvoiceSortKey? {
        typealias Column = InvoiceExportQuery.Column
        typealias LineColumn = InvoiceExportQuery.LineColumn
        let linesStatement = request.layout == .lines ? try db.makeStatement(sql: InvoiceExportQuery.linesSQL) : nil
        let invoiceColumnCount = InvoiceExportSchema.invoiceColumns.count
        // The invoice's encoded columns, which each of its lines repeats without re-encoding.
        var invoiceFields: [UInt8] = []
        var last: InvoiceSortKey?
        var currencyCode = ""
        var currencyIndex = -1
        var rowsSinceCheckpoint = 0

        while let row = try cursor.next() {
            let key = InvoiceSortKey(
                created: optionalInteger(row, Column.created), id: row[Column.id], account: row[Column.account],
                livemode: row[Column.livemode])
            last = key

            // The currency's totals; rows of one currency usually follow each other.
            let code = lowercased(row[Column.currency])
            if code != currencyCode || currencyIndex < 0 {
                currencyCode = code
                currencyIndex = summary.totalsIndex(code)
            }
            let exponent = summary.currencies[currencyIndex].currency.exponent
            summary.invoices += 1
            if row[Column.needsRefetch] as Bool { summary.invoicesNeedingRefetch += 1 }
            summary.currencies[currencyIndex].add(
                subtotal: row[Column.subtotal], discount: row[Column.discount], tax: row[Column.tax],
                total: row[Column.total], amountDue: row[Column.amountDue], amountPaid: row[Column.amountPaid],
                amountRemaining: row[Column.amountRemaining])

            encoder.beginRow()
            let start = encoder.bytes.count
            encodeInvoice(row, key: key, currency: code, exponent: exponent, into: &encoder)
            var rows = 1
            if let linesStatement {
                invoiceFields.removeAll(keepingCapacity: true)
                invoiceFields.append(contentsOf: encoder.bytes[start...])
                let lines = try Row.fetchCursor(linesStatement, arguments: [key.account, key.livemode, key.id])
                rows = 0
                while let line = try lines.next() {
                    if rows > 0 {
                        encoder.endRow()
                        summary.rows += 1
                        // An invoice with very many lines is flushed between its rows too.
                        if encoder.bytes.count >= flushThreshold { try checkpoint(summary.rows, &encoder) }
                        encoder.beginRow()
                        encoder.appendEncodedFields(invoiceFields, count: invoiceColumnCount)
                    }
                    rows += 1
                    let amount: Int64 = line[LineColumn.amount]
                    let lineCurrency = line.hasNull(atIndex: LineColumn.currency) ? code : lowercased(line[LineColumn.currency])
                    encoder.integer(line[LineColumn.position] as Int64)
                    text(line, LineColumn.id, &encoder)
                    text(line, LineColumn.description, &encoder)
                    encoder.integer(optionalInteger(line, LineColumn.quantity))
                    encoder.amount(amount, exponent: lineCurrency == code ? exponent : Currency.exponent(of: lineCurrency))
                    encoder.text(lineCurrency)
                    encoder.time(optionalInteger(line, LineColumn.periodStart))
                    encoder.time(optionalInteger(line, LineColumn.periodEnd))
                    text(line, LineColumn.price, &encoder)
                    text(line, LineColumn.subscription, &encoder)
                    encoder.boolean(line[LineColumn.proration] as Bool)
                    summary.currencies[currencyIndex].lines += 1
                    summary.currencies[currencyIndex].lineAmount += Int128(amount)
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
            if rowsSinceCheckpoint >= checkpointInterval || encoder.bytes.count >= flushThreshold {
                rowsSinceCheckpoint = 0
                try checkpoint(summary.rows, &encoder)
            }
            if let stopAtBytes, encoder.bytes.count >= stopAtBytes { break }
        }
        return last
    }

    /// The invoice's columns of a row, in the schema's order.
    private static func encodeInvoice(
        _ row: Row, key: InvoiceSortKey, currency: String, exponent: Int, into encoder: inout ExportRowEncoder
    ) {
        typealias Column = InvoiceExportQuery.Column
        encoder.integer(Int64(InvoiceExportSchema.version))
        encoder.text(key.id)
        text(row, Column.number, &encoder)
        text(row, Column.status, &encoder)
        text(row, Column.customer, &encoder)
        text(row, Column.customerEmail, &encoder)
        text(row, Column.customerName, &encoder)
        text(row, Column.appUser, &encoder)
        text(row, Column.subscription, &encoder)
        encoder.text(currency)
        encoder.integer(Int64(exponent))
        for column in [
            Column.subtotal, Column.discount, Column.tax, Column.total, Column.amountDue, Column.amountPaid,
            Column.amountRemaining,
        ] {
            encoder.amount(row[column], exponent: exponent)
        }
        encoder.time(key.created)
        for column in [
            Column.finalizedAt, Column.paidAt, Column.voidedAt, Column.markedUncollectibleAt, Column.periodStart,
            Column.periodEnd, Column.dueDate,
        ] {
            encoder.time(optionalInteger(row, column))
        }
        text(row, Column.billingReason, &encoder)
        text(row, Column.collectionMethod, &encoder)
        text(row, Column.hostedInvoiceURL, &encoder)
        text(row, Column.invoicePDF, &encoder)
        encoder.boolean(key.livemode)
        encoder.text(key.account)
    }

    /// Stripe writes currency codes in lowercase; a ledger written otherwise is normalised.
    private static func lowercased(_ code: String) -> String {
        code.utf8.contains { (0x41...0x5A).contains($0) } ? code.lowercased() : code
    }

    private static func text(_ row: Row, _ column: Int, _ encoder: inout ExportRowEncoder) {
        encoder.text(row.hasNull(atIndex: column) ? nil : row[column] as String)
    }

    private static func optionalInteger(_ row: Row, _ column: Int) -> Int64? {
        row.hasNull(atIndex: column) ? nil : row[column] as Int64
    }
}

/// Where a CLI export's bytes go: a file or standard output.
public protocol ExportDestination: Sendable {
    /// Writes all the bytes, or throws.
    func write(_ bytes: [UInt8]) throws
}

/// Stops a running export from another task (a signal handler): the exporter checks it every
/// few thousand rows and throws ``InvoiceExportError/interrupted``.
public final class ExportCancellation: Sendable {
    private let cancelled = Atomic<Bool>(false)

    public init() {}

    public func cancel() {
        cancelled.store(true, ordering: .relaxed)
    }

    public var isCancelled: Bool {
        cancelled.load(ordering: .relaxed)
    }
}
