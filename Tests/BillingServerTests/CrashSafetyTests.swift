import AppStoreFake
import BillingCore
import BillingSamples
import BillingTestSupport
import BillingStore
import Crypto
import Foundation
import Synchronization
import Testing
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Runs the real `billingd serve` binary as a child process, the way an operator does.
struct DaemonProcess {
    let process: ChildProcess
    let port: Int
    let databasePath: String

    /// The built `billingd` (`swift build` first); BILLINGD_BINARY overrides.
    static var binaryPath: String {
        if let path = ProcessInfo.processInfo.environment["BILLINGD_BINARY"] { return path }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/billingd").path
    }

    /// - Parameter standardError: a file for serve's log (warnings and worse), when the test
    ///   shows it; else it is dropped.
    static func start(
        databasePath: String, extraEnvironment: [String: String] = [:], arguments: [String] = ["serve"], standardError: String? = nil
    ) async throws -> DaemonProcess {
        guard FileManager.default.isExecutableFile(atPath: binaryPath) else {
            throw DaemonError("billingd binary not found at \(binaryPath): run `swift build` before `swift test` (scripts/test does)")
        }
        for _ in 0..<5 {
            let port = Int.random(in: 20_000..<60_000)
            var settings = [
                "BILLINGD_DATABASE": databasePath, "BILLINGD_PORT": String(port), "BILLINGD_HOST": "127.0.0.1",
                "STRIPE_WEBHOOK_SECRET": testSecret, "BILLINGD_LOG_LEVEL": "warning",
            ]
            for (key, value) in extraEnvironment { settings[key] = value }
            let process = try ChildProcess.start(
                binaryPath, arguments, environment: ChildProcess.environment(clearingBillingdSettings: false, settings),
                standardError: standardError)
            let daemon = DaemonProcess(process: process, port: port, databasePath: databasePath)
            if try await daemon.waitUntilHealthy() { return daemon }
            await daemon.kill()
        }
        throw DaemonError("billingd serve did not become healthy")
    }

    func waitUntilHealthy() async throws -> Bool {
        for _ in 0..<200 {
            if !process.isRunning { return false }
            // Connection: close, so that no pooled connection is left open to count against
            // BILLINGD_MAX_CONNECTIONS.
            if let (status, _) = try? await HTTP.request("http://127.0.0.1:\(port)/healthz", method: "GET", headers: ["Connection": "close"]),
                status == 200
            {
                return true
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Sends `signal` and waits for the end on a thread of its own, not one of the few threads
    /// every test's tasks share.
    @discardableResult
    func kill(signal: Int32 = SIGKILL) async -> ChildProcess.Termination {
        process.signal(signal)
        return await process.wait()
    }

    /// Sends SIGTERM and blocks until the end: for a `defer`, which cannot wait otherwise. It
    /// holds one of the tests' shared threads meanwhile, so a test ends its daemons with
    /// ``kill(signal:)`` wherever it can. A daemon still running a minute later (twice its
    /// shutdown grace) fails the test and is killed, rather than hang the suite.
    func stop() {
        process.signal(SIGTERM)
        if process.waitBlocking(upTo: .seconds(60)) == nil {
            Issue.record("billingd serve (pid \(process.pid)) did not stop within 60 s of SIGTERM; killed")
            process.signal(SIGKILL)
            process.waitBlocking()
        }
    }
}

struct DaemonError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum HTTP {
    /// - Parameter timeout: from the call, waiting for a pooled connection included.
    static func request(
        _ url: String, method: String, headers: [String: String] = [:], body: [UInt8]? = nil, timeout: TimeAmount = .seconds(10),
        client: HTTPClient = .shared
    ) async throws -> (Int, Data) {
        var request = HTTPClientRequest(url: url)
        request.method = .init(rawValue: method)
        for (key, value) in headers { request.headers.add(name: key, value: value) }
        if let body { request.body = .bytes(body) }
        let response = try await client.execute(request, timeout: timeout)
        let bytes = try await response.body.collect(upTo: 1 << 22)
        return (Int(response.status.code), Data(bytes.readableBytesView))
    }

    static func deliver(_ body: [UInt8], port: Int, timeout: TimeAmount = .seconds(10)) async throws -> Int {
        let header = SignatureVerifier.header(body: body, secret: testSecret, timestamp: Int64(Date().timeIntervalSince1970))
        return try await request(
            "http://127.0.0.1:\(port)/webhooks/stripe", method: "POST",
            headers: ["Stripe-Signature": header, "Content-Type": "application/json"], body: body, timeout: timeout).0
    }
}

@Suite("Crash safety of billingd serve", .serialized)
struct CrashSafetyTests {
    @Test("kill -9 at a random moment loses no acknowledged delivery", arguments: 0..<3)
    func killNineLosesNothing(round: Int) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let databasePath = directory.appendingPathComponent("ledger.sqlite3").path

        let daemon = try await DaemonProcess.start(databasePath: databasePath)
        let load = DeliveryLoad.start(workers: 16, prefix: "evt_r\(round)", port: daemon.port)
        // Kill once a real load has been acknowledged (a loaded machine can take a while to
        // answer the first), at a random moment after that, while the daemon still runs.
        let floor = 200
        await load.waitForAcknowledged(floor, within: .seconds(60)) { daemon.process.isRunning }
        try await Task.sleep(for: .milliseconds(Int.random(in: 100...1000)))
        let runningAtKill = daemon.process.isRunning
        await daemon.kill(signal: SIGKILL)
        await load.stop()
        #expect(runningAtKill, "the daemon was still running when it was killed")

        let acked = load.acknowledged.values
        #expect(acked.count >= floor, "the daemon acknowledged \(acked.count) deliveries before it was killed, fewer than \(floor)")
        let database = try SQLiteDatabase.open(path: databasePath)
        let inbox = SQLiteInbox(database: database)
        let stored = Set(try await inbox.list(.init(limit: 1_000_000)).map(\.eventID))
        let lost = acked.subtracting(stored)
        #expect(lost.isEmpty, "acknowledged but lost: \(lost.prefix(5))")
        try database.close()

        // It starts again on the same database and keeps accepting.
        let again = try await DaemonProcess.start(databasePath: databasePath)
        defer { again.stop() }
        #expect(try await HTTP.deliver(eventBody(id: "evt_after_restart_\(round)"), port: again.port) == 200)
        #expect(try await HTTP.request("http://127.0.0.1:\(again.port)/readyz", method: "GET").0 == 200)
    }

    @Test("kill -9 after a refund request is acknowledged and before it is answered: the restarted serve answers it, once", arguments: ["sqlite", "postgres"])
    func refundRequestSurvivesKillNine(_ backend: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-consumption-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let databasePath = directory.appendingPathComponent("ledger.sqlite3").path
        let postgres = backend == "postgres" ? try await PostgresTestDatabase.create() : nil
        /// The refund requests the ledger holds, read as an operator would between the runs.
        func requests() async throws -> [AppStoreConsumptionRequest] {
            if let postgres {
                let store = try await PostgresLedgerStore.open(postgres, maximumConnections: 1, logger: PostgresTestDatabase.logger)
                let requests = try await store.appStoreConsumption.requests(status: nil, limit: 10)
                await store.close()
                return requests
            }
            let database = try SQLiteDatabase.open(path: databasePath)
            defer { try? database.close() }
            return try await SQLiteLedgerStore(database: database).appStoreConsumption.requests(status: nil, limit: 10)
        }
        let key = P256.Signing.PrivateKey()
        let fake = try await AppStoreFake.start(.init(
            issuerID: FakeAppleHarness.issuerID, keyID: FakeAppleHarness.keyID, bundleID: AppStoreTestbed.bundleID, publicKey: key.publicKey,
            environment: .sandbox, appAppleID: AppStoreTestbed.appAppleID))
        let rootPath = directory.appendingPathComponent("root.der").path
        try Data(fake.pki.rootDER).write(to: URL(fileURLWithPath: rootPath))
        let keyPath = directory.appendingPathComponent("AuthKey.p8").path
        #expect(FileManager.default.createFile(atPath: keyPath, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600]))
        let token = "tok_consumption_0123456789abcdef"
        var appStore = [
            "APPSTORE_BUNDLE_ID": AppStoreTestbed.bundleID, "APPSTORE_APP_APPLE_ID": String(AppStoreTestbed.appAppleID),
            "APPSTORE_ENVIRONMENTS": "Sandbox", "APPSTORE_ROOT_CERTIFICATES": rootPath, "BILLINGD_API_TOKENS": token,
        ]
        if let postgres { appStore["BILLINGD_DATABASE_URL"] = try PostgresTestDatabase.url(of: postgres) }
        let authorized = ["Authorization": "Bearer \(token)", "Content-Type": "application/json", "Connection": "close"]

        // The first serve has no In-App Purchase key: it acknowledges and records requests, and answers none.
        let first = try await DaemonProcess.start(databasePath: databasePath, extraEnvironment: appStore)
        let (purchase, uuid) = try await Self.killedAfterAcknowledging(first, fake: fake, authorized: authorized)
        #expect(first.process.isRunning == false)

        let pending = try await requests()
        #expect(pending.map(\.notificationUUID) == [uuid] && pending.first?.status == .pending && pending.first?.attempts == 0)
        #expect(await fake.consumptionAnswers.isEmpty)

        // Restarted with the key: the responder finds the request and answers it.
        var answering = appStore
        answering["APPSTORE_ISSUER_ID"] = FakeAppleHarness.issuerID
        answering["APPSTORE_KEY_ID"] = FakeAppleHarness.keyID
        answering["APPSTORE_PRIVATE_KEY"] = keyPath
        answering["APPSTORE_API_BASE"] = fake.baseURL
        let second = try await DaemonProcess.start(databasePath: databasePath, extraEnvironment: answering)
        var answers: [AppStoreFake.ConsumptionAnswer] = []
        for _ in 0..<300 where answers.isEmpty {
            answers = await fake.consumptionAnswers
            if answers.isEmpty { try? await Task.sleep(for: .milliseconds(100)) }
        }
        try? await Task.sleep(for: .seconds(6))  // another of the responder's looks
        #expect(await second.kill(signal: SIGTERM) == .exit(0))
        #expect(answers.map(\.transactionID) == [purchase.transactionID])
        #expect(answers.first?.deliveryStatus == "DELIVERED" && answers.first?.refundPreference == nil)
        #expect(await fake.consumptionAnswers.count == 1, "answered once")
        #expect(await fake.requests(matching: .path("/inApps/v2/transactions/consumption", method: "PUT")).count == 1)
        let sent = try await requests()
        #expect(sent.first?.status == .sent && sent.first?.attempts == 1 && sent.first?.appleStatus == 202)
        await fake.stop()
        if let postgres { try await PostgresTestDatabase.drop(postgres) }
    }

    /// Records the user's consent, sends a refund request of their new purchase to `daemon` and
    /// kills it with SIGKILL as soon as it acknowledged the request (killed on any failure too).
    static func killedAfterAcknowledging(
        _ daemon: DaemonProcess, fake: AppStoreFake, authorized: [String: String]
    ) async throws -> (AppStoreFake.Purchase, String) {
        do {
            let base = "http://127.0.0.1:\(daemon.port)"
            let (_, tokenBody) = try await HTTP.request("\(base)/v1/users/user_crash/appstore/account-token", method: "GET", headers: authorized)
            let accountToken = try #require((try JSONSerialization.jsonObject(with: tokenBody) as? [String: Any])?["app_account_token"] as? String)
            let consent = try await HTTP.request(
                "\(base)/v1/users/user_crash/appstore/consumption-consent", method: "PUT", headers: authorized,
                body: Array(#"{"consented": true}"#.utf8))
            #expect(consent.0 == 200)
            let purchase = try await fake.subscribe(productID: "com.example.pro.monthly", appAccountToken: accountToken)
            let uuid = try await fake.requestConsumption(transactionID: purchase.transactionID)
            let notification = try #require(await fake.notificationHistory.first { $0.notificationUUID == uuid })
            let body = Array(try JSONSerialization.data(withJSONObject: ["signedPayload": notification.signedPayload]))
            let acknowledged = try await HTTP.request(
                "\(base)/webhooks/appstore", method: "POST", headers: ["Content-Type": "application/json", "Connection": "close"], body: body)
            #expect(acknowledged.0 == 200)
            await daemon.kill(signal: SIGKILL)
            return (purchase, uuid)
        } catch {
            await daemon.kill(signal: SIGKILL)
            throw error
        }
    }

    @Test("SIGTERM shuts down cleanly with exit status 0")
    func gracefulShutdown() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-term-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(databasePath: directory.appendingPathComponent("l.sqlite3").path)
        #expect(try await HTTP.deliver(eventBody(id: "evt_term"), port: daemon.port) == 200)
        #expect(await daemon.kill(signal: SIGTERM) == .exit(0))
    }

    @Test("serve without a webhook secret refuses to start and says what to set")
    func missingSecret() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "STRIPE_WEBHOOK_SECRET")
        environment["BILLINGD_DATABASE"] = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-nosecret-\(UUID()).sqlite3").path
        let result = try await ChildProcess.run(DaemonProcess.binaryPath, ["serve"], environment: environment)
        #expect(result.termination != .exit(0))
        #expect(result.stderr.contains("STRIPE_WEBHOOK_SECRET is not set"))
        #expect(result.stderr.contains("--local"))
    }
}

/// Senders that deliver distinct events until stopped, the way Stripe does under load: each keeps
/// going through errors (pausing a moment after one), and what was acknowledged and every answer
/// are recorded.
final class DeliveryLoad: Sendable {
    /// The ids answered 200.
    let acknowledged = LockedSet()
    private let outcomes = Mutex<[Int: Int]>([:])
    private let senders = Mutex<Task<Void, Never>?>(nil)

    private init() {}

    /// Starts `workers` senders; worker `w`'s `n`th event is `\(prefix)_w\(w)_\(n)`.
    /// - Parameter deliver: delivers one event body (its index given, to spread load) and returns
    ///   the HTTP status, 0 when nothing answered.
    static func start(
        workers: Int, prefix: String, deliver: @escaping @Sendable (_ body: [UInt8], _ index: Int) async -> Int
    ) -> DeliveryLoad {
        let load = DeliveryLoad()
        let task = Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        var index = 0
                        while !Task.isCancelled {
                            let id = "\(prefix)_w\(worker)_\(index)"
                            index += 1
                            let status = await deliver(eventBody(id: id), index)
                            load.outcomes.withLock { $0[status, default: 0] += 1 }
                            if status == 200 { load.acknowledged.insert(id) } else { try? await Task.sleep(for: .milliseconds(20)) }
                        }
                    }
                }
            }
        }
        load.senders.withLock { $0 = task }
        return load
    }

    /// Deliveries to one port, each waiting at most `timeout` for its answer.
    static func start(workers: Int, prefix: String, port: Int, timeout: TimeAmount = .seconds(10)) -> DeliveryLoad {
        start(workers: workers, prefix: prefix) { body, _ in (try? await HTTP.deliver(body, port: port, timeout: timeout)) ?? 0 }
    }

    var count: Int { acknowledged.values.count }
    /// Answers by HTTP status (0: none).
    var statuses: [Int: Int] { outcomes.withLock { $0 } }

    /// Polls until `count` reaches `target`, `limit` passes or `while` no longer holds; whether it reached it.
    @discardableResult
    func waitForAcknowledged(_ target: Int, within limit: Duration, while going: () -> Bool = { true }) async -> Bool {
        let end = ContinuousClock.now + limit
        while count < target, ContinuousClock.now < end, going() {
            try? await Task.sleep(for: .milliseconds(50))
        }
        return count >= target
    }

    /// Tells every sender to stop after its delivery in flight.
    func cancel() { senders.withLock { $0 }?.cancel() }

    /// Stops every sender and waits until none is sending.
    func stop() async {
        cancel()
        await senders.withLock { $0 }?.value
    }
}

/// A set shared by concurrent senders.
final class LockedSet: Sendable {
    private let storage = Mutex<Set<String>>([])
    func insert(_ value: String) { _ = storage.withLock { $0.insert(value) } }
    var values: Set<String> { storage.withLock { $0 } }
}
