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

@Suite("Event envelope: what could not be stored or applied as it came is refused (issue 18 items 3 and 4)")
struct EventEnvelopeStrictnessTests {
    static func event(id: String = #"evt_1"#, type: String = "customer.updated", extra: String = "", object: String = #"{"id":"cus_1","object":"customer"}"#) -> [UInt8] {
        Array(#"{"id":"\#(id)","object":"event","type":"\#(type)","created":1,"livemode":false\#(extra),"data":{"object":\#(object)}}"#.utf8)
    }

    @Test("A control character in the id, type, account, API version or object id is refused", arguments: [
        event(id: #"evt_nul\u0000x"#), event(id: #"evt_nl\nx"#), event(id: #"evt_c1\u0085x"#), event(type: #"customer.updated\u001b[2J"#),
        event(extra: #","account":"acct_1\u0000x""#), event(extra: #","api_version":"2026\r\n""#),
        event(object: #"{"id":"cus_1\u0000x","object":"customer"}"#), event(object: #"{"id":"cus_1","object":"customer\u007f"}"#),
    ])
    func refusesControlCharacters(body: [UInt8]) {
        #expect(throws: EventDecodingError.self) { try EventEnvelope(decoding: body) }
    }

    @Test("An id with a NUL names the character in the refusal, and the id is never cut at it")
    func nulNamed() throws {
        do {
            _ = try EventEnvelope(decoding: Self.event(id: #"evt_nul\u0000x"#))
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("id holds a control character (U+0000)"), "\(error.message)")
        }
        #expect(try EventEnvelope(decoding: Self.event(id: "evt_nul")).id == "evt_nul")
    }

    @Test("A UTF-8 byte order mark, or bytes that are not UTF-8 inside a string, are refused")
    func refusesBOMAndInvalidUTF8() {
        let body = Self.event()
        #expect(throws: EventDecodingError.self) { try EventEnvelope(decoding: [0xEF, 0xBB, 0xBF] + body) }
        var invalid = Array(#"{"id":"evt_1","object":"event","type":"customer.updated","created":1,"data":{"object":{"id":"cus_1","object":"customer","name":"A"#.utf8)
        invalid += [0xC3, 0x28]  // a lead byte followed by an ASCII byte: not UTF-8
        invalid += Array(#""}}}"#.utf8)
        #expect(throws: EventDecodingError.self) { try EventEnvelope(decoding: invalid) }
        // Non-ASCII that is UTF-8 is fine.
        #expect((try? EventEnvelope(decoding: Self.event(object: #"{"id":"cus_1","object":"customer","name":"Zoë 🧾"}"#))) != nil)
    }

    @Test("The raw object is the one the envelope was read from: escaped keys are read as a decoder reads them, and a repeated data or object is refused")
    func locatorAgreesWithDecoder() throws {
        let escaped = Array(#"{"id":"evt_1","object":"event","type":"customer.updated","created":1,"d\u0061ta":{"\u006fbject":{"id":"cus_esc","object":"customer"}}}"#.utf8)
        let envelope = try EventEnvelope(decoding: escaped)
        #expect(envelope.objectID == "cus_esc")
        #expect(RawObjectLocator.object(in: escaped).map { String(decoding: $0, as: UTF8.self) } == #"{"id":"cus_esc","object":"customer"}"#)

        for repeated in [
            #"{"id":"evt_1","type":"customer.updated","created":1,"data":{"object":{"id":"cus_A"}},"data":{"object":{"id":"cus_B"}}}"#,
            #"{"id":"evt_1","type":"customer.updated","created":1,"data":{"object":{"id":"cus_A"}},"d\u0061ta":{"object":{"id":"cus_B"}}}"#,
            #"{"id":"evt_1","type":"customer.updated","created":1,"data":{"object":{"id":"cus_A"},"object":{"id":"cus_B"}}}"#,
        ] {
            #expect(RawObjectLocator.object(in: Array(repeated.utf8)) == nil, "\(repeated)")
            #expect(throws: EventDecodingError.self, "\(repeated)") { try EventEnvelope(decoding: Array(repeated.utf8)) }
        }
    }

    @Test("A snapshot whose id holds a control character does not decode, so the ledger never keys a row by a cut id")
    func snapshotIDWithControlCharacter() {
        #expect(throws: LedgerSnapshot.DecodingFailure.self) {
            try LedgerSnapshot.decode(
                kind: .customer, deletion: false, eventType: "customer.updated", eventID: "evt_1", eventCreated: 1,
                objectJSON: ArraySlice(#"{"id":"cus_1\u0000x","object":"customer"}"#.utf8))
        }
    }
}

@Suite("Event created time against its signature (issue 18 item 5)")
struct EventCreatedTests {
    static func event(created: String) -> [UInt8] {
        Array(#"{"id":"evt_c","object":"event","type":"customer.updated","created":\#(created),"livemode":false,"data":{"object":{"id":"cus_1","object":"customer"}}}"#.utf8)
    }

    @Test("A negative created is not an event")
    func negative() {
        #expect(throws: EventDecodingError.createdNegative(-1)) { try EventEnvelope(decoding: Self.event(created: "-1")) }
    }

    @Test("created may be up to the signature's timestamp plus the tolerance, not one second more")
    func notAfterSigning() throws {
        let signedAt: Int64 = 1_767_225_600
        try EventEnvelope(decoding: Self.event(created: "\(signedAt + 300)")).checkCreated(signedAt: signedAt, tolerance: 300)
        try EventEnvelope(decoding: Self.event(created: "0")).checkCreated(signedAt: signedAt, tolerance: 300)
        let late = try EventEnvelope(decoding: Self.event(created: "\(signedAt + 301)"))
        #expect(throws: EventDecodingError.createdInFuture(created: signedAt + 301, signedAt: signedAt, tolerance: 300)) {
            try late.checkCreated(signedAt: signedAt, tolerance: 300)
        }
        let far = try EventEnvelope(decoding: Self.event(created: "1000000000000000000"))
        do {
            try far.checkCreated(signedAt: signedAt, tolerance: 300)
            Issue.record("accepted")
        } catch {
            #expect(error.code == "event_created_in_future")
        }
    }

    @Test("The verified signature tells its timestamp")
    func signatureTimestamp() throws {
        let body = Self.event(created: "1")
        let verifier = SignatureVerifier(secrets: ["whsec_a_0123456789", "whsec_b_0123456789"])
        let header = SignatureVerifier.header(body: body, secret: "whsec_b_0123456789", timestamp: 1_767_225_600)
        #expect(try verifier.verifySignature(body: body, header: header, now: 1_767_225_601) == .init(secretIndex: 1, timestamp: 1_767_225_600))
    }
}
