import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// `GET /v1/exports/invoices`: the finance export of `billingd export invoices` over HTTP,
/// streamed page by page so that memory stays flat and a slow client holds no transaction open.
public struct InvoiceExportController: Sendable {
    /// Settings of the export endpoint.
    public struct Configuration: Sendable {
        /// Invoices read per transaction (and per chunk of the response).
        public var invoicesPerPage: Int

        public init(invoicesPerPage: Int = 1000) {
            self.invoicesPerPage = invoicesPerPage
        }
    }

    let exports: any InvoiceExportStore
    let configuration: Configuration

    public init(store: any LedgerStore, configuration: Configuration = .init()) {
        exports = store.invoiceExports
        self.configuration = configuration
    }

    public func addRoutes<Methods: RouterMethods>(to router: Methods) {
        router.get("exports/invoices") { request, context in
            try export(request, logger: context.logger)
        }
    }

    static let schemaVersionHeader = HTTPField.Name("Billingd-Export-Schema-Version")!

    func export(_ request: Request, logger: Logger) throws -> Response {
        let exportRequest = try Self.exportRequest(request.uri.queryParameters)
        var headers = HTTPFields()
        let name = exportRequest.layout == .lines ? "invoice-lines" : "invoices"
        switch exportRequest.format {
        case .csv: headers[.contentType] = "text/csv; charset=utf-8; header=present"
        case .jsonl: headers[.contentType] = "application/x-ndjson; charset=utf-8"
        }
        headers[.contentDisposition] = #"attachment; filename="\#(name).\#(exportRequest.format.rawValue)""#
        headers[.cacheControl] = "no-store"
        headers[Self.schemaVersionHeader] = String(InvoiceExportSchema.version)
        let invoicesPerPage = configuration.invoicesPerPage
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                do {
                    let summary = try await exports.stream(exportRequest, invoicesPerPage: invoicesPerPage) { bytes in
                        try await writer.write(ByteBuffer(bytes: bytes))
                    }
                    try await writer.finish(nil)
                    logger.info("invoice export served", metadata: ["rows": "\(summary.rows)", "invoices": "\(summary.invoices)"])
                } catch {
                    // The status line is gone; ending the body early (no last chunk) tells the
                    // client the export is incomplete.
                    logger.error("invoice export failed mid-stream", metadata: ["error": "\(error)"])
                    throw error
                }
            })
    }

    /// The query parameters a request may take; anything else is refused, so that a mistyped
    /// filter never silently exports more than was asked for.
    static let parameterNames: Set<Substring> = [
        "from", "to", "format", "status", "customer", "user", "currency", "livemode", "lines", "account", "bom",
    ]

    /// The export request of a query string, or a 400 that names the bad parameter. Values are
    /// held to the rest of the service API's rules (``UserRequest``): a status Stripe documents,
    /// an `acct_…` account, a customer id, an app user id of at most 255 bytes.
    static func exportRequest(_ parameters: Parameters) throws -> InvoiceExportRequest {
        for (name, _) in parameters where !parameterNames.contains(name) {
            throw invalid(
                "unknown_parameter",
                "Unknown query parameter \"\(UserRequest.printable(name))\"; this endpoint takes \(parameterNames.sorted().joined(separator: ", ")).")
        }
        func single(_ name: Substring) throws -> String? {
            let values = parameters[values: name]
            guard values.count <= 1 else { throw invalid("invalid_parameter", "Give \(name) at most once.") }
            guard let value = values.first else { return nil }
            // Empty is refused like any bad value: a filter left blank must not export more.
            guard !value.isEmpty else { throw invalid("invalid_parameter", "\(name) is empty: give it a value, or leave it out.") }
            return String(value)
        }
        func instant(_ name: Substring) throws -> Int64? {
            guard let text = try single(name) else { return nil }
            guard let seconds = UTCTimestamp.parse(text) else {
                throw invalid(
                    "invalid_parameter",
                    "\(name)=\(text) is not an instant: use 2026, 2026-01, 2026-01-31, 2026-01-31T12:00:00Z (UTC unless an offset is given, `+` written %2B) or Unix seconds.")
            }
            return seconds
        }
        func flag(_ name: Substring, default defaultValue: Bool) throws -> Bool {
            switch try single(name)?.lowercased() {
            case nil: return defaultValue
            case "true", "1": return true
            case "false", "0": return false
            case let other?: throw invalid("invalid_parameter", "\(name)=\(other) is not valid: use true or false.")
            }
        }
        var format = InvoiceExportRequest.Format.csv
        if let text = try single("format") {
            guard let parsed = InvoiceExportRequest.Format(rawValue: text.lowercased()) else {
                throw invalid("invalid_parameter", "format=\(text) is not valid: use csv or jsonl.")
            }
            format = parsed
        }
        let statuses = parameters[values: "status"].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        for status in statuses where !InvoiceExportRequest.knownStatuses.contains(status) {
            throw invalid(
                "invalid_parameter",
                "status=\(UserRequest.printable(status)) is not an invoice status: use \(InvoiceExportRequest.knownStatuses.joined(separator: ", ")).")
        }
        let customer = try single("customer")
        if let customer, !(customer.hasPrefix("cus_") && UserRequest.isObjectID(customer)) {
            throw invalid("invalid_parameter", "customer=\(UserRequest.printable(customer)) is not a Stripe customer id; use cus_….")
        }
        let user = try single("user")
        if let user, let problem = UserRequest.userProblem(user) {
            throw invalid("invalid_parameter", "user=\(UserRequest.printable(user)) is not an app user id: it \(problem).")
        }
        let account: String? =
            switch try single("account") {
            case "platform"?: ""
            case let other: try UserRequest.account(other)
            }
        let request = InvoiceExportRequest(
            format: format, layout: try flag("lines", default: false) ? .lines : .invoices,
            createdFrom: try instant("from"), createdBefore: try instant("to"), statuses: statuses,
            customer: customer, appUser: user, currency: try single("currency")?.lowercased(),
            livemode: try flag("livemode", default: true), account: account, byteOrderMark: try flag("bom", default: false))
        do {
            try request.validate()
        } catch {
            throw invalid("invalid_parameter", error.description)
        }
        return request
    }

    private static func invalid(_ code: String, _ message: String) -> APIError {
        APIError(.badRequest, code: code, message: message)
    }
}
