import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Signed deliveries an attacker holding the secret (or a broken sender) could make.
@Suite("POST /webhooks/stripe: what could not be stored or applied as it came is refused before the 2xx (issue 18)")
struct HostileWebhookTests {
    func post(_ client: some TestClientProtocol, _ body: [UInt8]) async throws -> TestResponse {
        try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body), body: ByteBuffer(bytes: body))
    }

    @Test("An id with a NUL is refused, so it can never be stored cut short and swallow evt_nul or evt_nul\\u0000y as duplicates (item 3)")
    func nulInEventID() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await makeApplication(makeDependencies(ledger)).test(.router) { client in
            let withNul = try await post(client, eventBody(id: #"evt_nul\u0000x"#))
            #expect(withNul.status == .badRequest, "\(String(buffer: withNul.body))")
            #expect(withNul.errorCode == "not_an_event")
            let other = try await post(client, eventBody(id: #"evt_nul\u0000y"#))
            #expect(other.status == .badRequest)
            let plain = try await post(client, eventBody(id: "evt_nul"))
            #expect(plain.status == .ok)
            #expect(plain.json["duplicate"] as? Bool == false, "evt_nul is new: nothing was stored under it before")
        }
        #expect(try await ledger.store.inbox.list(.init()).map(\.eventID) == ["evt_nul"])
    }

    @Test("A control character in the type, account or object id is refused too (item 3)", arguments: [
        #"customer.subscription.updated\nforged=1"#, #"customer.subscription.updated\u001b[31m"#,
    ])
    func controlCharacterInType(type: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await makeApplication(makeDependencies(ledger)).test(.router) { client in
            let response = try await post(client, eventBody(id: "evt_type", type: type))
            #expect(response.status == .badRequest)
            #expect(response.errorCode == "not_an_event")
            let account = Array(#"{"id":"evt_acct","object":"event","account":"acct_1\u0000","type":"customer.updated","created":1767225600,"livemode":false,"data":{"object":{"id":"cus_1","object":"customer"}}}"#.utf8)
            #expect(try await post(client, account).status == .badRequest)
            let object = Array(#"{"id":"evt_obj","object":"event","type":"customer.updated","created":1767225600,"livemode":false,"data":{"object":{"id":"cus_1\u0000x","object":"customer"}}}"#.utf8)
            #expect(try await post(client, object).status == .badRequest)
        }
        #expect(try await ledger.store.inbox.count() == 0)
    }

    @Test("A verified body with invalid UTF-8 inside a string, or a byte order mark before the JSON, is 400 not_an_event and not stored (item 4)")
    func undecodableBytes() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let invalidUTF8 =
            Array(#"{"id":"evt_utf8","object":"event","type":"customer.updated","created":1767225600,"livemode":false,"data":{"object":{"id":"cus_1","object":"customer","name":"Zo"#.utf8)
            + [0xFF, 0xFE] + Array(#""}}}"#.utf8)
        let bom = [0xEF, 0xBB, 0xBF] + eventBody(id: "evt_bom", type: "customer.subscription.updated")
        try await makeApplication(makeDependencies(ledger)).test(.router) { client in
            for body in [invalidUTF8, bom] {
                let response = try await post(client, body)
                #expect(response.status == .badRequest, "\(String(buffer: response.body))")
                #expect(response.errorCode == "not_an_event")
            }
        }
        #expect(try await ledger.store.inbox.count() == 0, "nothing is stored to end dead")
    }

    @Test("An object of a type billingd applies that does not decode is 400 not_an_event, not acknowledged to end dead (item 4)")
    func undecodableObject() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let body = Array(#"{"id":"evt_bad","object":"event","type":"invoice.paid","created":1767225600,"livemode":false,"data":{"object":{"id":"in_1","object":"invoice","currency":7}}}"#.utf8)
        try await makeApplication(makeDependencies(ledger)).test(.router) { client in
            let response = try await post(client, body)
            #expect(response.status == .badRequest, "\(String(buffer: response.body))")
            #expect(response.errorCode == "not_an_event")
            // An unknown type with the same odd object is stored and acknowledged (invariant 8).
            let unknown = Array(#"{"id":"evt_unknown","object":"event","type":"brand_new.thing","created":1767225600,"livemode":false,"data":{"object":{"id":"bn_1","currency":7}}}"#.utf8)
            #expect(try await post(client, unknown).status == .ok)
        }
        #expect(try await ledger.store.inbox.list(.init()).map(\.eventID) == ["evt_unknown"])
    }
}

@Suite("POST /webhooks/stripe: event created time (issue 18 item 5)")
struct EventCreatedWebhookTests {
    @Test("A signed customer.updated created at 1e18 is 400 event_created_in_future, and a genuine later update then applies instead of being stale")
    func farFutureCreated() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        @Sendable func customerUpdated(_ id: String, created: Int64, name: String) -> [UInt8] {
            Array(#"{"id":"\#(id)","object":"event","type":"customer.updated","created":\#(created),"livemode":false,"data":{"object":{"id":"cus_frozen","object":"customer","name":"\#(name)"}}}"#.utf8)
        }
        let now = Int64(Date().timeIntervalSince1970)
        try await makeApplication(makeDependencies(ledger)).test(.router) { client in
            for created in [1_000_000_000_000_000_000, now + 301 + 60, -1] as [Int64] {
                let frozen = customerUpdated("evt_future_\(created)", created: created, name: "Mallory")
                let response = try await client.execute(
                    uri: "/webhooks/stripe", method: .post, headers: signedHeaders(frozen, at: now), body: ByteBuffer(bytes: frozen))
                #expect(response.status == .badRequest, "created \(created)")
                #expect(response.errorCode == (created < 0 ? "not_an_event" : "event_created_in_future"), "created \(created)")
            }
            let genuine = customerUpdated("evt_genuine", created: now, name: "Ada")
            let response = try await client.execute(
                uri: "/webhooks/stripe", method: .post, headers: signedHeaders(genuine, at: now), body: ByteBuffer(bytes: genuine))
            #expect(response.status == .ok)
        }
        let events = try await ledger.store.inbox.list(.init())
        #expect(events.map(\.eventID) == ["evt_genuine"])
        #expect(events.first?.effect == "applied", "the genuine update is applied, not stale")
    }
}

@Suite("POST /webhooks/appstore: control characters (issue 18 item 3)")
struct HostileAppStoreWebhookTests {
    @Test("A genuine notification whose notificationUUID holds a NUL is refused, not stored under a cut id")
    func nulInNotificationUUID() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        var sample = bed.sample("SUBSCRIBED", "INITIAL_BUY", original: "2000000001")
        sample.notificationUUID = "0f9e3c1a-1111-4e2b-9c55-5b3d\u{0}forged"
        let body = bed.body(sample)
        try await bed.application(ledger, catalog: .freeOnly).test(.router) { client in
            let response = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: body))
            #expect(response.status == .badRequest, "\(String(buffer: response.body))")
            #expect(response.errorCode == "invalid_payload")
        }
        #expect(try await ledger.store.inbox.count() == 0)
    }
}

@Suite("POST /webhooks/appstore: unauthenticated size (issue 39)")
struct OversizedAppStoreWebhookTests {
    /// A notification body whose signedPayload has `header` as its JOSE header.
    static func body(header: String, payload: String = #"{"signedDate":1}"#) -> [UInt8] {
        let jws = JWSBase64URL.encode(Array(header.utf8)) + "." + JWSBase64URL.encode(Array(payload.utf8)) + ".AAAA"
        return Array(#"{"signedPayload":""#.utf8) + Array(jws.utf8) + Array(#""}"#.utf8)
    }

    static func x5c(_ count: Int) -> String {
        "[" + Array(repeating: #""MIIB""#, count: count).joined(separator: ",") + "]"
    }

    @Test("Oversized or overlong input is refused with its JSON 4xx before it is decoded", arguments: [
        ("a header segment over 16 KiB", 400, "invalid_jws"),
        ("an x5c of four entries", 400, "invalid_chain_length"),
        ("an x5c of 1,500 entries", 400, "invalid_chain_length"),
        ("a header of 200 members", 400, "invalid_jws"),
        ("a body over 64 KiB", 413, "body_too_large"),
        ("a body of 85,000 x5c entries", 413, "body_too_large"),
    ])
    func refused(_ case: String, status: Int, code: String) async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let body: [UInt8]
        switch `case` {
        case "a header segment over 16 KiB":
            body = Self.body(header: #"{"alg":"ES256","pad":""# + String(repeating: "A", count: 13_000) + #""}"#)
        case "an x5c of four entries": body = Self.body(header: #"{"alg":"ES256","x5c":"# + Self.x5c(4) + "}")
        case "an x5c of 1,500 entries": body = Self.body(header: #"{"x5c":"# + Self.x5c(1_500) + "}")
        case "a header of 200 members":
            body = Self.body(header: "{" + (0..<200).map { #""k\#($0)":0"# }.joined(separator: ",") + "}")
        case "a body over 64 KiB": body = Self.body(header: #"{"alg":"ES256"}"#, payload: String(repeating: " ", count: 70_000))
        default: body = Self.body(header: #"{"x5c":"# + Self.x5c(85_000) + "}")
        }
        #expect(body.count < 1 << 20)
        try await bed.application(ledger, catalog: .freeOnly).test(.router) { client in
            let response = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: body))
            #expect(Int(response.status.code) == status, "\(String(buffer: response.body))")
            #expect(response.errorCode == code)
        }
        #expect(try await ledger.store.inbox.count() == 0)
    }

    @Test("The x5c bound is checked on the header's bytes, before its JSON is parsed")
    func x5cCheckedBeforeDecoding() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        // Not JSON after the array, and alg none: the decoder would answer invalid_jws or
        // unsupported_algorithm; the scan answers first.
        let body = Self.body(header: #"{"alg":"none","x5c":"# + Self.x5c(4) + ", !!")
        try await bed.application(ledger, catalog: .freeOnly).test(.router) { client in
            let response = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: body))
            #expect(response.status == .badRequest)
            #expect(response.errorCode == "invalid_chain_length", "\(String(buffer: response.body))")
        }
    }
}

/// Unpadded base64url, as JWS segments are written.
enum JWSBase64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
