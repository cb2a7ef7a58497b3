import BillingCore
import Foundation
import GRDB
import Synchronization

/// The SQLite ``InvoiceExportStore``: exports the ledger's invoices for finance as CSV or JSON
/// Lines, streamed: rows go from a SQLite cursor through a fixed-size buffer to their destination,
/// so memory stays flat whatever the number of invoices. The same ledger always gives
/// byte-identical output.
public struct SQLiteInvoiceExporter: InvoiceExportStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Writes the whole export to `destination` from one read transaction, so that it is one
    /// consistent snapshot of the ledger even while `serve` keeps applying events.
    /// - Parameter progress: called with the number of rows written so far, every few thousand rows.
    public func export(
        _ request: InvoiceExportRequest, to destination: some ExportDestination,
        cancellation: ExportCancellation? = nil, progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> InvoiceExportSummary {
        try request.validate()
        return try await database.writer.read { db in
            var writer = InvoiceExportWriter(request, starting: true)
            let (sql, binds) = InvoiceExportQuery.sql(request, dialect: .sqlite)
            let cursor = try Row.fetchCursor(try db.makeStatement(sql: sql), arguments: Self.arguments(binds))
            try Self.encode(
                cursor, db: db, into: &writer,
                checkpoint: InvoiceExportWriter.flushing(to: destination, cancellation: cancellation, progress: progress))
            try destination.write(writer.encoder.bytes)
            return writer.summary
        }
    }

    /// Streams the export for an async consumer (the HTTP API): pages of at most
    /// `invoicesPerPage` invoices (fewer once a page holds ``InvoiceExportWriter/flushThreshold``
    /// bytes), each read in its own short transaction and handed to `write` before the next is
    /// read, so a slow client holds no snapshot open and memory stays flat.
    /// Pages follow the sort key, so no invoice is skipped or repeated while the ledger changes;
    /// each row is the invoice as it was when its page was read.
    public func stream(
        _ request: InvoiceExportRequest, invoicesPerPage: Int = 1000, write: ([UInt8]) async throws -> Void
    ) async throws -> InvoiceExportSummary {
        try await InvoiceExportWriter.stream(request, invoicesPerPage: invoicesPerPage, readPage: { writer in
            try await database.writer.read { db in
                var writer = writer
                let (sql, binds) = InvoiceExportQuery.sql(request, after: writer.last, limit: invoicesPerPage, dialect: .sqlite)
                let cursor = try Row.fetchCursor(try db.makeStatement(sql: sql), arguments: Self.arguments(binds))
                try Self.encode(cursor, db: db, into: &writer, stopWhenFull: true) { _, _ in }
                return writer
            }
        }, write: write)
    }

    /// Encodes the invoices of the cursor, each with its lines in the lines layout; with
    /// `stopWhenFull`, stops after the invoice that fills the writer's buffer.
    private static func encode(
        _ cursor: RowCursor, db: Database, into writer: inout InvoiceExportWriter, stopWhenFull: Bool = false,
        checkpoint: (Int, inout ExportRowEncoder) throws -> Void
    ) throws {
        let linesStatement = writer.request.layout == .lines
            ? try db.makeStatement(
                sql: "SELECT \(InvoiceExportQuery.linesColumns) FROM invoiceLine WHERE account = ? AND livemode = ? AND invoice = ? ORDER BY position")
            : nil
        while let row = try cursor.next() {
            let invoice = invoiceRow(row)
            let lines = try linesStatement.map {
                try Row.fetchCursor($0, arguments: [invoice.key.account, invoice.key.livemode, invoice.key.id])
            }
            try writer.add(invoice, nextLine: { try lines?.next().map(lineRow) }, checkpoint: checkpoint)
            if stopWhenFull, writer.isFull { break }
        }
    }

    static func arguments(_ binds: [ExportBind]) -> StatementArguments {
        StatementArguments(binds.map { bind -> (any DatabaseValueConvertible) in
            switch bind {
            case .text(let value): value
            case .integer(let value): value
            case .boolean(let value): value
            }
        })
    }

    /// An invoice row from the columns of ``InvoiceExportQuery/sql(_:after:limit:dialect:)``, in order.
    private static func invoiceRow(_ row: Row) -> InvoiceExportRow {
        InvoiceExportRow(
            key: InvoiceSortKey(created: row[18], id: row[2], account: row[0], livemode: row[1]),
            number: row[3], status: row[4], customer: row[5], customerEmail: row[6], customerName: row[7], appUser: row[8],
            subscription: row[9], currency: row[10], subtotal: row[11], discount: row[12], tax: row[13], total: row[14],
            amountDue: row[15], amountPaid: row[16], amountRemaining: row[17], finalizedAt: row[19], paidAt: row[20],
            voidedAt: row[21], markedUncollectibleAt: row[22], periodStart: row[23], periodEnd: row[24], dueDate: row[25],
            billingReason: row[26], collectionMethod: row[27], hostedInvoiceURL: row[28], invoicePDF: row[29],
            needsRefetch: row[30])
    }

    /// A line row from the columns of ``InvoiceExportQuery/linesColumns``, in order.
    private static func lineRow(_ row: Row) -> InvoiceLineExportRow {
        InvoiceLineExportRow(
            position: row[0], id: row[1], description: row[2], quantity: row[3], amount: row[4], currency: row[5],
            periodStart: row[6], periodEnd: row[7], price: row[8], subscription: row[9], proration: row[10])
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
