import AsyncHTTPClient
import BillingCommands
import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import BillingTestSupport
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import Testing

/// `serve` on PostgreSQL as a team runs it behind a load balancer: several daemons, each with its
/// own pool, on one database.
@Suite("Several serve replicas on one PostgreSQL database", .serialized)
struct PostgresReplicaTests {
    static let token = "tok_replicas_0123456789abcdef"

    /// Lifecycles of `users` customers: created with their app user, subscribed, past due, then
    /// active again or canceled, a second apart, all in the past.
    static func lifecycles(users: Int) -> [[UInt8]] {
        let start = Int64(Date().timeIntervalSince1970) - 3_600
        var bodies: [[UInt8]] = []
        for index in 0..<users {
            let (customer, subscription) = ("cus_replica\(index)", "sub_replica\(index)")
            let at = start + Int64(index) * 10
            func event(_ type: String, _ offset: Int64, _ overrides: [String: String], _ fields: [String] = []) -> [UInt8] {
                (try? SampleEvent.body(
                    type: type, eventID: "evt_replica\(index)_\(offset)", created: at + offset, apiVersion: StripeAPIVersion.pinned,
                    livemode: false, account: nil, objectOverrides: overrides, fields: fields.map { try SampleField(parsing: $0) }))
                    ?? []
            }
            bodies.append(event("customer.created", 0, ["id": customer], ["metadata.app_user_id=user_replica\(index)"]))
            bodies.append(event("customer.subscription.created", 1, ["id": subscription, "customer": customer, "status": "active"]))
            bodies.append(event("customer.subscription.updated", 2, ["id": subscription, "customer": customer, "status": "past_due"]))
            bodies.append(event(
                index.isMultiple(of: 3) ? "customer.subscription.deleted" : "customer.subscription.updated", 3,
                ["id": subscription, "customer": customer, "status": index.isMultiple(of: 3) ? "canceled" : "active"]))
        }
        return bodies
    }

    /// The ledger the bodies make on SQLite, delivered in order: what every replica set must reach.
    static func inOrderDump(_ bodies: [[UInt8]]) async throws -> String {
        let store = SQLiteLedgerStore(database: try SQLiteDatabase.inMemory())
        let deliveries = try bodies.map { body in
            InboxDelivery(envelope: try EventEnvelope(decoding: body), body: body, receivedAt: 0, source: .webhook, secretIndex: 0)
        }
        _ = try await store.inbox.insert(deliveries)
        try await store.applier(.init()).drain()
        return try await store.maintenance.dump()
    }

    @Test("Three replicas sharing one database, sent the lifecycles round-robin with duplicates, acknowledge each delivery once stored and reach the ledger in-order delivery gives on SQLite")
    func threeReplicasOneLedger() async throws {
        let bodies = Self.lifecycles(users: 12)
        #expect(bodies.allSatisfy { !$0.isEmpty })
        let expected = try await Self.inOrderDump(bodies)
        var random = SystemRandomNumberGenerator()
        var deliveries = bodies + bodies.filter { _ in Bool.random(using: &random) }
        deliveries.shuffle(using: &random)

        // The replicas' errors, so that a refused delivery says why the store failed.
        let log = CapturedLog()
        var logger = log.logger(format: .text)
        logger.logLevel = .error
        try await PostgresTestDatabase.withFreshDatabase { configuration in
            var stores: [PostgresLedgerStore] = []
            var daemons: [(BillingDaemon, Task<Void, any Error>)] = []
            var ports: [Int] = []
            do {
                let settings = try Settings.load(
                    environment: [
                        "BILLINGD_PORT": "0", "STRIPE_WEBHOOK_SECRET": testSecret, "BILLINGD_API_TOKENS": Self.token,
                        "BILLINGD_RECONCILE_INTERVAL": "off", "BILLINGD_USAGE_REPORT_INTERVAL": "off",
                    ], configFile: nil)
                for _ in 0..<3 {
                    let store = try await PostgresLedgerStore.open(configuration, maximumConnections: 6, logger: PostgresTestDatabase.logger)
                    stores.append(store)
                    let (listening, continuation) = AsyncStream.makeStream(of: Int.self)
                    let daemon = try await BillingDaemon(
                        settings: settings, store: store,
                        options: .init(gracefulShutdownSignals: [], onListening: { continuation.yield($0) }, cancellationLimit: nil, storeDeadline: .seconds(300)),
                        logger: logger)
                    let running = Task {
                        defer { continuation.finish() }
                        try await daemon.run()
                    }
                    daemons.append((daemon, running))
                    var iterator = listening.makeAsyncIterator()
                    ports.append(try #require(await iterator.next(), "replica \(daemons.count) listens"))
                }

                // Eight senders at once, each delivery to the next replica in turn. The replicas'
                // store deadline and the senders' time limit are minutes, not serve's 20 s: in this
                // process hundreds of tests share two threads, and a delivery refused because the
                // machine was busy would say nothing about the store.
                // Each answer's status, and the body of any that is not 200, so that a failure says why.
                let answers = try await withThrowingTaskGroup(of: (status: UInt, body: String).self) { group in
                    var answers: [(status: UInt, body: String)] = []
                    for (index, body) in deliveries.enumerated() {
                        if index >= 8, let answer = try await group.next() { answers.append(answer) }
                        let port = ports[index % ports.count]
                        group.addTask {
                            var post = HTTPClientRequest(url: "http://127.0.0.1:\(port)/webhooks/stripe")
                            post.method = .POST
                            for field in signedHeaders(body) { post.headers.add(name: field.name.rawName, value: field.value) }
                            post.body = .bytes(ByteBuffer(bytes: body))
                            let response = try await HTTPClient.shared.execute(post, timeout: .seconds(330))
                            let body = try await response.body.collect(upTo: 1 << 16)
                            return (response.status.code, response.status.code == 200 ? "" : String(buffer: body))
                        }
                    }
                    for try await answer in group { answers.append(answer) }
                    return answers
                }
                #expect(answers.count == deliveries.count)
                let refused = answers.filter { $0.status != 200 }.map { "\($0.status) \($0.body)" }
                #expect(refused.isEmpty, "every delivery, duplicates too, is acknowledged; not: \(refused); the replicas logged: \(log.text)")

                let inbox = stores[0].inbox
                #expect(try await inbox.count() == bodies.count, "each event is stored once, whichever replicas it reached")
                // Acknowledged deliveries are applied in the commit that stored them; the
                // appliers drain anything left. Bound the wait, never its speed.
                var counts = try await inbox.countsByStatus()
                for _ in 0..<300 where counts[.applied, default: 0] < bodies.count {
                    try await Task.sleep(for: .milliseconds(100))
                    counts = try await inbox.countsByStatus()
                }
                #expect(counts[.applied] == bodies.count, "\(counts)")
                #expect(try await stores[1].maintenance.dump() == expected)

                // Every replica answers the service API from the one ledger.
                for port in ports {
                    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/users/user_replica1/subscription")
                    request.headers.add(name: "Authorization", value: "Bearer \(Self.token)")
                    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                    let body = try await response.body.collect(upTo: 1 << 20)
                    let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
                    #expect(response.status.code == 200)
                    #expect(json?["status"] as? String == "active", "replica on port \(port)")
                }
            } catch {
                for (daemon, running) in daemons {
                    await daemon.shutdown()
                    _ = try? await running.value
                }
                for store in stores { await store.close() }
                throw error
            }
            for (daemon, running) in daemons {
                await daemon.shutdown()
                try await running.value
            }
            for store in stores { await store.close() }
        }
    }
}
