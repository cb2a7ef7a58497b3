import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore

/// A fresh on-disk ledger in a temporary directory, removed at the end of the test.
struct TemporaryLedger {
    let directory: URL
    let database: SQLiteDatabase

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        database = try SQLiteDatabase.open(path: directory.appendingPathComponent("ledger.sqlite3").path)
    }

    /// The same database opened anew, as a restarted billingd would.
    init(reopening other: TemporaryLedger) throws {
        directory = other.directory
        database = try SQLiteDatabase.open(path: directory.appendingPathComponent("ledger.sqlite3").path)
    }

    /// The ledger as the server and commands see it.
    var store: SQLiteLedgerStore { SQLiteLedgerStore(database: database) }

    func remove() {
        try? database.close()
        try? FileManager.default.removeItem(at: directory)
    }
}

let testSecret = "whsec_test_0123456789abcdef"

/// A sample event body with the given id and type, as Stripe would send it: its subscription
/// has what the ledger needs to apply it (a customer), since a webhook refuses what it could
/// not apply.
func eventBody(id: String, type: String = "customer.subscription.updated", created: Int64 = 1_767_225_600) -> [UInt8] {
    Array(#"{"id":"\#(id)","object":"event","api_version":"2026-10-28.clover","created":\#(created),"data":{"object":{"id":"sub_\#(id)","object":"subscription","customer":"cus_\#(id)","status":"active"}},"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"\#(type)"}"#.utf8)
}

func signedHeaders(_ body: [UInt8], secret: String = testSecret, at timestamp: Int64 = Int64(Date().timeIntervalSince1970)) -> HTTPFields {
    var headers = HTTPFields()
    headers[HTTPField.Name("Stripe-Signature")!] = SignatureVerifier.header(body: body, secret: secret, timestamp: timestamp)
    headers[.contentType] = "application/json"
    return headers
}

func makeDependencies(_ ledger: TemporaryLedger, metrics: BillingMetrics = BillingMetrics()) -> BillingServerDependencies {
    BillingServerDependencies(
        store: ledger.store,
        verifier: SignatureVerifier(secrets: [testSecret]),
        committer: GroupCommitter(applier: SQLiteApplier(database: ledger.database)),
        metrics: metrics)
}

func makeApplication(_ dependencies: BillingServerDependencies) -> some ApplicationProtocol {
    var logger = Logger(label: "test")
    logger.logLevel = .critical
    return BillingApplication.application(dependencies, host: "127.0.0.1", port: 0, logger: logger)
}

extension TestResponse {
    /// The body decoded as a JSON object.
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
    }

    /// `error.code` of a JSON error body.
    var errorCode: String? {
        (json["error"] as? [String: Any])?["code"] as? String
    }
}

/// Serves `router` on a free loopback port for the duration of `body`, which gets the port
/// (receivers of outbound webhooks, hostile repliers).
func withLoopbackServer(_ router: Router<BasicRequestContext>, label: String, _ body: (Int) async throws -> Void) async throws {
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    var logger = Logger(label: label)
    logger.logLevel = .critical
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in portContinuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        let port = await iterator.next() ?? 0
        try await body(port)
        group.cancelAll()
    }
}
