import BillingCore
import Foundation
import Testing

@Suite("Event envelope and raw object")
struct EventEnvelopeTests {
    @Test("The envelope of a real event decodes, unknown types and fields included")
    func decodesEnvelope() throws {
        let body = Array(#"""
            {"id":"evt_1Q","object":"event","api_version":"2025-03-31.basil","created":1767225600,
             "data":{"object":{"id":"sub_1","object":"subscription","status":"active","new_field":{"x":[1,2]}},
                     "previous_attributes":{"status":"trialing"}},
             "livemode":true,"account":"acct_9","pending_webhooks":1,"type":"some.future_type.happened","brand_new":true}
            """#.utf8)
        let envelope = try EventEnvelope(decoding: body)
        #expect(envelope.id == "evt_1Q")
        #expect(envelope.type == "some.future_type.happened")
        #expect(envelope.apiVersion == "2025-03-31.basil")
        #expect(envelope.created == 1_767_225_600)
        #expect(envelope.livemode)
        #expect(envelope.account == "acct_9")
        #expect(envelope.objectID == "sub_1")
        #expect(envelope.objectType == "subscription")
    }

    @Test("An object without an id (invoice.upcoming) is still an event")
    func objectWithoutID() throws {
        let body = Array(#"{"id":"evt_2","object":"event","created":1,"type":"invoice.upcoming","livemode":false,"data":{"object":{"object":"invoice","total":100}}}"#.utf8)
        let envelope = try EventEnvelope(decoding: body)
        #expect(envelope.objectID == nil)
        #expect(envelope.objectType == "invoice")
        #expect(envelope.account == nil)
    }

    @Test("Bodies that are not events are refused", arguments: [
        "", "not json", "[]", "{}", #"{"object":"event","type":"x.y","created":1,"data":{"object":{}}}"#,
        #"{"id":"","type":"x.y","created":1,"data":{"object":{}}}"#,
        #"{"id":"evt_1","created":1,"data":{"object":{}}}"#,
        #"{"id":"evt_1","type":"x.y","data":{"object":{}}}"#,
        #"{"id":"evt_1","type":"x.y","created":1}"#,
        #"{"id":"cus_1","object":"customer","type":"x.y","created":1,"data":{"object":{}}}"#,
        #"{"id":5,"type":"x.y","created":1,"data":{"object":{}}}"#,
    ])
    func refusesNonEvents(text: String) {
        #expect(throws: EventDecodingError.self) { try EventEnvelope(decoding: Array(text.utf8)) }
    }

    @Test("data.object is located byte for byte, whitespace and escapes included")
    func locatesRawObject() throws {
        let object = #"{ "id" : "in_1", "description": "a \"quoted\" }{ brace", "lines": {"data": [1, 2.5e3, null, true]} }"#
        let text = #"{"id":"evt_1","data" : {"previous_attributes":{"object":"x"}, "object" : "# + object + #"},"type":"invoice.updated"}"#
        let bytes = Array(text.utf8)
        let slice = try #require(RawObjectLocator.object(in: bytes))
        #expect(String(decoding: slice, as: UTF8.self) == object)
    }

    @Test("Malformed or absent data.object gives nil, never a crash", arguments: [
        "", "{", #"{"data":{"object":{"id":"x"}"#, #"{"data":[]}"#, #"{"data":{"objectx":{}}}"#,
        #"{"data":{"object":"unterminated}}"#, String(repeating: "[", count: 10_000),
    ])
    func locatorRejectsMalformed(text: String) {
        #expect(RawObjectLocator.object(in: Array(text.utf8)) == nil)
    }
}

@Suite("Event envelope tolerance")
struct EventEnvelopeToleranceTests {
    @Test("An object whose id is not a string is still an event (its applying fails later, visibly)")
    func oddObjectID() throws {
        let body = Array(#"{"id":"evt_odd","object":"event","type":"customer.updated","created":1,"data":{"object":{"id":42,"object":["x"]}}}"#.utf8)
        let envelope = try EventEnvelope(decoding: body)
        #expect(envelope.objectID == nil)
        #expect(envelope.objectType == nil)
    }
}
