import APITransport
import StripeAPI
import Testing

@Suite("StripeError: what Stripe's error answers mean")
struct StripeErrorPredicateTests {
    typealias Fixture = ClientFixture

    /// The error a client throws for one answer with this status and body, as Stripe sends them
    /// (`doc_url`, `request_log_url` and all).
    private static func error(status: Int, _ body: String) async throws -> StripeError {
        let transport = ScriptedTransport([.json(body, status: status, requestID: "req_pred")])
        return try await #require(throws: StripeError.self) {
            try await Fixture.client(transport, maxRetries: 0).send(.post, "/v1/billing/meter_events")
        }
    }

    @Test("A missing object: a 404 resource_missing, and a 400 resource_missing on a parameter")
    func missingResource() async throws {
        let missing = try await Self.error(
            status: 404,
            #"{"error":{"code":"resource_missing","doc_url":"https://stripe.com/docs/error-codes/resource-missing","message":"No such subscription: 'sub_nope'","param":"id","request_log_url":"https://dashboard.stripe.com/test/logs/req_pred?t=1764201600","type":"invalid_request_error"}}"#)
        #expect(missing.isMissingResource)
        #expect(!missing.isDuplicateMeterEvent)
        let missingPrice = try await Self.error(
            status: 400,
            #"{"error":{"code":"resource_missing","doc_url":"https://stripe.com/docs/error-codes/resource-missing","message":"No such price: 'price_nope'","param":"line_items[0][price]","request_log_url":"https://dashboard.stripe.com/test/logs/req_pred?t=1764201600","type":"invalid_request_error"}}"#)
        #expect(missingPrice.kind == .invalidRequest)
        #expect(missingPrice.isMissingResource)
    }

    @Test("A duplicate meter event: v1's message-only 400 and v2's duplicate_meter_event")
    func duplicateMeterEvent() async throws {
        let v1 = try await Self.error(
            status: 400,
            #"{"error":{"message":"An event already exists with identifier billingd-acme-42-3f9a.","request_log_url":"https://dashboard.stripe.com/test/logs/req_pred?t=1764201600","type":"invalid_request_error"}}"#)
        #expect(v1.code == nil)
        #expect(v1.isDuplicateMeterEvent)
        #expect(!v1.isMissingResource)
        let v2 = try await Self.error(
            status: 400,
            #"{"error":{"type":"invalid_request_error","code":"duplicate_meter_event","message":"A meter event with identifier billingd-acme-42-3f9a was already submitted."}}"#)
        #expect(v2.isDuplicateMeterEvent)
    }

    @Test("A meter event's timestamp out of Stripe's window: too old is final, ahead may pass later")
    func meterEventTimestamp() async throws {
        let old = try await Self.error(
            status: 400,
            #"{"error":{"code":"timestamp_too_far_in_past","message":"The timestamp must be within the past 35 days.","param":"timestamp","type":"invalid_request_error"}}"#)
        #expect(old.isMeterEventTimestampRefused)
        #expect(!old.isMeterEventTimestampInFuture)
        let ahead = try await Self.error(
            status: 400,
            #"{"error":{"code":"timestamp_in_future","message":"The timestamp must not be more than 5 minutes in the future.","param":"timestamp","type":"invalid_request_error"}}"#)
        #expect(ahead.isMeterEventTimestampRefused)
        #expect(ahead.isMeterEventTimestampInFuture)
    }

    @Test("Other refusals are none of these, whatever their message says", arguments: [
        (402, #"{"error":{"code":"card_declined","decline_code":"insufficient_funds","doc_url":"https://stripe.com/docs/error-codes/card-declined","message":"Your card has insufficient funds.","type":"card_error"}}"#),
        (400, #"{"error":{"code":"parameter_unknown","doc_url":"https://stripe.com/docs/error-codes/parameter-unknown","message":"Received unknown parameter: identifierr","param":"identifierr","type":"invalid_request_error"}}"#),
        (409, #"{"error":{"code":"resource_already_exists","message":"An event already exists with identifier x, but this is a 409.","type":"invalid_request_error"}}"#),
    ] as [(Int, String)])
    func others(status: Int, body: String) async throws {
        let error = try await Self.error(status: status, body)
        #expect(!error.isMissingResource)
        #expect(!error.isDuplicateMeterEvent)
        #expect(!error.isMeterEventTimestampRefused)
    }
}
