import BillingCore

/// Per-currency totals of an export, for finance to tie out against Stripe's dashboard. Sums are
/// 128-bit, so no ledger can overflow them.
public struct InvoiceExportSummary: Sendable, Equatable {
    /// The totals of one currency.
    public struct CurrencyTotals: Sendable, Equatable {
        public let currency: Currency
        public internal(set) var invoices = 0
        /// Line rows (lines layout only).
        public internal(set) var lines = 0
        public internal(set) var subtotal: Int128 = 0
        public internal(set) var discount: Int128 = 0
        public internal(set) var tax: Int128 = 0
        public internal(set) var total: Int128 = 0
        public internal(set) var amountDue: Int128 = 0
        public internal(set) var amountPaid: Int128 = 0
        public internal(set) var amountRemaining: Int128 = 0
        /// Sum of the line amounts (lines layout only).
        public internal(set) var lineAmount: Int128 = 0

        init(currency: Currency) {
            self.currency = currency
        }

        mutating func add(
            subtotal: Int64, discount: Int64, tax: Int64, total: Int64, amountDue: Int64, amountPaid: Int64,
            amountRemaining: Int64
        ) {
            invoices += 1
            self.subtotal += Int128(subtotal)
            self.discount += Int128(discount)
            self.tax += Int128(tax)
            self.total += Int128(total)
            self.amountDue += Int128(amountDue)
            self.amountPaid += Int128(amountPaid)
            self.amountRemaining += Int128(amountRemaining)
        }

        /// The named amounts in a fixed order, for tables and JSON.
        public var amounts: [(name: String, minorUnits: Int128)] {
            [
                ("subtotal", subtotal), ("discount", discount), ("tax", tax), ("total", total), ("amount_due", amountDue),
                ("amount_paid", amountPaid), ("amount_remaining", amountRemaining),
            ]
        }
    }

    public let request: InvoiceExportRequest
    /// Rows written (invoices, or lines in the lines layout).
    public internal(set) var rows = 0
    public internal(set) var invoices = 0
    /// Invoices the ledger marked for re-fetch from Stripe (it saw only part of their lines, or
    /// two snapshots it could not order): `billingd reconcile` makes them exact.
    public internal(set) var invoicesNeedingRefetch = 0
    /// Totals per currency, by currency code.
    public internal(set) var currencies: [CurrencyTotals] = []

    public init(request: InvoiceExportRequest) {
        self.request = request
    }

    /// The totals of a currency, if the export had any invoice in it.
    public func totals(_ currency: String) -> CurrencyTotals? {
        currencies.first { $0.currency.code == currency.lowercased() }
    }

    /// The index of a currency's totals, adding them in code order when new.
    mutating func totalsIndex(_ code: String) -> Int {
        if let index = currencies.firstIndex(where: { $0.currency.code == code }) { return index }
        let currency = Currency(code)
        let index = currencies.firstIndex { $0.currency.code > currency.code } ?? currencies.endIndex
        currencies.insert(CurrencyTotals(currency: currency), at: index)
        return index
    }

    /// The summary as one JSON object (keys in a fixed order, amounts both exact decimal strings
    /// and integer minor units), followed by a newline.
    public var json: String {
        var bytes: [UInt8] = []
        func key(_ name: String, first: Bool = false) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            ExportRowEncoder.appendJSONString(Array(name.utf8), to: &bytes)
            bytes.append(UInt8(ascii: ":"))
        }
        func string(_ value: String?) {
            if let value { ExportRowEncoder.appendJSONString(Array(value.utf8), to: &bytes) } else { bytes += Array("null".utf8) }
        }
        func number<N: FixedWidthInteger>(_ value: N) { DecimalAmount.append(value, exponent: 0, to: &bytes) }

        bytes.append(UInt8(ascii: "{"))
        key("schema_version", first: true)
        number(InvoiceExportSchema.version)
        key("format")
        string(request.format.rawValue)
        key("layout")
        string(request.layout.rawValue)
        key("livemode")
        bytes += Array((request.livemode ? "true" : "false").utf8)
        key("from")
        string(request.createdFrom.map(UTCTimestamp.string))
        key("to")
        string(request.createdBefore.map(UTCTimestamp.string))
        key("rows")
        number(rows)
        key("invoices")
        number(invoices)
        key("invoices_needing_refetch")
        number(invoicesNeedingRefetch)
        key("currencies")
        bytes.append(UInt8(ascii: "["))
        for (index, totals) in currencies.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "{"))
            key("currency", first: true)
            string(totals.currency.code)
            key("exponent")
            number(totals.currency.exponent)
            key("invoices")
            number(totals.invoices)
            if request.layout == .lines {
                key("lines")
                number(totals.lines)
            }
            var amounts = totals.amounts
            if request.layout == .lines { amounts.append(("line_amount", totals.lineAmount)) }
            for (name, minorUnits) in amounts {
                key(name)
                string(DecimalAmount.string(minorUnits, exponent: totals.currency.exponent))
                key(name + "_minor")
                number(minorUnits)
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes += Array("]}\n".utf8)
        return String(decoding: bytes, as: UTF8.self)
    }
}
