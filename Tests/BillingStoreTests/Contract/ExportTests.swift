import BillingCore
import BillingSamples
import BillingStore
import CSV
import Foundation
#if canImport(Glibc)
import Glibc
#endif
// libc's `struct stat` counts as CoreFoundation's here (see AtomicExportFile.swift).
#if canImport(CoreFoundation)
import CoreFoundation
#endif
import GRDB
import Testing

@Suite("Finance export of invoices")
struct ExportTests {
    let jan1: Int64 = 1_767_225_600  // 2026-01-01T00:00:00Z
    let feb1: Int64 = 1_769_904_000  // 2026-02-01T00:00:00Z

    @Test("Amounts are exact in every currency exponent, as decimal strings and minor units", arguments: StoreBackend.allCases)
    func exactAmounts(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([
            LedgerInvoice(id: "in_usd", currency: "usd", subtotal: 123_456, discount: 456, tax: 2001, created: jan1),
            LedgerInvoice(id: "in_jpy", currency: "jpy", subtotal: 98_765, discount: 5, tax: 0, created: jan1 + 1),
            LedgerInvoice(id: "in_krw", currency: "KRW", subtotal: 5, created: jan1 + 2),
            LedgerInvoice(id: "in_kwd", currency: "kwd", subtotal: 12_345, discount: 0, tax: 5, created: jan1 + 3),
            LedgerInvoice(id: "in_bhd", currency: "bhd", subtotal: 7, created: jan1 + 4),
            LedgerInvoice(id: "in_eur", status: "void", currency: "eur", subtotal: -250, created: jan1 + 5),
            LedgerInvoice(id: "in_max", status: "open", currency: "usd", subtotal: Int64.max, created: jan1 + 6),
        ])
        try await withExports(backend, of: ledger.database) { exporter in
            let (text, summary) = try await exporter.exportText(.init(format: .jsonl))
            let rows = try jsonRows(text)
            #expect(rows.map { $0["invoice_id"] as? String } == ["in_usd", "in_jpy", "in_krw", "in_kwd", "in_bhd", "in_eur", "in_max"])
            func row(_ id: String) -> [String: Any] { rows.first { $0["invoice_id"] as? String == id }! }
            #expect(row("in_usd")["subtotal"] as? String == "1234.56")
            #expect(row("in_usd")["discount"] as? String == "4.56")
            #expect(row("in_usd")["tax"] as? String == "20.01")
            #expect(row("in_usd")["total"] as? String == "1250.01")
            #expect(row("in_usd")["total_minor"] as? Int == 125_001)
            #expect(row("in_usd")["currency_exponent"] as? Int == 2)
            #expect(row("in_jpy")["subtotal"] as? String == "98765")
            #expect(row("in_jpy")["total"] as? String == "98760")
            #expect(row("in_jpy")["currency_exponent"] as? Int == 0)
            #expect(row("in_krw")["currency"] as? String == "krw")
            #expect(row("in_krw")["total"] as? String == "5")
            #expect(row("in_kwd")["subtotal"] as? String == "12.345")
            #expect(row("in_kwd")["total"] as? String == "12.350")
            #expect(row("in_bhd")["total"] as? String == "0.007")
            #expect(row("in_eur")["total"] as? String == "-2.50")
            #expect(row("in_eur")["amount_paid"] as? String == "0.00")
            #expect(row("in_max")["subtotal"] as? String == "92233720368547758.07")
            // JSON integers survive as exact Int64 even where a Double would round.
            #expect((row("in_max")["subtotal_minor"] as? NSNumber)?.int64Value == Int64.max)

            // Totals are per currency and exact (the Int64.max invoice and the usd one add up past Int64).
            let usd = try #require(summary.totals("usd"))
            #expect(usd.invoices == 2)
            #expect(DecimalAmount.string(usd.subtotal, exponent: 2) == "92233720368548992.63")
            #expect(summary.totals("jpy")?.total == 98_760)
            #expect(summary.totals("kwd")?.tax == 5)
            #expect(summary.currencies.map(\.currency.code) == ["bhd", "eur", "jpy", "krw", "kwd", "usd"])
            #expect(summary.invoices == 7 && summary.rows == 7)
        }
    }

    @Test("CSV read back with a real CSV parser equals the ledger, line by line", arguments: StoreBackend.allCases)
    func csvRoundTrip(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        let awkward = [
            "Plain", "Comma, inside", "Quote \"inside\"", "New\nline", "Carriage\r\nreturn", "Ünïcödé — 日本語 🧾",
            "=HYPERLINK(\"http://evil\")", "+1+1", "-2", "@SUM(A1)", "\tTabbed", "\rReturn", "＝1+1", "a=b", "", " spaced ",
        ]
        var invoices: [LedgerInvoice] = []
        for (index, text) in awkward.enumerated() {
            invoices.append(LedgerInvoice(
                id: "in_\(index)", number: "INV-\(index)", customer: "cus_\(index)", customerEmail: "e\(index)@example.com",
                customerName: text, subscription: index % 2 == 0 ? "sub_\(index)" : nil, status: ["paid", "open", "void"][index % 3],
                currency: ["usd", "jpy", "kwd", "eur"][index % 4], subtotal: Int64(1000 * index + 7), discount: Int64(index),
                tax: Int64(index * 3), created: jan1 + Int64(index * 3600), finalizedAt: jan1 + Int64(index * 3600 + 60),
                paidAt: index % 3 == 0 ? jan1 + Int64(index * 3600 + 120) : nil, periodStart: jan1 - 86_400, periodEnd: jan1,
                hostedInvoiceURL: "https://invoice.stripe.com/i/\(index)", invoicePDF: "https://pay.stripe.com/\(index)/pdf",
                lines: [
                    LedgerLine(id: "il_\(index)_a", amount: Int64(1000 * index), description: text),
                    LedgerLine(id: "il_\(index)_b", amount: 7, description: "Seats, \"extra\"", quantity: 3, proration: true),
                ]))
        }
        try ledger.insert(invoices)
        try await withExports(backend, of: ledger.database) { exporter in
            let (text, _) = try await exporter.exportText(.init(format: .csv, layout: .lines))

            let reader = try CSVReader(string: text, hasHeaderRow: true)
            #expect(reader.headerRow == InvoiceExportSchema.columns(.lines))
            var parsed: [[String: String]] = []
            while let row = reader.next() {
                parsed.append(Dictionary(uniqueKeysWithValues: zip(reader.headerRow!, row)))
            }
            #expect(reader.error == nil)
            #expect(parsed.count == invoices.count * 2)

            /// A text cell as a spreadsheet-safe export must write it: OWASP's treatment (a leading
            /// `'`) when it starts like a formula, fullwidth forms included; as it is otherwise.
            func neutralised(_ text: String?) -> String {
                guard let text else { return "" }
                return ["=", "+", "-", "@", "\t", "\r", "\n", "＝", "＋", "－", "＠"].contains(where: text.hasPrefix) ? "'" + text : text
            }
            // The cells that had to be neutralised were, and no other.
            #expect(neutralised("=HYPERLINK(\"http://evil\")") == "'=HYPERLINK(\"http://evil\")")
            #expect(neutralised("a=b") == "a=b" && neutralised(" spaced ") == " spaced ")
            let columns = InvoiceExportSchema.columns(.lines)
            for (index, invoice) in invoices.enumerated() {
                let exponent = Currency(invoice.currency).exponent
                let total = invoice.resolvedTotal
                let paid = invoice.status == "paid" ? total : 0
                for (position, line) in invoice.lines.enumerated() {
                    let row = parsed[index * 2 + position]
                    // Every column's expected cell; amounts also as decimals, parsed back.
                    var expected: [String: String] = [:]
                    var amounts: [String: Int64] = [:]
                    let stamp: (Int64?) -> String = { $0.map(UTCTimestamp.string) ?? "" }
                    for (name, minorUnits) in [
                        ("subtotal", invoice.subtotal), ("discount", invoice.discount), ("tax", invoice.tax), ("total", total),
                        ("amount_due", total), ("amount_paid", paid), ("amount_remaining", total - paid), ("line_amount", line.amount),
                    ] {
                        expected["\(name)_minor"] = String(minorUnits)
                        amounts[name] = minorUnits
                    }
                    expected["schema_version"] = "1"
                    expected["invoice_id"] = invoice.id
                    expected["invoice_number"] = invoice.number ?? ""
                    expected["status"] = invoice.status ?? ""
                    expected["customer_id"] = invoice.customer ?? ""
                    expected["customer_email"] = invoice.customerEmail ?? ""
                    expected["customer_name"] = neutralised(invoice.customerName)
                    expected["app_user_id"] = ""
                    expected["subscription_id"] = invoice.subscription ?? ""
                    expected["currency"] = invoice.currency
                    expected["currency_exponent"] = String(exponent)
                    expected["created"] = stamp(invoice.created)
                    expected["finalized_at"] = stamp(invoice.finalizedAt)
                    expected["paid_at"] = stamp(invoice.paidAt)
                    expected["voided_at"] = ""
                    expected["marked_uncollectible_at"] = ""
                    expected["period_start"] = "2025-12-31T00:00:00Z"
                    expected["period_end"] = "2026-01-01T00:00:00Z"
                    expected["due_date"] = ""
                    expected["billing_reason"] = "subscription_cycle"
                    expected["collection_method"] = "charge_automatically"
                    expected["hosted_invoice_url"] = invoice.hostedInvoiceURL ?? ""
                    expected["invoice_pdf_url"] = invoice.invoicePDF ?? ""
                    expected["livemode"] = "true"
                    expected["account"] = ""
                    expected["line_position"] = String(position)
                    expected["line_id"] = line.id
                    expected["line_description"] = neutralised(line.description)
                    expected["line_quantity"] = line.quantity.map(String.init) ?? ""
                    expected["line_currency"] = line.currency ?? invoice.currency
                    expected["line_period_start"] = "2025-12-31T00:00:00Z"
                    expected["line_period_end"] = "2026-01-01T00:00:00Z"
                    expected["line_price_id"] = "price_1"
                    expected["line_subscription_id"] = invoice.subscription ?? ""
                    expected["line_proration"] = line.proration ? "true" : "false"
                    #expect(Set(expected.keys).union(amounts.keys) == Set(columns), "every column is checked")
                    for (column, cell) in expected {
                        #expect(row[column] == cell, "\(column) of \(invoice.id) line \(position)")
                    }
                    for (column, minorUnits) in amounts {
                        let cell = row[column] ?? ""
                        #expect(DecimalAmount.parse(cell, exponent: exponent) == minorUnits, "\(column) of \(invoice.id)")
                        #expect(!cell.hasPrefix("'"), "an amount is never neutralised")
                    }
                }
            }
        }
    }

    @Test("Formula injection is neutralised the OWASP way in CSV, and only in text cells", arguments: StoreBackend.allCases)
    func formulaInjection(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        let cases: [(String, String)] = [
            ("=1+1", "\"'=1+1\""), ("+1", "\"'+1\""), ("-1", "\"'-1\""), ("@SUM(A1:A2)", "\"'@SUM(A1:A2)\""),
            ("\tx", "\"'\tx\""), ("\rx", "\"'\rx\""), ("=HYPERLINK(\"x\")", "\"'=HYPERLINK(\"\"x\"\")\""),
            ("＝1+1", "\"'＝1+1\""), ("a=1", "a=1"), ("1-2", "1-2"), ("x@y.z", "x@y.z"), ("'quoted", "'quoted"),
        ]
        try ledger.insert(cases.enumerated().map { index, entry in
            LedgerInvoice(id: "in_\(index)", customerName: entry.0, subtotal: -1234, created: jan1 + Int64(index))
        })
        try await withExports(backend, of: ledger.database) { exporter in
            let (csv, _) = try await exporter.exportText(.init(format: .csv))
            let nameColumn = try #require(InvoiceExportSchema.invoiceColumns.firstIndex(of: "customer_name"))
            let rows = csv.components(separatedBy: "\r\n").dropFirst().filter { !$0.isEmpty }
            for (index, entry) in cases.enumerated() {
                let row = try #require(rows.first { $0.hasPrefix("1,in_\(index),") })
                // Cells before the name hold no commas, so the name starts after the 6th comma.
                let prefix = row.split(separator: ",", maxSplits: nameColumn, omittingEmptySubsequences: false)
                #expect(prefix[nameColumn].hasPrefix(entry.1), "\(entry.0.debugDescription) → \(prefix[nameColumn])")
                // Negative amounts stay numbers: a spreadsheet reads -12.34 as a number, not a formula.
                #expect(row.contains(",-12.34,-1234,"))
            }
            // JSON Lines keep the text exactly as the ledger has it.
            let (jsonl, _) = try await exporter.exportText(.init(format: .jsonl))
            #expect(try jsonRows(jsonl).map { $0["customer_name"] as? String } == cases.map(\.0))
        }
    }

    @Test("An empty range gives a header-only CSV, an empty JSON Lines file and zero totals", arguments: StoreBackend.allCases)
    func emptyRange(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([LedgerInvoice(id: "in_1", created: jan1)])
        try await withExports(backend, of: ledger.database) { exporter in
            let range = InvoiceExportRequest(createdFrom: feb1, createdBefore: feb1 + 86_400)
            let (csv, summary) = try await exporter.exportText(range)
            #expect(csv == InvoiceExportSchema.invoiceColumns.joined(separator: ",") + "\r\n")
            #expect(summary.invoices == 0 && summary.rows == 0 && summary.currencies.isEmpty)
            var jsonl = range
            jsonl.format = .jsonl
            #expect(try await exporter.exportText(jsonl).0 == "")
            var lines = range
            lines.layout = .lines
            #expect(try await exporter.exportText(lines).0 == InvoiceExportSchema.columns(.lines).joined(separator: ",") + "\r\n")
            // An empty ledger too.
            let empty = try ExportLedger()
            defer { empty.remove() }
            #expect(try await SQLiteInvoiceExporter(database: empty.database).exportText(jsonl).1.invoices == 0)
            // A range whose end is not after its start is refused, not silently empty.
            await #expect(throws: InvoiceExportError.emptyRange(from: feb1, to: jan1)) {
                try await exporter.exportText(.init(createdFrom: feb1, createdBefore: jan1))
            }
            await #expect(throws: InvoiceExportError.emptyRange(from: jan1, to: jan1)) {
                try await exporter.exportText(.init(createdFrom: jan1, createdBefore: jan1))
            }
        }
    }

    @Test("Range boundaries: from is inclusive, to exclusive, to the second", arguments: StoreBackend.allCases)
    func boundaryInstants(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([
            LedgerInvoice(id: "in_before", created: jan1 - 1), LedgerInvoice(id: "in_first", created: jan1),
            LedgerInvoice(id: "in_last", created: feb1 - 1), LedgerInvoice(id: "in_next", created: feb1),
            LedgerInvoice(id: "in_undated", created: nil),
        ])
        try await withExports(backend, of: ledger.database) { exporter in
            let january = InvoiceExportRequest(createdFrom: UTCTimestamp.parse("2026-01"), createdBefore: UTCTimestamp.parse("2026-02"))
            let found1 = try await exportedIDs(exporter, january)
            #expect(found1 == ["in_first", "in_last"])
            let found2 = try await exportedIDs(exporter, .init(createdFrom: jan1))
            #expect(found2 == ["in_first", "in_last", "in_next"])
            let found3 = try await exportedIDs(exporter, .init(createdBefore: jan1))
            #expect(found3 == ["in_before"])
            let found4 = try await exportedIDs(exporter, .init(createdFrom: feb1 - 1, createdBefore: feb1))
            #expect(found4 == ["in_last"])
            // Without a range, every invoice, the undated one first.
            let found5 = try await exportedIDs(exporter, .init())
            #expect(found5 == ["in_undated", "in_before", "in_first", "in_last", "in_next"])
        }
    }

    @Test("Lines mode: one row per line, the line amounts sum to each invoice's subtotal, and the totals agree", arguments: StoreBackend.allCases)
    func linesSumToInvoiceTotals(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([
            LedgerInvoice(id: "in_a", currency: "usd", subtotal: 3500, discount: 500, tax: 600, created: jan1, lines: [
                LedgerLine(id: "il_1", amount: 2000), LedgerLine(id: "il_2", amount: 1000), LedgerLine(id: "il_3", amount: 500),
            ]),
            LedgerInvoice(id: "in_b", currency: "jpy", subtotal: 980, created: jan1 + 1, lines: [
                LedgerLine(id: "il_4", amount: 1000), LedgerLine(id: "il_5", amount: -20, description: "Proration credit", proration: true),
            ]),
            LedgerInvoice(id: "in_c", currency: "kwd", subtotal: 1250, created: jan1 + 2, lines: [LedgerLine(id: "il_6", amount: 1250)]),
            // An invoice whose lines the ledger does not have still appears, once, with empty line columns.
            LedgerInvoice(id: "in_d", currency: "usd", subtotal: 0, created: jan1 + 3, lines: []),
        ])
        try ledger.generate(count: 300, start: jan1 + 10)
        try await withExports(backend, of: ledger.database) { exporter in
            let (linesText, linesSummary) = try await exporter.exportText(.init(format: .jsonl, layout: .lines))
            let (invoicesText, invoicesSummary) = try await exporter.exportText(.init(format: .jsonl))
            let lineRows = try jsonRows(linesText)
            let invoiceRows = try jsonRows(invoicesText)

            #expect(lineRows.count == 907, "3 + 2 + 1 + 1 lines, and 3 for each of the 300 generated invoices")
            var lineSums: [String: Int64] = [:]
            for row in lineRows {
                let id = row["invoice_id"] as! String
                if let amount = row["line_amount_minor"] as? Int64 {
                    lineSums[id, default: 0] += amount
                    #expect(DecimalAmount.parse(row["line_amount"] as! String, exponent: row["currency_exponent"] as! Int) == amount)
                } else {
                    #expect(row["line_amount_minor"] is NSNull && row["line_id"] is NSNull)
                    lineSums[id, default: 0] += 0
                }
            }
            #expect(lineSums.count == invoiceRows.count)
            for invoice in invoiceRows {
                let id = invoice["invoice_id"] as! String
                #expect(lineSums[id] == invoice["subtotal_minor"] as? Int64, "lines of \(id)")
            }
            // The invoice totals are counted once per invoice, however many lines it has.
            #expect(linesSummary.invoices == invoicesSummary.invoices)
            #expect(linesSummary.rows == lineRows.count)
            for totals in invoicesSummary.currencies {
                let fromLines = try #require(linesSummary.totals(totals.currency.code))
                #expect(fromLines.invoices == totals.invoices)
                #expect(fromLines.subtotal == totals.subtotal)
                #expect(fromLines.total == totals.total)
                #expect(fromLines.amountPaid == totals.amountPaid)
                #expect(fromLines.lineAmount == totals.subtotal, "line amounts of \(totals.currency)")
            }
            #expect(linesSummary.totals("usd")?.lines == 3 + 300)
        }
    }

    @Test("Output is deterministic: byte-identical every time, ordered by created then id whatever the insert order", arguments: StoreBackend.allCases)
    func deterministic(_ backend: StoreBackend) async throws {
        let currencies = ["usd", "eur", "jpy"]
        var invoices: [LedgerInvoice] = []
        for index in 0..<60 {
            let id = "in_" + String(format: "%03d", (index * 37) % 60)
            let amount = Int64(index * 101)
            invoices.append(LedgerInvoice(
                id: id, customerName: "Name \(index)", currency: currencies[index % 3], subtotal: amount,
                created: jan1 + Int64(index / 7), lines: [LedgerLine(id: "il_\(index)", amount: amount)]))
        }
        let first = try ExportLedger()
        defer { first.remove() }
        try first.insert(invoices)
        let second = try ExportLedger()
        defer { second.remove() }
        try second.insert(invoices.reversed())
        try await withExports(backend, of: first.database) { firstExports in
            try await withExports(backend, of: second.database) { secondExports in
                for format in InvoiceExportRequest.Format.allCases {
                    for layout in InvoiceExportRequest.Layout.allCases {
                        let request = InvoiceExportRequest(format: format, layout: layout)
                        let a = try await firstExports.exportText(request)
                        let b = try await firstExports.exportText(request)
                        let c = try await secondExports.exportText(request)
                        #expect(a.0 == b.0 && a.0 == c.0, "\(format) \(layout)")
                        #expect(a.1 == c.1)
                    }
                }
            }
            let rows = try jsonRows(try await firstExports.exportText(.init(format: .jsonl)).0)
            let keys: [String] = rows.map { row in "\(row["created"] as! String) \(row["invoice_id"] as! String)" }
            #expect(keys == keys.sorted())
        }
    }

    @Test("The paged stream of the HTTP API gives the same bytes as the one-snapshot export", arguments: StoreBackend.allCases, [1, 2, 7, 1000])
    func pagesEqualSnapshot(_ backend: StoreBackend, invoicesPerPage: Int) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([
            LedgerInvoice(id: "in_nodate_b", created: nil, lines: [LedgerLine(id: "il_x", amount: 1000)]),
            LedgerInvoice(id: "in_nodate_a", created: nil),
            LedgerInvoice(id: "in_tie", account: "acct_2", created: jan1),
            LedgerInvoice(id: "in_tie", account: "acct_1", created: jan1),
            LedgerInvoice(id: "in_tie", account: "acct_1", livemode: false, created: jan1),
        ])
        try ledger.generate(count: 25, start: jan1)
        try await withExports(backend, of: ledger.database) { exporter in
            for format in InvoiceExportRequest.Format.allCases {
                for layout in InvoiceExportRequest.Layout.allCases {
                    for livemode in [true, false] {
                        let request = InvoiceExportRequest(format: format, layout: layout, livemode: livemode, byteOrderMark: format == .csv)
                        let snapshot = try await exporter.exportText(request)
                        let paged = try await exporter.streamText(request, invoicesPerPage: invoicesPerPage)
                        #expect(paged.0 == snapshot.0, "\(format) \(layout) livemode \(livemode) pages of \(invoicesPerPage)")
                        #expect(paged.1 == snapshot.1)
                    }
                }
            }
        }
    }

    @Test("Filters: status, customer, app user, currency, mode, account; deleted invoices never appear", arguments: StoreBackend.allCases)
    func filters(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insertCustomer("cus_meta", email: "meta@example.com", name: "Meta Customer", appUser: "user_1")
        try ledger.insertCustomer("cus_link")
        try ledger.link(user: "user_1", customer: "cus_link")
        try ledger.link(user: "user_1", customer: "cus_test", livemode: false)
        try ledger.insert([
            LedgerInvoice(id: "in_paid", customer: "cus_meta", status: "paid", currency: "usd", created: jan1),
            LedgerInvoice(id: "in_open", customer: "cus_link", status: "open", currency: "EUR", created: jan1 + 1),
            LedgerInvoice(id: "in_void", customer: "cus_other", status: "void", currency: "usd", created: jan1 + 2),
            LedgerInvoice(id: "in_deleted", customer: "cus_meta", status: "draft", created: jan1 + 3, deleted: true),
            LedgerInvoice(id: "in_test", livemode: false, customer: "cus_test", created: jan1 + 4),
            LedgerInvoice(id: "in_connect", account: "acct_1", customer: "cus_meta", created: jan1 + 5),
        ])
        try await withExports(backend, of: ledger.database) { exporter in
            let found6 = try await exportedIDs(exporter, .init())
            #expect(found6 == ["in_paid", "in_open", "in_void", "in_connect"])
            let found7 = try await exportedIDs(exporter, .init(livemode: false))
            #expect(found7 == ["in_test"])
            let found8 = try await exportedIDs(exporter, .init(statuses: ["paid", "void"]))
            #expect(found8 == ["in_paid", "in_void", "in_connect"])
            let found9 = try await exportedIDs(exporter, .init(statuses: ["draft"]))
            #expect(found9 == [])
            let found10 = try await exportedIDs(exporter, .init(customer: "cus_meta"))
            #expect(found10 == ["in_paid", "in_connect"])
            // The app user is tied to cus_meta by metadata and to cus_link by a Checkout session, in live mode.
            let found11 = try await exportedIDs(exporter, .init(appUser: "user_1"))
            #expect(found11 == ["in_paid", "in_open"])
            let found12 = try await exportedIDs(exporter, .init(appUser: "user_1", livemode: false))
            #expect(found12 == ["in_test"])
            let found13 = try await exportedIDs(exporter, .init(appUser: "nobody"))
            #expect(found13 == [])
            let found14 = try await exportedIDs(exporter, .init(currency: "eur"))
            #expect(found14 == ["in_open"])
            let found15 = try await exportedIDs(exporter, .init(currency: "USD"))
            #expect(found15 == ["in_paid", "in_void", "in_connect"])
            let found16 = try await exportedIDs(exporter, .init(account: "acct_1"))
            #expect(found16 == ["in_connect"])
            let found17 = try await exportedIDs(exporter, .init(account: ""))
            #expect(found17 == ["in_paid", "in_open", "in_void"])

            // Who the customer is: the invoice's own e-mail and name, else the customer's; the app user
            // from the customer's metadata, else from a Checkout link.
            let rows = try jsonRows(try await exporter.exportText(.init(format: .jsonl)).0)
            #expect(rows[0]["customer_email"] as? String == "meta@example.com")
            #expect(rows[0]["customer_name"] as? String == "Meta Customer")
            #expect(rows[0]["app_user_id"] as? String == "user_1")
            #expect(rows[1]["app_user_id"] as? String == "user_1")
            #expect(rows[1]["currency"] as? String == "eur")
            #expect(rows[2]["app_user_id"] is NSNull)
            #expect(rows[3]["account"] as? String == "acct_1")
            #expect(rows[3]["app_user_id"] is NSNull, "another account's customer is another customer")
        }
    }

    @Test("Invalid requests are refused before anything is read")
    func validation() async throws {
        #expect(throws: InvoiceExportError.self) { try InvoiceExportRequest(currency: "dollars").validate() }
        #expect(throws: InvoiceExportError.self) { try InvoiceExportRequest(format: .jsonl, byteOrderMark: true).validate() }
        #expect(throws: Never.self) { try InvoiceExportRequest(currency: "JPY", byteOrderMark: true).validate() }
    }

    @Test("Streaming: the destination receives bounded chunks, never the whole export at once", arguments: StoreBackend.allCases)
    func boundedChunks(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.generate(count: 6000)
        try await withExports(backend, of: ledger.database) { exporter in
            let destination = CollectingDestination()
            let summary = try await exporter.export(.init(layout: .lines), to: destination, cancellation: nil, progress: nil)
            #expect(summary.rows == 18_000)
            #expect(destination.chunkSizes.count > 3)
            #expect(destination.chunkSizes.max()! <= 256 * 1024 + 4096)
            #expect(destination.text.components(separatedBy: "\r\n").count == 18_000 + 2)

            // The paged stream of the HTTP API ends a page early once it holds that many bytes.
            var pages: [Int] = []
            var streamed: [UInt8] = []
            _ = try await exporter.stream(.init(layout: .lines), invoicesPerPage: 100_000) { bytes in
                pages.append(bytes.count)
                streamed += bytes
            }
            #expect(streamed == destination.bytes)
            #expect(pages.count > 3)
            #expect(pages.max()! <= 256 * 1024 + 4096)
        }

        // One invoice with thousands of lines is flushed between its rows as well.
        let huge = try ExportLedger()
        defer { huge.remove() }
        let description = String(repeating: "Usage record, metered; ", count: 10)
        try huge.insert([LedgerInvoice(
            id: "in_huge", subtotal: 3000 * 7, created: 1_767_225_600,
            lines: (0..<3000).map { LedgerLine(id: "il_\($0)", amount: 7, description: description) })])
        try await withExports(backend, of: huge.database) { exporter in
            let hugeDestination = CollectingDestination()
            let hugeSummary = try await exporter.export(.init(layout: .lines), to: hugeDestination, cancellation: nil, progress: nil)
            #expect(hugeSummary.rows == 3000 && hugeSummary.invoices == 1)
            #expect(hugeSummary.totals("usd")?.lineAmount == 21_000)
            #expect(hugeDestination.chunkSizes.count > 3)
            #expect(hugeDestination.chunkSizes.max()! <= 256 * 1024 + 4096)
        }
    }

    @Test("Cancellation stops the export with .interrupted", arguments: StoreBackend.allCases)
    func cancellation(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.generate(count: 5000)
        try await withExports(backend, of: ledger.database) { exporter in
            let cancellation = ExportCancellation()
            cancellation.cancel()
            await #expect(throws: InvoiceExportError.interrupted) {
                try await exporter.export(.init(), to: CollectingDestination(), cancellation: cancellation, progress: nil)
            }
        }
    }

    @Test("The summary JSON names the request and gives exact totals per currency", arguments: StoreBackend.allCases)
    func summaryJSON(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([
            LedgerInvoice(id: "in_1", currency: "kwd", subtotal: 1001, created: jan1, needsRefetch: true, lines: [LedgerLine(id: "l", amount: 1001)]),
            LedgerInvoice(id: "in_2", currency: "usd", subtotal: 250, created: jan1 + 1),
        ])
        try await withExports(backend, of: ledger.database) { exporter in
            let (_, summary) = try await exporter.exportText(.init(layout: .lines, createdFrom: jan1, createdBefore: feb1))
            let object = try #require(try JSONSerialization.jsonObject(with: Data(summary.json.utf8)) as? [String: Any])
            #expect(object["schema_version"] as? Int == 1)
            #expect(object["from"] as? String == "2026-01-01T00:00:00Z")
            #expect(object["to"] as? String == "2026-02-01T00:00:00Z")
            #expect(object["layout"] as? String == "lines")
            #expect(object["invoices"] as? Int == 2)
            #expect(object["rows"] as? Int == 2)
            #expect(object["invoices_needing_refetch"] as? Int == 1)
            let currencies = try #require(object["currencies"] as? [[String: Any]])
            #expect(currencies.map { $0["currency"] as? String } == ["kwd", "usd"])
            #expect(currencies[0]["total"] as? String == "1.001")
            #expect(currencies[0]["total_minor"] as? Int == 1001)
            #expect(currencies[0]["line_amount"] as? String == "1.001")
            #expect(currencies[0]["lines"] as? Int == 1)
            #expect(currencies[1]["amount_paid"] as? String == "2.50")
            #expect(currencies[1]["lines"] as? Int == 0)
            #expect(summary.json.hasSuffix("}\n"))
        }
    }

    @Test("JSON Lines escape control characters and line separators, and stay one object per line", arguments: StoreBackend.allCases)
    func jsonEscaping(_ backend: StoreBackend) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        let names = ["Tab\there", "Line\nbreak", "Back\\slash \"quoted\"", "Bell\u{07}", "Sep\u{2028}arator\u{2029}", "Next\u{85}Line", "é日本🧾"]
        try ledger.insert(names.enumerated().map { LedgerInvoice(id: "in_\($0.offset)", customerName: $0.element, created: jan1 + Int64($0.offset)) })
        try await withExports(backend, of: ledger.database) { exporter in
            let (text, _) = try await exporter.exportText(.init(format: .jsonl))
            #expect(text.split(separator: "\n").count == names.count)
            #expect(!text.contains("\u{2028}") && !text.contains("\u{85}") && !text.contains("\t"))
            #expect(text.contains(#"Sep\u2028arator\u2029"#))
            #expect(try jsonRows(text).map { $0["customer_name"] as? String } == names)
        }
    }

    @Test("Invoices applied from real Stripe events export with their customer and app user", arguments: StoreBackend.allCases)
    func fromRealEvents(_ backend: StoreBackend) async throws {
        try await withLedger(backend) { ledger in
            var deliveries: [InboxDelivery] = []
            for (index, type) in ["customer.created", "invoice.paid"].enumerated() {
                let body = SampleEvent.body(
                    type: type, eventID: "evt_\(index)", created: 1_780_000_000 + Int64(index), apiVersion: StripeAPIVersion.pinned,
                    livemode: true, account: nil)
                deliveries.append(try EventFactory.delivery(body))
            }
            let pass = try await ledger.deliver(deliveries)
            #expect(pass.failed + pass.dead == 0)
            let exports = ledger.store.invoiceExports
            let (text, summary) = try await exports.exportText(.init(format: .jsonl, layout: .lines))
            let rows = try jsonRows(text)
            let row = try #require(rows.first)
            #expect(row["invoice_id"] as? String == "in_1Sx4kMHd3QfR8sTa0r7GJ2uQ")
            #expect(row["status"] as? String == "paid")
            #expect(row["app_user_id"] as? String == "user_42")
            #expect(row["livemode"] as? Bool == true)
            let currency = row["currency"] as! String
            let exponent = Currency(currency).exponent
            #expect(DecimalAmount.parse(row["total"] as! String, exponent: exponent) == row["total_minor"] as? Int64)
            #expect(summary.invoices == 1)
            let lineTotal = rows.compactMap { $0["line_amount_minor"] as? Int64 }.reduce(0, +)
            #expect(Int128(lineTotal) == summary.totals(currency)?.lineAmount)

            // Deleting the (draft) invoice removes it from the export.
            let deleted = SampleEvent.body(
                type: "invoice.deleted", eventID: "evt_deleted", created: 1_780_000_100, apiVersion: StripeAPIVersion.pinned,
                livemode: true, account: nil)
            try await ledger.deliver([try EventFactory.delivery(deleted)])
            #expect(try await exports.exportText(.init()).1.invoices == 0)
        }
    }
}

@Suite("UTC instants of the export range")
struct UTCTimestampTests {
    @Test("Accepted forms", arguments: [
        ("2026-01-01", Int64(1_767_225_600)), ("2026-01", 1_767_225_600), ("2026", 1_767_225_600), ("2026-01-01T00:00:00Z", 1_767_225_600),
        ("2026-01-01T00:00Z", 1_767_225_600), ("2026-01-01 00:00:00", 1_767_225_600), ("2026-01-01T01:00:00+01:00", 1_767_225_600),
        ("2025-12-31T19:00:00-05:00", 1_767_225_600), ("1767225600", 1_767_225_600), ("10000", 10_000),
        ("2024-02-29", 1_709_164_800), ("1970-01-01T00:00:01Z", 1), ("1969-12-31T23:59:59Z", -1), ("2026-01-31t12:00:00z", 1_769_860_800),
    ])
    func accepted(text: String, seconds: Int64) {
        #expect(UTCTimestamp.parse(text) == seconds)
    }

    @Test("Rejected forms", arguments: [
        "", "026", "2026-13", "2026-00-10", "2026-02-30", "2025-02-29", "2026-01-01T24:00:00Z", "2026-01-01T12:60Z",
        "2026-01-01T12:00:60Z", "2026-01-01T12", "2026-1-1", "yesterday", "2026-01-01T00:00:00+0100", "2026-01-01T00:00:00Zjunk",
        "12e3", "--5", "0", "-1", "123",
    ])
    func rejected(text: String) {
        #expect(UTCTimestamp.parse(text) == nil)
    }

    @Test("Formatting is ISO 8601 UTC and inverts parsing")
    func formatting() {
        #expect(UTCTimestamp.string(0) == "1970-01-01T00:00:00Z")
        #expect(UTCTimestamp.string(-1) == "1969-12-31T23:59:59Z")
        #expect(UTCTimestamp.string(1_709_164_800) == "2024-02-29T00:00:00Z")
        #expect(UTCTimestamp.string(253_402_300_799) == "9999-12-31T23:59:59Z")
        #expect(UTCTimestamp.string(253_402_300_800) == "+10000-01-01T00:00:00Z")
        let formatter = ISO8601DateFormatter()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let seconds = Int64.random(in: -2_000_000_000...4_000_000_000, using: &generator)
            let text = UTCTimestamp.string(seconds)
            #expect(UTCTimestamp.parse(text) == seconds)
            #expect(text == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))))
        }
    }
}

@Suite("Atomic export files")
struct AtomicExportFileTests {
    @Test("A committed file appears whole; a discarded one leaves nothing; the temporary file is hidden beside it")
    func commitAndDiscard() throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        let path = ledger.path("out.csv")
        let file = try AtomicExportFile.create(path: path)
        #expect(file.temporaryPath.hasPrefix(ledger.path(".out.csv.billingd-")))
        try file.writer.write(Array("a,b\r\n".utf8))
        #expect(!FileManager.default.fileExists(atPath: path))
        try file.commit()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "a,b\r\n")
        #expect(!FileManager.default.fileExists(atPath: file.temporaryPath))

        let second = try AtomicExportFile.create(path: path, overwrite: true)
        try second.writer.write(Array("partial".utf8))
        second.discard()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "a,b\r\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: ledger.directory.path).filter { $0.contains("billingd-") }.isEmpty)
    }

    @Test("Replacing a file keeps its permissions")
    func keepsMode() throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        let path = ledger.path("private.csv")
        _ = FileManager.default.createFile(atPath: path, contents: Data("old".utf8), attributes: [.posixPermissions: 0o600])
        try AtomicExportFile.write(Array("new".utf8), to: path, overwrite: true)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new")
    }

    @Test("A missing directory or a directory as the target is refused with the reason")
    func refusals() throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        #expect(throws: InvoiceExportError.self) { try AtomicExportFile.create(path: ledger.path("missing/out.csv")) }
        #expect(throws: InvoiceExportError.self) { try AtomicExportFile.create(path: ledger.directory.path) }
    }

    @Test("A device is never replaced, even when overwriting is asked for; nothing is created beside it", arguments: ["/dev/null", "/dev/full"])
    func devices(path: String) throws {
        do {
            let file = try AtomicExportFile.create(path: path, overwrite: true)
            file.discard()
            Issue.record("\(path) was taken for an output file")
        } catch {
            #expect(error.description.contains("a character device"), "\(error)")
        }
        var status = stat()
        #expect(lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFCHR)
    }

    @Test("Without overwrite, a file that appears at the path while the export is written is kept, and the export fails")
    func appearedMeanwhile() throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        let path = ledger.path("out.csv")
        let file = try AtomicExportFile.create(path: path)
        try file.writer.write(Array("export".utf8))
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: InvoiceExportError.outputExists(path: path)) { try file.commit() }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "someone else's")
        #expect(!FileManager.default.fileExists(atPath: file.temporaryPath))
    }
}


/// The invoice ids an export of `request` lists, in order.
private func exportedIDs(_ exporter: any InvoiceExportStore, _ request: InvoiceExportRequest) async throws -> [String] {
    var request = request
    request.format = .jsonl
    return try jsonRows(try await exporter.exportText(request).0).map { $0["invoice_id"] as! String }
}
