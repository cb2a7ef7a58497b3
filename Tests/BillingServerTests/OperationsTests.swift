import BillingCommands
import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// Log lines captured from a real LineLogHandler.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])
    var text: String { lines.withLock { $0.joined() } }

    func logger(format: LineLogHandler.Format) -> Logger {
        Logger(label: "billingd") { label in
            LineLogHandler(label: label, level: .trace, format: format) { line in self.lines.withLock { $0.append(line) } }
        }
    }
}

@Suite("Operations: logs, metrics, backup")
struct OperationsTests {
    static let apiKey = "sk_live_51Hx9TopSecretKey0123456789"
    static let email = "ada.lovelace@example.com"
    static let card = "4242424242424242"

    @Test("No secret, API key, e-mail or card number reaches a log line, in text or JSON", arguments: LineLogHandler.Format.allCases)
    func noSecretsInLogs(format: LineLogHandler.Format) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let log = CapturedLog()
        let logger = log.logger(format: format)
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = ["tok_service_0123456789abcdef"]
        let app = BillingApplication.application(dependencies, host: "127.0.0.1", port: 0, logger: logger)
        let body = Array(#"{"id":"evt_sec","object":"event","type":"customer.updated","created":1767225600,"livemode":false,"data":{"object":{"id":"cus_1","object":"customer","email":"\#(Self.email)","description":"card \#(Self.card) key \#(Self.apiKey)"}}}"#.utf8)
        try await app.test(.router) { client in
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body, secret: "whsec_wrong_secret_value"), body: ByteBuffer(bytes: body))
            var headers = HTTPFields()
            headers[.authorization] = "Bearer \(Self.apiKey)"
            try await client.execute(uri: "/v1/exports/invoices?from=2026-01-01&to=2026-02-01", method: .get, headers: headers)
            try await client.execute(uri: "/\(testSecret)/\(Self.email)", method: .get)
        }
        let output = log.text
        #expect(!output.isEmpty)
        for secret in [testSecret, Self.apiKey, Self.email, Self.card, "tok_service_0123456789abcdef"] {
            #expect(!output.contains(secret), "\(secret.prefix(8))… leaked into the log")
        }
        // Direct logging of a secret by mistake is masked too.
        logger.error("oops \(Self.apiKey) \(Self.email) \(Self.card)", metadata: ["key": "\(testSecret)"])
        let after = log.text
        for secret in [testSecret, Self.apiKey, Self.email, Self.card] {
            #expect(!after.contains(secret))
        }
        #expect(after.contains("[redacted]"))
    }

    @Test("Redaction keeps ordinary text, ids, timestamps and amounts")
    func redactionIsPrecise() {
        let plain = "webhook accepted event=evt_1Q2w type=invoice.paid amount=1944 at=1767225600123 sub=sub_1Sx4"
        #expect(Redaction.mask(plain) == plain)
        #expect(Redaction.mask("card 4000 0566 5566 5556") .contains("4000 0566") == true, "spaced groups are separate words")
        #expect(!Redaction.mask("pan=4000056655665556").contains("4000056655665556"))
        #expect(!Redaction.mask("mail bob@example.org now").contains("bob@example.org"))
    }

    @Test("Every log line of a request carries its request id")
    func requestIDOnLines() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let log = CapturedLog()
        let app = BillingApplication.application(makeDependencies(ledger), host: "127.0.0.1", port: 0, logger: log.logger(format: .json))
        let body = eventBody(id: "evt_rid")
        try await app.test(.router) { client in
            _ = try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
        }
        let lines = log.text.split(separator: "\n").filter { $0.contains("evt_rid") }
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
            #expect(object["hb.request.id"]?.isEmpty == false)
            #expect(object["type"] == "customer.subscription.updated")
            #expect(object["duration_ms"] != nil)
        }
    }

    @Test("/metrics is valid Prometheus text whose counters move, and can require a token")
    func metricsExposition() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var dependencies = makeDependencies(ledger)
        dependencies.metricsToken = "prometheus-scrape-token-0123"
        let app = makeApplication(dependencies)
        try await app.test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { #expect($0.status == .unauthorized) }
            var headers = HTTPFields()
            headers[.authorization] = "Bearer prometheus-scrape-token-0123"
            let before = try await client.execute(uri: "/metrics", method: .get, headers: headers) { String(buffer: $0.body) }
            for index in 0..<3 {
                let body = eventBody(id: "evt_metric_\(index)", type: "customer.subscription.created")
                try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
            }
            let after = try await client.execute(uri: "/metrics", method: .get, headers: headers) { String(buffer: $0.body) }
            let samples = try PrometheusText.parse(after)
            #expect(samples[#"billingd_webhook_deliveries_total{outcome="accepted",type="customer.subscription.created"}"#] == 3)
            #expect((samples["billingd_webhook_ingest_seconds_count"] ?? 0) >= 3)
            #expect(PrometheusText.value(before, #"billingd_webhook_deliveries_total{outcome="accepted",type="customer.subscription.created"}"#) == nil)
        }
    }

    @Test("A backup taken while deliveries are committed is complete and consistent")
    func onlineBackup() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let committer = GroupCommitter(applier: SQLiteApplier(database: ledger.database))
        let backupDone = Atomic<Bool>(false)
        // Writers commit until the backup has returned, then 10 more: the backup is taken with
        // writes before it, during it and after it.
        let writers = Task {
            var index = 0
            var after = 0
            while after < 10 {
                if backupDone.load(ordering: .acquiring) { after += 1 }
                let body = eventBody(id: "evt_b\(index)")
                _ = try await committer.submit(try EventEnvelope(decoding: body).delivery(body))
                index += 1
            }
            return index
        }
        let inbox = SQLiteInbox(database: ledger.database)
        for _ in 0..<2000 {
            if try await inbox.count() >= 10 { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        let before = try await inbox.count()
        try #require(before >= 10, "the writers committed \(before) events in 10 s")
        let path = ledger.directory.appendingPathComponent("backup.sqlite3").path
        let result = try await ledger.database.backup(to: path, overwrite: false)
        backupDone.store(true, ordering: .releasing)
        let written = try await writers.value
        #expect(try await inbox.count() == written)
        #expect(result.events >= before, "the copy holds what was committed before it began")
        #expect(result.events < written, "writes went on after the copy: it was taken under load")
        let copy = try SQLiteDatabase.open(path: path)
        defer { try? copy.close() }
        #expect(try await SQLiteInbox(database: copy).count() == result.events)
        await #expect(throws: LedgerDatabaseError.self) { try await ledger.database.backup(to: path, overwrite: false) }
        #expect(!FileManager.default.fileExists(atPath: path + ".partial-\(ProcessInfo.processInfo.processIdentifier)"))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600, "the copy holds customer e-mails")
    }

    @Test("A backup into a directory that does not exist names the path and the cause, not SQLite's error 14 (issue 17 item 6)")
    func backupIntoMissingDirectory() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let path = ledger.directory.appendingPathComponent("no/such/dir/backup.sqlite3").path
        let error = await #expect(throws: LedgerDatabaseError.self) { try await ledger.database.backup(to: path, overwrite: false) }
        let message = error?.description ?? ""
        #expect(message.contains(path), "\(message)")
        #expect(message.contains("does not exist"), "\(message)")
        #expect(!message.contains("SQLite"), "\(message)")
    }
}

extension EventEnvelope {
    func delivery(_ body: [UInt8]) -> InboxDelivery {
        InboxDelivery(envelope: self, body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
    }
}

/// A strict reader of the Prometheus text format (0.0.4): every line is a comment, blank, or
/// `name{labels} value`; anything else is an error.
enum PrometheusText {
    struct FormatError: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ text: String) throws -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") { continue }
            if line.hasPrefix("#") { throw FormatError(description: "unknown comment: \(line)") }
            guard let space = line.lastIndex(of: " ") else { throw FormatError(description: "no value: \(line)") }
            let name = String(line[..<space])
            guard let value = Double(line[line.index(after: space)...]) else { throw FormatError(description: "bad value: \(line)") }
            let metric = name.split(separator: "{", maxSplits: 1)
            guard let first = metric.first, first.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }) else {
                throw FormatError(description: "bad name: \(line)")
            }
            if metric.count == 2, !metric[1].hasSuffix("}") { throw FormatError(description: "bad labels: \(line)") }
            samples[name] = value
        }
        return samples
    }

    static func value(_ text: String, _ name: String) -> Double? {
        (try? parse(text))?[name]
    }
}
