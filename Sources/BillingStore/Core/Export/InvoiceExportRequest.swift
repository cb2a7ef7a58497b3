/// What to export: which invoices, in which format, one row per invoice or per line.
public struct InvoiceExportRequest: Sendable, Equatable {
    /// The file format of the rows.
    public enum Format: String, Sendable, CaseIterable {
        /// RFC 4180 CSV with a header row, CRLF line ends, formula injection neutralised.
        case csv
        /// One JSON object per line (LF), amounts as exact strings and integers.
        case jsonl
    }

    /// What one row is.
    public enum Layout: String, Sendable, CaseIterable {
        /// One row per invoice.
        case invoices
        /// One row per invoice line, the invoice's columns repeated on each; an invoice without
        /// lines in the ledger still has one row, with empty line columns.
        case lines
    }

    public var format: Format
    public var layout: Layout
    /// Only invoices created at or after this instant (Unix seconds, inclusive).
    public var createdFrom: Int64?
    /// Only invoices created before this instant (Unix seconds, exclusive).
    public var createdBefore: Int64?
    /// Only invoices in one of these statuses (`draft`, `open`, `paid`, `uncollectible`, `void`);
    /// all when empty.
    public var statuses: [String]
    /// Only invoices of this Stripe customer (`cus_…`).
    public var customer: String?
    /// Only invoices of customers tied to this app user (`customer.metadata.app_user_id` or a
    /// Checkout `client_reference_id`).
    public var appUser: String?
    /// Only invoices in this currency (any case).
    public var currency: String?
    /// Live-mode invoices when true, test-mode ones when false; never both.
    public var livemode: Bool
    /// Only invoices of this connected account (`acct_…`); `""` is the platform account; all
    /// accounts when nil.
    public var account: String?
    /// Starts a CSV with a UTF-8 byte order mark, which Excel needs to read Unicode correctly.
    public var byteOrderMark: Bool

    public init(
        format: Format = .csv, layout: Layout = .invoices, createdFrom: Int64? = nil, createdBefore: Int64? = nil,
        statuses: [String] = [], customer: String? = nil, appUser: String? = nil, currency: String? = nil,
        livemode: Bool = true, account: String? = nil, byteOrderMark: Bool = false
    ) {
        self.format = format
        self.layout = layout
        self.createdFrom = createdFrom
        self.createdBefore = createdBefore
        self.statuses = statuses
        self.customer = customer
        self.appUser = appUser
        self.currency = currency
        self.livemode = livemode
        self.account = account
        self.byteOrderMark = byteOrderMark
    }

    /// The statuses Stripe documents for invoices; others are exported as they come.
    public static let knownStatuses = ["draft", "open", "paid", "uncollectible", "void"]

    /// Checks that the request makes sense before anything is read or written.
    public func validate() throws(InvoiceExportError) {
        if let createdFrom, let createdBefore, createdBefore <= createdFrom {
            throw .emptyRange(from: createdFrom, to: createdBefore)
        }
        if let currency, currency.utf8.count != 3 || !currency.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) {
            throw .invalidValue(name: "currency", value: currency, expected: "a three-letter ISO 4217 code such as usd")
        }
        if byteOrderMark, format != .csv {
            throw .invalidValue(name: "bom", value: "true", expected: "a byte order mark only with the csv format")
        }
    }

    /// The range in words for summaries: `created in [2026-01-01T00:00:00Z, 2026-02-01T00:00:00Z)`.
    public var rangeDescription: String {
        switch (createdFrom.map(UTCTimestamp.string), createdBefore.map(UTCTimestamp.string)) {
        case (let from?, let to?): "created in [\(from), \(to))"
        case (let from?, nil): "created at or after \(from)"
        case (nil, let to?): "created before \(to)"
        case (nil, nil): "created at any time"
        }
    }
}

/// Why an export could not be made; each case says what to change.
public enum InvoiceExportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A filter or option has a value it cannot take.
    case invalidValue(name: String, value: String, expected: String)
    /// `to` is not after `from`.
    case emptyRange(from: Int64, to: Int64)
    /// The output cannot be created or written; `reason` is the system's.
    case output(path: String, reason: String)
    /// The output file exists and replacing it was not asked for (`--force`).
    case outputExists(path: String)
    /// A signal stopped the export; the output file was not created.
    case interrupted

    public var description: String {
        switch self {
        case .invalidValue(let name, let value, let expected):
            "\(name) \"\(value)\" is not valid: expected \(expected)."
        case .emptyRange(let from, let to):
            "The range is empty: to (\(UTCTimestamp.string(to))) must be after from (\(UTCTimestamp.string(from))); from is inclusive, to exclusive."
        case .output(let path, let reason):
            "Cannot write \(path): \(reason)."
        case .outputExists(let path):
            "\(path) exists; add --force to replace it, or name another file."
        case .interrupted:
            "The export was interrupted; no output file was written."
        }
    }
}
