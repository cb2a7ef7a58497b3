import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import AsyncHTTPClient
import NIOCore
import Testing

@Suite("POST /webhooks/stripe")
struct WebhookEndpointTests {
    @Test("A signed delivery is stored once and acknowledged; a redelivery changes nothing")
    func storesOnceAndDeduplicates() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let inbox = SQLiteInbox(database: ledger.database)
        let app = makeApplication(makeDependencies(ledger))
        let body = eventBody(id: "evt_once")
        try await app.test(.router) { client in
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body)) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"duplicate":false,"id":"evt_once","received":true}"#)
                #expect(response.headers[.contentType] == "application/json")
            }
            #expect(try await inbox.count() == 1)
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body)) { response in
                #expect(response.status == .ok)
                #expect(response.json["duplicate"] as? Bool == true)
            }
        }
        let events = try await inbox.list(.init())
        #expect(events.count == 1)
        let event = try #require(events.first)
        #expect(event.eventID == "evt_once")
        #expect(event.type == "customer.subscription.updated")
        #expect(event.status == .applied, "applied in the commit that stored it")
        #expect(event.objectID == "sub_evt_once")
        #expect(event.apiVersion == "2026-10-28.clover")
        #expect(event.source == .webhook)
        #expect(try await inbox.body(eventID: "evt_once", account: nil, livemode: false) == body)
    }

    @Test("An event id that JSON must escape is still answered with valid JSON naming it")
    func oddEventID() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        let id = "evt_\"quoted\\é"
        let body = eventBody(id: #"evt_\"quoted\\é"#)  // the same id, escaped in the event's JSON
        try await app.test(.router) { client in
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body)) { response in
                #expect(response.status == .ok)
                #expect(response.json["id"] as? String == id)
                #expect(response.json["received"] as? Bool == true)
            }
        }
    }

    @Test("Bad or missing signatures are 400 with a JSON reason, and nothing is stored")
    func rejectsBadSignatures() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        let body = eventBody(id: "evt_bad")
        let now = Int64(Date().timeIntervalSince1970)
        try await app.test(.router) { client in
            let cases: [(HTTPFields, String)] = [
                ([:], "missing_signature_header"),
                (signedHeaders(body, secret: "whsec_someone_else"), "signature_mismatch"),
                (signedHeaders(body, at: now - 301), "signature_timestamp_too_old"),
                (signedHeaders(body, at: now + 400), "signature_timestamp_in_future"),
                ([HTTPField.Name("Stripe-Signature")!: "t=abc,v1=zz"], "signature_timestamp_invalid"),
            ]
            for (headers, code) in cases {
                try await client.execute(uri: "/webhooks/stripe", method: .post, headers: headers, body: ByteBuffer(bytes: body)) { response in
                    #expect(response.status == .badRequest)
                    #expect(response.errorCode == code)
                    #expect(response.headers[.contentType] == "application/json")
                }
            }
            // A tampered body with a signature of the original
            var tampered = body
            tampered[tampered.count - 3] = UInt8(ascii: "X")
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: tampered)) { response in
                #expect(response.status == .badRequest)
                #expect(response.errorCode == "signature_mismatch")
            }
        }
        #expect(try await SQLiteInbox(database: ledger.database).count() == 0)
    }

    @Test("A genuine signature over something that is not an event is 400 and not stored")
    func rejectsSignedNonEvents() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        try await app.test(.router) { client in
            for text in ["not json at all", #"{"object":"event","type":"x.y"}"#, "[]"] {
                let body = Array(text.utf8)
                try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body)) { response in
                    #expect(response.status == .badRequest)
                    #expect(response.errorCode == "not_an_event")
                }
            }
        }
        #expect(try await SQLiteInbox(database: ledger.database).count() == 0)
    }

    @Test("A body over 1 MiB is 413 and not stored")
    func rejectsOversizedBodies() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        let big = Array(#"{"id":"evt_big","object":"event","type":"x.y","created":1,"data":{"object":{"pad":""#.utf8)
            + [UInt8](repeating: UInt8(ascii: "a"), count: (1 << 20) + 10) + Array(#""}}}"#.utf8)
        try await app.test(.router) { client in
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(big), body: ByteBuffer(bytes: big)) { response in
                #expect(response.status == .contentTooLarge)
                #expect(response.errorCode == "body_too_large")
            }
        }
        #expect(try await SQLiteInbox(database: ledger.database).count() == 0)
    }

    @Test("Unknown event types are stored and acknowledged")
    func acceptsUnknownTypes() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        let body = eventBody(id: "evt_future", type: "quantum.entanglement.collapsed")
        try await app.test(.router) { client in
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body)) { response in
                #expect(response.status == .ok)
            }
        }
        let events = try await SQLiteInbox(database: ledger.database).list(.init(type: "quantum.entanglement.collapsed"))
        #expect(events.map(\.eventID) == ["evt_future"])
    }

    @Test("1,000 concurrent deliveries over HTTP with 10 % duplicates store exactly the distinct events and answer exactly 100 duplicates")
    func concurrentDeliveries() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        // 900 distinct events; 100 deliveries repeat one of them.
        let ids = (0..<900).map { "evt_c\($0)" } + (0..<100).map { "evt_c\($0 * 7)" }
        // A real server on loopback and a real HTTP client with its pool of connections, so the
        // deliveries race through the HTTP channel and the group commit as Stripe's would.
        // A client of its own whose wait for a pooled connection is as generous as the request
        // deadline: the shared one gives up after its connect timeout (10 s), which a full run
        // on two busy cores has exceeded with 1,000 requests queued on eight connections.
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = .seconds(300)
        let sender = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let answers: [(id: String, status: Int, duplicate: Bool?)]
        do { answers = try await app.test(.live) { client in
            let port = try #require(client.port)
            return try await withThrowingTaskGroup(of: (String, Int, Bool?).self) { group in
                for id in ids.shuffled() {
                    group.addTask {
                        let body = eventBody(id: id)
                        let header = SignatureVerifier.header(body: body, secret: testSecret, timestamp: Int64(Date().timeIntervalSince1970))
                        let (status, data) = try await HTTP.request(
                            "http://127.0.0.1:\(port)/webhooks/stripe", method: "POST",
                            headers: ["Stripe-Signature": header, "Content-Type": "application/json"], body: body,
                            // The 1,000 queue for the client's pool of connections: a generous
                            // deadline, since a retry could turn a lost answer into a duplicate.
                            timeout: .seconds(300), client: sender)
                        let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
                        return (id, status, json?["duplicate"] as? Bool)
                    }
                }
                var answers: [(id: String, status: Int, duplicate: Bool?)] = []
                for try await answer in group { answers.append(answer) }
                return answers
            }
        } } catch {
            try? await sender.shutdown()
            throw error
        }
        try await sender.shutdown()
        #expect(answers.count == 1000)
        #expect(answers.allSatisfy { $0.status == 200 })
        #expect(answers.count { $0.duplicate == true } == 100)
        // Each distinct event is answered "stored" exactly once.
        let stored = answers.filter { $0.duplicate == false }.map(\.id)
        #expect(stored.count == 900)
        #expect(Set(stored) == Set(ids))
        let inbox = SQLiteInbox(database: ledger.database)
        #expect(try await inbox.count() == 900)
        #expect(Set(try await inbox.list(.init(limit: 2000)).map(\.eventID)) == Set(ids))
    }

    @Test("Unknown routes and methods answer with a JSON error, not an empty page")
    func unknownRoutes() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        try await app.test(.router) { client in
            try await client.execute(uri: "/nope", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(response.errorCode == "not_found")
            }
        }
    }

    @Test("A served path asked with another method is 405 with Allow, not 404 (found by schemathesis)")
    func methodNotAllowed() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [userAPIToken]
        try await makeApplication(dependencies).test(.router) { client in
            for (method, path, allow) in [
                (HTTPRequest.Method.get, "/webhooks/stripe", "POST"), (.init("TRACE")!, "/healthz", "GET, HEAD"),
                (.delete, "/v1/users/user_1/subscription", "GET"), (.put, "/v1/checkout-sessions", "POST"),
            ] {
                try await client.execute(uri: path, method: method) { response in
                    #expect(response.status == .methodNotAllowed, "\(method) \(path)")
                    #expect(response.headers[.allow] == allow, "\(method) \(path)")
                    #expect(response.errorCode == "method_not_allowed")
                }
            }
            try await client.execute(uri: "/v1/users/user_1/nothing", method: .get) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    @Test("An empty query value is refused, not read as absent (found by schemathesis)")
    func emptyQueryValues() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [userAPIToken]
        try await makeApplication(dependencies).test(.router) { client in
            for uri in ["/v1/users/user_1/subscription?account=", "/v1/users/user_1/invoices?limit=", "/v1/exports/invoices?user="] {
                try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer \(userAPIToken)"]) { response in
                    #expect(response.status == .badRequest, "\(uri)")
                    #expect(response.errorCode == "invalid_parameter", "\(uri)")
                }
            }
        }
    }

    @Test("/healthz and /readyz answer 200 on a writable ledger")
    func health() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        try await app.test(.router) { client in
            try await client.execute(uri: "/healthz", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.json["status"] as? String == "ready")
            }
        }
    }

    @Test("Distinct unknown types share one series, type=\"other\", instead of one each (issue 18 item 7)")
    func unknownTypesShareOneSeries() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        try await app.test(.router) { client in
            for index in 0..<50 {
                let body = eventBody(id: "evt_rand_\(index)", type: "random.type_\(index).\(UUID().uuidString.prefix(8))")
                let response = try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
                #expect(response.status == .ok)
            }
            let known = eventBody(id: "evt_known", type: "customer.subscription.updated")
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(known), body: ByteBuffer(bytes: known))
            try await client.execute(uri: "/metrics", method: .get) { response in
                let text = String(buffer: response.body)
                let series = text.split(separator: "\n").filter { $0.hasPrefix("billingd_webhook_deliveries_total{") }
                #expect(series.count == 2, "\(series)")
                #expect(text.contains(#"billingd_webhook_deliveries_total{outcome="accepted",type="other"} 50"#))
                #expect(text.contains(#"billingd_webhook_deliveries_total{outcome="accepted",type="customer.subscription.updated"} 1"#))
                #expect(!text.contains("random.type_"))
            }
        }
    }

    @Test("/metrics counts deliveries by outcome")
    func metricsCountOutcomes() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let app = makeApplication(makeDependencies(ledger))
        let body = eventBody(id: "evt_m", type: "customer.subscription.created")
        try await app.test(.router) { client in
            for _ in 0..<2 {
                try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
            }
            try await client.execute(uri: "/webhooks/stripe", method: .post, headers: [:], body: ByteBuffer(bytes: body))
            try await client.execute(uri: "/metrics", method: .get) { response in
                let text = String(buffer: response.body)
                #expect(text.contains(#"billingd_webhook_deliveries_total{outcome="accepted",type="customer.subscription.created"} 1"#))
                #expect(text.contains(#"billingd_webhook_deliveries_total{outcome="duplicate",type="customer.subscription.created"} 1"#))
                #expect(text.contains(#"billingd_webhook_deliveries_total{outcome="malformed",type="unknown"} 1"#))
            }
        }
    }
}
