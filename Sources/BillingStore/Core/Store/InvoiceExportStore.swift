/// Invoice exports (CSV or JSON Lines, invoice or line layout), for `billingd export` and the
/// service API.
public protocol InvoiceExportStore: Sendable {
    /// Writes the whole export to `destination` as one consistent snapshot of the ledger;
    /// `progress` hears the rows written so far, every few thousand rows.
    func export(
        _ request: InvoiceExportRequest, to destination: some ExportDestination,
        cancellation: ExportCancellation?, progress: (@Sendable (Int) -> Void)?
    ) async throws -> InvoiceExportSummary
    /// Streams the export in pages of at most `invoicesPerPage` invoices, each read in its own
    /// short transaction and handed to `write` before the next is read.
    func stream(
        _ request: InvoiceExportRequest, invoicesPerPage: Int, write: ([UInt8]) async throws -> Void
    ) async throws -> InvoiceExportSummary
}
