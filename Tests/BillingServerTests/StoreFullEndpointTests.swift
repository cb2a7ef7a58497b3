import BillingCommands
import BillingCore
import BillingServer
import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

/// The backend of a full-store test's ledger.
enum FullStoreBackend: String, CaseIterable, Sendable {
    case sqlite, postgres
}

/// A served ledger of one backend that a test can fill (``StoreRoom``).
struct FullStoreWorld {
    let store: any LedgerStore
    let applier: any EventApplier
    let room: StoreRoom
    /// The dump of the ledger opened anew, as a restarted billingd would (SQLite's file; nil on
    /// PostgreSQL, whose database is the same for every open).
    let reopenedDump: (@Sendable () async throws -> String)?

    static func with(_ backend: FullStoreBackend, _ body: (FullStoreWorld) async throws -> Void) async throws {
        switch backend {
        case .sqlite:
            let ledger = try TemporaryLedger()
            defer { ledger.remove() }
            try await body(FullStoreWorld(
                store: ledger.store, applier: SQLiteApplier(database: ledger.database), room: .sqlite(ledger.database),
                reopenedDump: {
                    let reopened = try TemporaryLedger(reopening: ledger)
                    defer { try? reopened.database.close() }
                    return try await reopened.store.maintenance.dump()
                }))
        case .postgres:
            try await PostgresTestDatabase.withStore { store in
                try await body(FullStoreWorld(store: store, applier: store.applier(.init()), room: .postgres(store), reopenedDump: nil))
            }
        }
    }

    /// The server's dependencies over this ledger (the Stripe webhook with the test secret, a
    /// group committer, fresh metrics), watched by a ``StoreSpaceWatch`` logging to `logger`.
    func dependencies(logger: Logger = Logger(label: "test"), hint: String? = nil) -> BillingServerDependencies {
        var dependencies = BillingServerDependencies(
            store: store, verifier: SignatureVerifier(secrets: [testSecret]), committer: GroupCommitter(applier: applier), metrics: BillingMetrics())
        dependencies.space = hint.map { StoreSpaceWatch(store: store, metrics: dependencies.metrics, logger: logger, hint: $0) }
            ?? StoreSpaceWatch(store: store, metrics: dependencies.metrics, logger: logger)
        return dependencies
    }
}

@Suite("A full store: deliveries get 503 store_full with Retry-After, /readyz fails, and billingd recovers on its own")
struct StoreFullEndpointTests {
    /// A signed-able subscription event with 16 KB of metadata: its body and raw object need new
    /// pages wherever they are stored, compressed or not (random bytes in base64: 12 KB of
    /// randomness that neither the inbox's zstd nor PostgreSQL's TOAST can take away).
    static func largeEventBody(id: String) -> [UInt8] {
        let note = Data((0..<12_000).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        return Array(#"{"id":"\#(id)","object":"event","api_version":"2026-10-28.clover","created":1767225600,"data":{"object":{"id":"sub_\#(id)","object":"subscription","customer":"cus_\#(id)","status":"active","metadata":{"note":"\#(note)"}}},"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"customer.subscription.updated"}"#.utf8)
    }

    /// The value of one series in a Prometheus exposition; nil when it is not there.
    static func sample(_ exposition: String, _ series: String) -> Double? {
        for line in exposition.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    @Test("Nothing of a refused delivery is kept; the same delivery is taken once there is room, and the watch says when it began and ended", arguments: FullStoreBackend.allCases)
    func refusedThenRecovered(backend: FullStoreBackend) async throws {
        try await FullStoreWorld.with(backend) { world in
            let log = CapturedLog()
            let dependencies = world.dependencies(logger: log.logger(format: .text), hint: "free space on the test's disk")
            // The requests' lines in the same log, to show that a refused delivery adds none of its own.
            let app = BillingApplication.application(dependencies, host: "127.0.0.1", port: 0, logger: log.logger(format: .text))
            try await app.test(.router) { client in
                func deliver(_ body: [UInt8]) async throws -> TestResponse {
                    try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
                }
                func metric(_ series: String) async throws -> Double? {
                    let response = try await client.execute(uri: "/metrics", method: .get)
                    return Self.sample(String(buffer: response.body), series)
                }
                #expect(try await deliver(Self.largeEventBody(id: "evt_before")).status == .ok)
                #expect(try await metric("billingd_store_full") == 0)
                let dumpBefore = try await world.store.maintenance.dump()
                try await world.room.fill()

                let body = Self.largeEventBody(id: "evt_refused")
                for _ in 0..<2 {
                    let refused = try await deliver(body)
                    #expect(refused.status == .serviceUnavailable)
                    #expect(refused.errorCode == "store_full")
                    #expect(refused.headers[.retryAfter] == "30")
                }
                let notReady = try await client.execute(uri: "/readyz", method: .get)
                #expect(notReady.status == .serviceUnavailable)
                #expect(notReady.errorCode == "store_full")
                #expect(try await metric("billingd_store_full") == 1)
                #expect(try await metric(#"billingd_store_write_refusals_total{reason="disk_full"}"#) == 2)
                #expect(try await metric(#"billingd_webhook_deliveries_total{outcome="store_failed",type="customer.subscription.updated"}"#) == 2)

                #expect(try await !world.store.inbox.contains(eventID: "evt_refused", account: nil, livemode: false))
                #expect(try await world.store.maintenance.dump() == dumpBefore, "nothing of the refused delivery was written")
                if let reopenedDump = world.reopenedDump {
                    #expect(try await reopenedDump() == dumpBefore, "the ledger opens, as it was")
                }

                try await world.room.makeRoom()
                let taken = try await deliver(body)
                #expect(taken.status == .ok)
                #expect(taken.json["duplicate"] as? Bool == false)
                let event = try #require(try await world.store.inbox.list(.init(eventID: "evt_refused")).first)
                #expect(event.status == .applied)
                #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
                #expect(try await metric("billingd_store_full") == 0)
            }
            let text = log.text
            #expect(text.components(separatedBy: "the ledger store is full").count - 1 == 1, "one error line for the episode:\n\(text)")
            #expect(text.contains("free space on the test's disk"))
            #expect(text.contains("refused_writes=2"), "the two deliveries; /readyz's checks are no refused writes")
            #expect(text.contains(backend == .sqlite ? "SQLite error 13: database or disk is full" : "SQLSTATE 53100"), "the backend's own words")
            #expect(text.components(separatedBy: "store writable again").count - 1 == 1)
            #expect(!text.contains("webhook not stored"), "no line per refused delivery")
        }
    }

    @Test("/readyz while full checks for room: 503 store_full until there is room for a delivery, then 200, which ends the episode", arguments: FullStoreBackend.allCases)
    func readinessEndsTheEpisode(backend: FullStoreBackend) async throws {
        try await FullStoreWorld.with(backend) { world in
            let dependencies = world.dependencies()
            let space = dependencies.space
            let app = makeApplication(dependencies)
            try await app.test(.router) { client in
                try await world.room.fill()
                let body = Self.largeEventBody(id: "evt_full")
                #expect(try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body)).status
                    == .serviceUnavailable)
                #expect(space.isFull)
                for _ in 0..<2 { #expect(try await client.execute(uri: "/readyz", method: .head).status == .serviceUnavailable) }
                #expect(space.isFull)
                try await world.room.makeRoom()
                // No delivery came: the check itself ends the episode.
                #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
                #expect(!space.isFull)
            }
        }
    }

    @Test("A write refused for want of space on any route (the service API's) is 503 store_full with Retry-After, not a 500")
    func anyRouteRefusesWhenFull() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let dependencies = makeDependencies(ledger)
        let router = BillingApplication.router(dependencies)
        router.post("/test/write") { _, _ -> Response in
            throw DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full")
        }
        try await Application(router: router).test(.router) { client in
            let response = try await client.execute(uri: "/test/write", method: .post)
            #expect(response.status == .serviceUnavailable)
            #expect(response.errorCode == "store_full")
            #expect(response.headers[.retryAfter] == "30")
        }
        #expect(dependencies.space.isFull)
    }

    @Test("serve's watch ends an episode on its own once there is room, with nothing sent: each tick checks while full", arguments: FullStoreBackend.allCases)
    func watchRecoversWithoutTraffic(backend: FullStoreBackend) async throws {
        try await FullStoreWorld.with(backend) { world in
            let log = CapturedLog()
            let metrics = BillingMetrics()
            let space = StoreSpaceWatch(store: world.store, metrics: metrics, logger: log.logger(format: .text))
            let committer = GroupCommitter(applier: world.applier)
            try await world.room.fill()
            let delivery = InboxDelivery(
                envelope: try EventEnvelope(decoding: Self.largeEventBody(id: "evt_tick")), body: Self.largeEventBody(id: "evt_tick"),
                receivedAt: 0, source: .webhook, secretIndex: 0)
            do {
                _ = try await committer.submit(delivery)
                Issue.record("a full store took the delivery")
            } catch {
                #expect(space.refused(error, writer: "webhook"))
            }
            await space.tick()
            #expect(space.isFull, "no room yet: the check fails and the episode goes on")
            try await world.room.makeRoom()
            await space.tick()
            #expect(!space.isFull)
            #expect(Self.sample(String(decoding: metrics.render(), as: UTF8.self), "billingd_store_full") == 0)
            #expect(log.text.contains("store writable again"))
        }
    }

    @Test("billingd_store_bytes{table}, billingd_store_database_bytes, billingd_store_free_bytes and the events per store on /metrics after the watch reads the sizes", arguments: FullStoreBackend.allCases)
    func sizesOnMetrics(backend: FullStoreBackend) async throws {
        try await FullStoreWorld.with(backend) { world in
            let dependencies = world.dependencies()
            let space = dependencies.space
            let app = makeApplication(dependencies)
            try await app.test(.router) { client in
                let body = Self.largeEventBody(id: "evt_sized")
                #expect(try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body)).status == .ok)
                await space.tick()
                let exposition = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                let inboxBody = try #require(Self.sample(exposition, #"billingd_store_bytes{table="inboxbody"}"#))
                let database = try #require(Self.sample(exposition, "billingd_store_database_bytes"))
                #expect(inboxBody >= Double(body.count) / 2, "the body is measured (stored compressed)")
                #expect(database >= inboxBody)
                #expect(Self.sample(exposition, "billingd_store_free_bytes") != nil)
                #expect(Self.sample(exposition, #"billingd_store_events_total{store="stripe"}"#) == 1)
                #expect(Self.sample(exposition, #"billingd_store_events_total{store="appstore"}"#) == 0)
                #expect(Self.sample(exposition, #"billingd_store_bodies_pruned_total{store="stripe"}"#) == 0)
            }
        }
    }
}
