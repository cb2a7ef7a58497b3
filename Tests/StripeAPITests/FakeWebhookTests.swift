import BillingCore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import StripeFake
import Synchronization
import Testing

/// Events: the `/v1/events` list and its filters, and signed delivery to a webhook endpoint.
@Suite struct FakeWebhookTests {
    /// A tiny webhook endpoint that keeps what it receives and answers with a chosen status.
    final class Receiver: Sendable {
        struct Delivery: Sendable {
            let body: [UInt8]
            let signature: String?
        }

        /// What the endpoint's route shares with the test.
        final class State: Sendable {
            let received = Mutex<[Delivery]>([])
            let status = Mutex<HTTPResponse.Status>(.ok)
        }

        let url: String
        private let state: State
        private let server: Task<Void, any Error>

        private init(url: String, state: State, server: Task<Void, any Error>) {
            self.url = url
            self.state = state
            self.server = server
        }

        var deliveries: [Delivery] { state.received.withLock { $0 } }

        func answer(with status: HTTPResponse.Status) { state.status.withLock { $0 = status } }

        func stop() { server.cancel() }

        static func start() async throws -> Receiver {
            let state = State()
            let router = Router()
            router.post("/webhooks/stripe") { request, _ -> Response in
                var request = request
                let body = try await request.collectBody(upTo: 1 << 20)
                let signature = request.headers[HTTPField.Name("Stripe-Signature")!]
                state.received.withLock { $0.append(Delivery(body: Array(buffer: body), signature: signature)) }
                return Response(status: state.status.withLock { $0 })
            }
            let (ports, continuation) = AsyncStream<Int>.makeStream()
            var logger = Logger(label: "receiver")
            logger.logLevel = .critical
            let application = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: logger)
            let server = Task { try await application.run() }
            var iterator = ports.makeAsyncIterator()
            let port = await iterator.next() ?? 0
            return Receiver(url: "http://127.0.0.1:\(port)/webhooks/stripe", state: state, server: server)
        }
    }

    @Test func eventsListFiltersByCreatedAndType() async throws {
        let clock = FakeClock(fixedAt: 1_800_000_000)
        try await withFake(.init(clock: clock)) { fake, client in
            let customer = await fake.createCustomer(email: "old@example.com")
            clock.advance(by: 31 * 86_400)
            try await fake.update(.customer, customer) { $0["name"] = "Renamed" }
            clock.advance(by: 60)
            let other = await fake.createCustomer(email: "new@example.com")

            let all = try await client.get("/v1/events")
            #expect(all.json["url"] == "/v1/events")
            // The first event is older than 30 days: no longer listed.
            #expect(
                (all.json["data"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue } == [
                    "customer.created", "customer.updated",
                ])
            #expect(all.json["data"]?[0]?[path: "data.object.id"] == .string(other))
            #expect(all.json["data"]?[0]?["api_version"] == "2026-10-28.clover")

            let recent = try await client.get("/v1/events", [("created[gt]", String(clock.now - 30))])
            #expect(recent.dataIDs.count == 1)
            let updates = try await client.get("/v1/events", [("type", "customer.updated")])
            #expect(updates.json["data"]?[0]?[path: "data.previous_attributes.name"] == .null)
            let wildcard = try await client.get("/v1/events", [("types[]", "customer.*")])
            #expect(wildcard.dataIDs.count == 2)

            let one = try await client.get("/v1/events/\(all.dataIDs[0])")
            #expect(one.json["object"] == "event")
            #expect(await fake.events().count == 3)
        }
    }

    @Test func deliveriesAreSignedVerifiableAndMarkedDelivered() async throws {
        let receiver = try await Receiver.start()
        defer { receiver.stop() }
        let secret = "whsec_test_secret"
        try await withFake(.init(webhookURL: receiver.url, webhookSecret: secret)) { fake, client in
            _ = try await client.post(
                "/v1/customers", [("email", "hook@example.com")], headers: [("Stripe-Version", "2025-03-31.basil")])
            #expect(await fake.waitForDeliveries())
            let delivery = try #require(receiver.deliveries.first)
            let verifier = SignatureVerifier(secrets: [secret])
            #expect(throws: Never.self) {
                try verifier.verify(body: delivery.body, header: delivery.signature, now: fake.now)
            }
            let event = try JSONValue(parsing: delivery.body)
            #expect(event["type"] == "customer.created")
            #expect(event["api_version"] == "2025-03-31.basil")
            #expect(event["pending_webhooks"] == 1)

            // The body is exactly what /v1/events serves.
            let listed = try await client.get("/v1/events/\(event["id"]?.stringValue ?? "")")
            #expect(listed.body == delivery.body)
            let delivered = try await client.get("/v1/events", [("delivery_success", "true")])
            #expect(delivered.dataIDs == [event["id"]?.stringValue ?? ""])
            #expect(await fake.deliveryStatus(of: event["id"]?.stringValue ?? "") == .delivered)
        }
    }

    @Test func droppedAndRefusedEventsAreDeliveryFailures() async throws {
        let receiver = try await Receiver.start()
        defer { receiver.stop() }
        try await withFake(.init(webhookURL: receiver.url, webhookSecret: "whsec_x")) { fake, client in
            await fake.updateDeliveryPolicy { $0.dropNext = 2 }
            let first = await fake.createCustomer(email: "a@example.com")
            let second = await fake.createCustomer(email: "b@example.com")
            let third = await fake.createCustomer(email: "c@example.com")
            #expect(await fake.waitForDeliveries())
            #expect(receiver.deliveries.count == 1)
            #expect(
                receiver.deliveries.first.flatMap { try? JSONValue(parsing: $0.body) }?[path: "data.object.id"]
                    == .string(third))

            receiver.answer(with: .internalServerError)
            _ = await fake.createCustomer(email: "d@example.com")
            #expect(await fake.waitForDeliveries())

            let failed = try await client.get("/v1/events", [("delivery_success", "false")])
            #expect(failed.dataIDs.count == 3)
            let failedObjects = (failed.json["data"]?.arrayValue ?? []).compactMap {
                $0[path: "data.object.id"]?.stringValue
            }
            #expect(Set(failedObjects).isSuperset(of: [first, second]))
            let succeeded = try await client.get("/v1/events", [("delivery_success", "true")])
            #expect(succeeded.dataIDs.count == 1)

            // Resending a failed event, once the endpoint is back.
            receiver.answer(with: .ok)
            try await fake.redeliver(failed.dataIDs[0])
            #expect(await fake.waitForDeliveries())
            #expect(await fake.deliveryStatus(of: failed.dataIDs[0]) == .delivered)
        }
    }

    @Test func pausedDeliveriesGoOutReversedOrTwice() async throws {
        let receiver = try await Receiver.start()
        defer { receiver.stop() }
        try await withFake(.init(webhookURL: receiver.url, webhookSecret: "whsec_x")) { fake, _ in
            await fake.pauseDelivery()
            let catalog = try await FakeCatalog.make(in: fake)
            let customer = await fake.createCustomer(email: "o@example.com")
            try await fake.createSubscription(customer: customer, price: catalog.monthly)
            #expect(receiver.deliveries.isEmpty)
            await fake.resumeDelivery(order: .reversed)
            #expect(await fake.waitForDeliveries())
            let order = receiver.deliveries.compactMap { try? JSONValue(parsing: $0.body)["type"]?.stringValue }
            #expect(order == (await fake.eventTypes()).reversed())

            let before = receiver.deliveries.count
            await fake.updateDeliveryPolicy {
                $0.order = .asCreated
                $0.deliverTwice = true
            }
            await fake.createCustomer(email: "twice@example.com")
            #expect(await fake.waitForDeliveries())
            #expect(receiver.deliveries.count == before + 2)
            #expect(receiver.deliveries[before].body == receiver.deliveries[before + 1].body)
        }
    }

    @Test func endpointSetLaterReceivesOnlyLaterEvents() async throws {
        let receiver = try await Receiver.start()
        defer { receiver.stop() }
        try await withFake { fake, _ in
            let early = await fake.createCustomer(email: "early@example.com")
            await fake.setWebhookEndpoint(WebhookEndpoint(url: receiver.url, secret: "whsec_later"))
            let late = await fake.createCustomer(email: "late@example.com")
            #expect(await fake.waitForDeliveries())
            let delivered = receiver.deliveries.compactMap {
                try? JSONValue(parsing: $0.body)[path: "data.object.id"]?.stringValue
            }
            #expect(delivered == [late])
            #expect(!delivered.contains(early))
        }
    }
}
