import APITransport
import BillingCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StripeAPI
import Testing

@testable import BillingServer

@Suite("APIError: one refusal type that renders itself, counted by its typed reason")
struct APIErrorTests {
    @Test("A refused webhook delivery is counted by its reason, never by its code's text", arguments: [
        (APIError.Reason.bodyTooLarge, BillingMetrics.DeliveryOutcome.tooLarge, "body_too_large"),
        (.signature(.noMatchingSignature), .badSignature, "signature_mismatch"),
        (.signature(.timestampTooOld(ageSeconds: 900, tolerance: 300)), .staleTimestamp, "signature_timestamp_too_old"),
        (.signature(.timestampInFuture(aheadSeconds: 900, tolerance: 300)), .staleTimestamp, "signature_timestamp_in_future"),
        (.signature(.missingHeader), .malformed, "missing_signature_header"),
        (.event(.notAnEvent("no id")), .malformed, "not_an_event"),
        (.event(.createdInFuture(created: 2, signedAt: 1, tolerance: 0)), .malformed, "event_created_in_future"),
        (.storeUnavailable, .storeFailed, "store_unavailable"),
        (.other(code: "not_an_event"), .malformed, "not_an_event"),
    ] as [(APIError.Reason, BillingMetrics.DeliveryOutcome, String)])
    func deliveryOutcome(reason: APIError.Reason, outcome: BillingMetrics.DeliveryOutcome, code: String) {
        #expect(BillingMetrics.DeliveryOutcome(refusal: reason) == outcome)
        let error = APIError(.badRequest, reason: reason, message: "m")
        #expect(error.code == code)
        #expect(error.description == "m (\(code))")
    }

    @Test("A Stripe outage renders as before: 503, Retry-After, the code, the message and Stripe's request id")
    func stripeRefusalRendering() throws {
        let stripe = StripeError(kind: .server, status: 503, message: "down", requestID: "req_1", method: .post, path: "/v1/checkout/sessions", attempts: 3)
        let response = APIError.stripe(stripe, doing: "create a Checkout session").response()
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers[.retryAfter] == "5")
        #expect(response.headers[.contentType] == "application/json")
        let body = String(buffer: APIError.stripe(stripe, doing: "create a Checkout session").body)
        #expect(body == #"{"error":{"code":"stripe_unavailable","message":"Stripe could not be reached or was overloaded while trying to create a Checkout session, after 3 attempt(s). Try again in a few seconds. (Stripe request req_1)","stripe_request_id":"req_1"}}"#)
    }

    @Test("Members beyond code and message are kept in the error object")
    func extraMembers() {
        let error = APIError(.badRequest, code: "invalid_field", message: "m", extra: ["field": "quantity"])
        #expect(error.response().headers[.retryAfter] == nil)
        let body = String(buffer: error.body)
        #expect(body == #"{"error":{"code":"invalid_field","field":"quantity","message":"m"}}"#)
    }
}
