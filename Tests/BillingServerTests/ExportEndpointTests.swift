import AsyncHTTPClient
import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOHTTP1
import Testing

/// A ledger with a few invoices applied from real Stripe events.
private func ledgerWithInvoices(_ count: Int = 3) async throws -> TemporaryLedger {
    let ledger = try TemporaryLedger()
    var bodies = [
        SampleEvent.body(
            type: "customer.created", eventID: "evt_customer", created: 1_780_000_000, apiVersion: StripeAPIVersion.pinned,
            livemode: true, account: nil)
    ]
    let currencies = ["usd", "jpy", "kwd", "eur"]
    for index in 0..<count {
        bodies.append(SampleEvent.body(
            type: "invoice.paid", eventID: "evt_invoice_\(index)", created: 1_780_000_000 + Int64(index), apiVersion: StripeAPIVersion.pinned,
            livemode: true, account: nil,
            objectOverrides: [
                "id": "in_export_\(String(format: "%05d", index))", "currency": currencies[index % currencies.count],
                "customer_name": index % 2 == 0 ? "=cmd|' /C calc'!A0" : "Ada, \"Countess\" Lovelace",
            ]))
    }
    let deliveries = try bodies.map { body in
        InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
    }
    _ = try await SQLiteInbox(database: ledger.database).insert(deliveries)
    let pass = try await SQLiteApplier(database: ledger.database).drain()
    #expect(pass.failed + pass.dead == 0)
    return ledger
}

private let token = "tok_export_0123456789abcdef"
private let rotatedToken = "tok_rotated_fedcba9876543210"

private func bearer(_ value: String) -> HTTPFields {
    [.authorization: value]
}

private func exported(_ ledger: TemporaryLedger, _ request: InvoiceExportRequest) async throws -> String {
    var bytes: [UInt8] = []
    _ = try await SQLiteInvoiceExporter(database: ledger.database).stream(request) { bytes += $0 }
    return String(decoding: bytes, as: UTF8.self)
}

@Suite("GET /v1/exports/invoices and the service API's bearer token")
struct ExportEndpointTests {
    func application(_ ledger: TemporaryLedger, tokens: [String]) -> some ApplicationProtocol {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = tokens
        return makeApplication(dependencies)
    }

    @Test("Without configured tokens the service API is off: its routes do not exist")
    func offWithoutTokens() async throws {
        let ledger = try await ledgerWithInvoices(1)
        defer { ledger.remove() }
        try await application(ledger, tokens: []).test(.router) { client in
            try await client.execute(uri: "/v1/exports/invoices", method: .get, headers: bearer("Bearer \(token)")) { response in
                #expect(response.status == .notFound)
                #expect(response.errorCode == "not_found")
            }
        }
    }

    @Test("A missing, malformed or wrong token is 401 with a JSON error and WWW-Authenticate", arguments: [
        nil, "Bearer", "Bearer ", "Bearer wrong-token-of-some-length", "Basic dXNlcjpwYXNz", "Token \(token)",
        "Bearer \(token)x", "Bearer \(token.dropLast())", "Bearer \(token.uppercased())", "\(token)",
    ])
    func unauthorized(header: String?) async throws {
        let ledger = try await ledgerWithInvoices(1)
        defer { ledger.remove() }
        try await application(ledger, tokens: [token, rotatedToken]).test(.router) { client in
            try await client.execute(uri: "/v1/exports/invoices", method: .get, headers: header.map(bearer) ?? [:]) { response in
                #expect(response.status == .unauthorized)
                #expect(response.errorCode == "unauthorized")
                #expect(response.headers[.wwwAuthenticate] == #"Bearer realm="billingd""#)
                #expect(response.headers[.contentType] == "application/json")
                #expect(!String(buffer: response.body).contains("in_export"))
            }
        }
    }

    @Test("Any configured token, with the scheme in any case, gets the export: the same bytes as the CLI's")
    func authorizedExport() async throws {
        let ledger = try await ledgerWithInvoices(5)
        defer { ledger.remove() }
        let csv = try await exported(ledger, .init())
        let jsonl = try await exported(ledger, .init(format: .jsonl, layout: .lines))
        #expect(csv.contains("in_export_00004"))
        try await application(ledger, tokens: [token, rotatedToken]).test(.router) { client in
            for header in ["Bearer \(token)", "bearer \(rotatedToken)", "BEARER  \(token)"] {
                try await client.execute(uri: "/v1/exports/invoices", method: .get, headers: bearer(header)) { response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == csv)
                    #expect(response.headers[.contentType] == "text/csv; charset=utf-8; header=present")
                    #expect(response.headers[.contentDisposition] == #"attachment; filename="invoices.csv""#)
                    #expect(response.headers[.cacheControl] == "no-store")
                    #expect(response.headers[HTTPField.Name("Billingd-Export-Schema-Version")!] == "1")
                }
            }
            try await client.execute(uri: "/v1/exports/invoices?format=jsonl&lines=true", method: .get, headers: bearer("Bearer \(token)")) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == jsonl)
                #expect(response.headers[.contentType] == "application/x-ndjson; charset=utf-8")
                #expect(response.headers[.contentDisposition] == #"attachment; filename="invoice-lines.jsonl""#)
            }
        }
    }

    @Test("Query parameters filter like the CLI's options")
    func filters() async throws {
        let ledger = try await ledgerWithInvoices(4)
        defer { ledger.remove() }
        let application = application(ledger, tokens: [token])
        // The sample invoices share their creation time; ranges around it take all or none.
        let created = try #require(
            (try JSONSerialization.jsonObject(with: Data(try await exported(ledger, .init(format: .jsonl)).split(separator: "\n")[0].utf8))
                as? [String: Any])?["created"] as? String)
        let createdSeconds = try #require(UTCTimestamp.parse(created))
        let cases: [(query: String, request: InvoiceExportRequest, rows: Int)] = [
            ("currency=JPY&format=jsonl", .init(format: .jsonl, currency: "jpy"), 1),
            ("status=paid,void", .init(statuses: ["paid", "void"]), 4),
            ("status=open&status=void", .init(statuses: ["open", "void"]), 0),
            ("user=user_42&format=jsonl", .init(format: .jsonl, appUser: "user_42"), 4),
            ("user=someone_else", .init(appUser: "someone_else"), 0),
            ("customer=cus_TqW7mZ2xLp9Kna", .init(customer: "cus_TqW7mZ2xLp9Kna"), 4),
            ("livemode=false", .init(livemode: false), 0),
            ("account=platform", .init(account: ""), 4),
            ("account=acct_1Other", .init(account: "acct_1Other"), 0),
            ("from=\(created)&to=\(createdSeconds + 1)", .init(createdFrom: createdSeconds, createdBefore: createdSeconds + 1), 4),
            ("from=\(createdSeconds + 1)&format=jsonl", .init(format: .jsonl, createdFrom: createdSeconds + 1), 0),
            ("to=\(createdSeconds)", .init(createdBefore: createdSeconds), 0),
            ("bom=true&lines=true", .init(layout: .lines, byteOrderMark: true), 4),
        ]
        try await application.test(.router) { client in
            for (query, request, rows) in cases {
                let expected = try await exported(ledger, request)
                #expect(expected.components(separatedBy: "in_export_").count - 1 == rows, "\(query)")
                try await client.execute(uri: "/v1/exports/invoices?\(query)", method: .get, headers: bearer("Bearer \(token)")) { response in
                    #expect(response.status == .ok, "\(query)")
                    #expect(String(buffer: response.body) == expected, "\(query)")
                }
            }
        }
    }

    @Test("Invalid parameters are 400 with a JSON error that names them", arguments: [
        ("from=yesterday", "invalid_parameter", "from=yesterday"), ("to=2026-02-30", "invalid_parameter", "to=2026-02-30"),
        ("from=2026-02&to=2026-01", "invalid_parameter", "range is empty"), ("format=xlsx", "invalid_parameter", "csv or jsonl"),
        ("form=2026-01", "unknown_parameter", "\"form\""), ("livemode=maybe", "invalid_parameter", "true or false"),
        ("from=2026&from=2027", "invalid_parameter", "at most once"), ("currency=dollars", "invalid_parameter", "ISO 4217"),
        ("format=jsonl&bom=true", "invalid_parameter", "byte order mark"),
        // Held to the rest of the service API's rules (issue 18 item 9).
        ("status=bogus", "invalid_parameter", "status=bogus is not an invoice status"), ("status=paid,bogus", "invalid_parameter", "status=bogus"),
        ("account=acct_1'--", "invalid_parameter", "not a Stripe account id"), ("account=acct_", "invalid_parameter", "not a Stripe account id"),
        ("user=" + String(repeating: "u", count: 300), "invalid_parameter", "300 bytes long"), ("user=a%00b", "invalid_parameter", "control character"),
        ("customer=cus_1'--", "invalid_parameter", "not a Stripe customer id"), ("customer=sub_123", "invalid_parameter", "cus_"),
    ])
    func invalidParameters(query: String, code: String, mention: String) async throws {
        let ledger = try await ledgerWithInvoices(1)
        defer { ledger.remove() }
        try await application(ledger, tokens: [token]).test(.router) { client in
            try await client.execute(uri: "/v1/exports/invoices?\(query)", method: .get, headers: bearer("Bearer \(token)")) { response in
                #expect(response.status == .badRequest)
                #expect(response.errorCode == code)
                let message = ((response.json["error"] as? [String: Any])?["message"] as? String) ?? ""
                #expect(message.contains(mention), "\(message)")
            }
        }
    }

    @Test("Over a live connection the body is streamed in chunks, page by page, and complete")
    func streamedLive() async throws {
        let ledger = try await ledgerWithInvoices(40)
        defer { ledger.remove() }
        let expected = try await exported(ledger, .init(format: .jsonl, layout: .lines))
        let router = Router(context: BasicRequestContext.self)
        ServiceAPI(
            store: ledger.store, tokens: [token], metrics: BillingMetrics(), rejections: RejectionLog(logger: Logger(label: "test")),
            export: .init(invoicesPerPage: 3)).addRoutes(to: router)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        try await app.test(.live) { client in
            // AsyncHTTPClient with a generous deadline rather than the test client's fixed 20 s
            // read timeout, which a loaded machine running the whole suite can exceed.
            let port = try #require(client.port)
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/exports/invoices?format=jsonl&lines=true")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
            #expect(response.status == .ok)
            #expect(response.headers["content-length"].isEmpty)
            #expect(response.headers["transfer-encoding"] == ["chunked"])
            let body = String(buffer: try await response.body.collect(upTo: 1 << 24))
            #expect(body == expected)
            #expect(body.split(separator: "\n").count == 40)
        }
    }

    @Test("billingd serve registers the service API when BILLINGD_API_TOKENS is set, and only then")
    func servedByTheDaemon() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-export-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let databasePath = directory.appendingPathComponent("ledger.sqlite3").path

        let withTokens = try await DaemonProcess.start(databasePath: databasePath, extraEnvironment: ["BILLINGD_API_TOKENS": "\(rotatedToken), \(token)"])
        let url = "http://127.0.0.1:\(withTokens.port)/v1/exports/invoices?format=jsonl"
        let (status, body) = try await HTTP.request(url, method: "GET", headers: ["Authorization": "Bearer \(token)"])
        #expect(status == 200)
        #expect(body.isEmpty, "an empty ledger exports no rows")
        #expect(try await HTTP.request(url, method: "GET").0 == 401)
        await withTokens.kill(signal: SIGTERM)

        let withoutTokens = try await DaemonProcess.start(databasePath: databasePath, extraEnvironment: ["BILLINGD_API_TOKENS": ""])
        defer { withoutTokens.stop() }
        let url2 = "http://127.0.0.1:\(withoutTokens.port)/v1/exports/invoices"
        #expect(try await HTTP.request(url2, method: "GET", headers: ["Authorization": "Bearer \(token)"]).0 == 404)
    }
}
