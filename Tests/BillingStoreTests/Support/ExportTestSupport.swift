import BillingCore
import BillingStore
import Foundation
import GRDB
import Synchronization

/// An invoice row as the ledger stores it, with defaults for what a test does not care about.
struct LedgerInvoice {
    var id: String
    var account = ""
    var livemode = true
    var number: String? = nil
    var customer: String? = "cus_A"
    var customerEmail: String? = nil
    var customerName: String? = nil
    var subscription: String? = nil
    var status: String? = "paid"
    var currency = "usd"
    var subtotal: Int64 = 1000
    var discount: Int64 = 0
    var tax: Int64 = 0
    /// `subtotal - discount + tax` when nil.
    var total: Int64? = nil
    var amountPaid: Int64? = nil
    var created: Int64? = 1_767_225_600
    var finalizedAt: Int64? = nil
    var paidAt: Int64? = nil
    var voidedAt: Int64? = nil
    var periodStart: Int64? = nil
    var periodEnd: Int64? = nil
    var billingReason: String? = "subscription_cycle"
    var collectionMethod: String? = "charge_automatically"
    var hostedInvoiceURL: String? = nil
    var invoicePDF: String? = nil
    var deleted = false
    var needsRefetch = false
    var lines: [LedgerLine] = []

    var resolvedTotal: Int64 { total ?? subtotal - discount + tax }
}

struct LedgerLine {
    var id: String
    var amount: Int64
    var description: String? = nil
    var quantity: Int64? = 1
    var currency: String? = nil
    var proration = false
}

/// A fresh on-disk ledger in a temporary directory, filled with SQL the way the applier fills it.
struct ExportLedger {
    let directory: URL
    let database: SQLiteDatabase

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        database = try SQLiteDatabase.open(path: directory.appendingPathComponent("ledger.sqlite3").path)
    }

    func remove() {
        try? database.close()
        try? FileManager.default.removeItem(at: directory)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func insert(_ invoices: [LedgerInvoice]) throws {
        try database.writer.write { db in
            for invoice in invoices {
                let total = invoice.resolvedTotal
                let paid = invoice.amountPaid ?? (invoice.status == "paid" ? total : 0)
                try db.execute(
                    sql: """
                        INSERT INTO invoice (account, livemode, id, number, customer, customerEmail, customerName, subscription,
                            status, currency, subtotal, discount, tax, total, amountDue, amountPaid, amountRemaining, created,
                            finalizedAt, paidAt, voidedAt, periodStart, periodEnd, billingReason, collectionMethod,
                            hostedInvoiceURL, invoicePDF, raw, vDeleted, vCreated, vEventID, needsRefetch)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, X'7B7D', ?, 1, 'evt', ?)
                        """,
                    arguments: [
                        invoice.account, invoice.livemode, invoice.id, invoice.number, invoice.customer, invoice.customerEmail,
                        invoice.customerName, invoice.subscription, invoice.status, invoice.currency, invoice.subtotal,
                        invoice.discount, invoice.tax, total, total, paid, total - paid, invoice.created, invoice.finalizedAt,
                        invoice.paidAt, invoice.voidedAt, invoice.periodStart, invoice.periodEnd, invoice.billingReason,
                        invoice.collectionMethod, invoice.hostedInvoiceURL, invoice.invoicePDF, invoice.deleted,
                        invoice.needsRefetch,
                    ])
                for (position, line) in invoice.lines.enumerated() {
                    try db.execute(
                        sql: """
                            INSERT INTO invoiceLine (account, livemode, invoice, position, id, amount, currency, description,
                                quantity, periodStart, periodEnd, price, subscription, proration)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'price_1', ?, ?)
                            """,
                        arguments: [
                            invoice.account, invoice.livemode, invoice.id, position, line.id, line.amount,
                            line.currency ?? invoice.currency, line.description, line.quantity, invoice.periodStart,
                            invoice.periodEnd, invoice.subscription, line.proration,
                        ])
                }
            }
        }
    }

    func insertCustomer(_ id: String, email: String? = nil, name: String? = nil, appUser: String? = nil, account: String = "", livemode: Bool = true) throws {
        try database.writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO customer (account, livemode, id, email, name, appUserID, raw, vCreated, vEventID)
                    VALUES (?, ?, ?, ?, ?, ?, X'7B7D', 1, 'evt')
                    """,
                arguments: [account, livemode, id, email, name, appUser])
        }
    }

    func link(user: String, customer: String, account: String = "", livemode: Bool = true) throws {
        try database.writer.write { db in
            try db.execute(
                sql: "INSERT INTO userLink (account, livemode, appUserID, customer, source) VALUES (?, ?, ?, ?, 'checkout')",
                arguments: [account, livemode, user, customer])
        }
    }

    /// `count` invoices with three lines each (or none), generated inside SQLite.
    func generate(count: Int, start: Int64 = 1_767_225_600, lines: Bool = true) throws {
        try database.writer.write { db in
            try db.execute(
                sql: """
                    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
                    INSERT INTO invoice (account, livemode, id, number, customer, customerEmail, status, currency, subtotal,
                        discount, tax, total, amountDue, amountPaid, amountRemaining, created, raw, vCreated, vEventID)
                    SELECT '', 1, printf('in_gen_%08d', i), printf('INV-%08d', i), printf('cus_%04d', i % 97),
                        printf('buyer%d@example.com', i % 97), 'paid', CASE i % 3 WHEN 0 THEN 'usd' WHEN 1 THEN 'jpy' ELSE 'kwd' END,
                        3000 + i % 7, 0, 0, 3000 + i % 7, 3000 + i % 7, 3000 + i % 7, 0, ? + i, X'7B7D', 1, 'evt'
                    FROM n
                    """,
                arguments: [count, start])
            guard lines else { return }
            try db.execute(sql: """
                INSERT INTO invoiceLine (account, livemode, invoice, position, id, amount, currency, description, quantity, proration)
                SELECT account, livemode, id, p.position, id || '_' || p.position, CASE p.position WHEN 0 THEN subtotal - 2000 ELSE 1000 END,
                    currency, 'Line, "' || p.position || '"', 1, 0
                FROM invoice, (SELECT 0 AS position UNION ALL SELECT 1 UNION ALL SELECT 2) p
                WHERE id GLOB 'in_gen_*'
                """)
        }
    }
}

/// Collects what an export writes, chunk by chunk.
final class CollectingDestination: ExportDestination {
    private let state = Mutex<(bytes: [UInt8], chunks: [Int])>(([], []))

    func write(_ bytes: [UInt8]) throws {
        state.withLock {
            $0.bytes += bytes
            $0.chunks.append(bytes.count)
        }
    }

    var bytes: [UInt8] { state.withLock { $0.bytes } }
    var text: String { String(decoding: bytes, as: UTF8.self) }
    var chunkSizes: [Int] { state.withLock { $0.chunks } }
}

extension InvoiceExportStore {
    /// The whole export in memory, and its summary.
    func exportText(_ request: InvoiceExportRequest) async throws -> (String, InvoiceExportSummary) {
        let destination = CollectingDestination()
        let summary = try await export(request, to: destination, cancellation: nil, progress: nil)
        return (destination.text, summary)
    }

    /// The paged stream collected in memory.
    func streamText(_ request: InvoiceExportRequest, invoicesPerPage: Int) async throws -> (String, InvoiceExportSummary) {
        var bytes: [UInt8] = []
        let summary = try await stream(request, invoicesPerPage: invoicesPerPage) { bytes += $0 }
        return (String(decoding: bytes, as: UTF8.self), summary)
    }
}

/// JSON Lines parsed into objects.
func jsonRows(_ text: String) throws -> [[String: Any]] {
    try text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { line in
        try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
    }
}
