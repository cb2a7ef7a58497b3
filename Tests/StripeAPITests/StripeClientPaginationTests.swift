import APITransport
import Foundation
import StripeAPI
import Testing

@Suite("StripeClient: list pagination")
struct StripeClientPaginationTests {
    typealias Fixture = ClientFixture

    static func page(_ ids: [String], hasMore: Bool, requestID: String = "req_page") -> ScriptedTransport.Answer {
        let objects = ids.map { #"{"id":"\#($0)","object":"customer","metadata":{"data":"x"}}"# }
        return .json(
            #"{"object":"list","url":"/v1/customers","has_more":\#(hasMore),"data":[\#(objects.joined(separator: ","))]}"#,
            requestID: requestID, headers: ["Date": "Wed, 21 Oct 2015 07:28:00 GMT"]
        )
    }

    static func query(_ request: HTTPTransportRequest) -> [String: String] {
        let components = URLComponents(string: request.url)
        return Dictionary((components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { $1 }
    }

    @Test("Pages follow starting_after=<last id> while has_more, with limit=100 and the caller's parameters")
    func followsStartingAfter() async throws {
        let transport = ScriptedTransport([
            Self.page(["cus_1", "cus_2"], hasMore: true, requestID: "req_p1"), Self.page(["cus_3"], hasMore: true),
            Self.page(["cus_4", "cus_5"], hasMore: false, requestID: "req_p3"),
        ])
        let client = Fixture.client(transport)
        var pages: [StripeListPage] = []
        for try await page in client.list("/v1/customers", parameters: ["created": ["gte": 1_700_000_000], "email": "a b"]) {
            pages.append(page)
        }
        #expect(pages.map { $0.objects.map(\.id) } == [["cus_1", "cus_2"], ["cus_3"], ["cus_4", "cus_5"]])
        #expect(pages.map(\.hasMore) == [true, true, false])
        #expect(pages.first?.requestID == "req_p1")
        #expect(pages.last?.requestID == "req_p3")
        #expect(pages.allSatisfy { $0.date == 1_445_412_480 })
        let first = try #require(pages.first?.objects.first)
        #expect(String(decoding: first.bytes, as: UTF8.self) == #"{"id":"cus_1","object":"customer","metadata":{"data":"x"}}"#)

        let requests = transport.requests
        try #require(requests.count == 3)
        #expect(requests.allSatisfy { $0.method == .get && $0.url.hasPrefix("https://api.stripe.test/v1/customers?") })
        #expect(Self.query(requests[0]) == ["created[gte]": "1700000000", "email": "a b", "limit": "100"])
        #expect(Self.query(requests[1]) == ["created[gte]": "1700000000", "email": "a b", "limit": "100", "starting_after": "cus_2"])
        #expect(Self.query(requests[2])["starting_after"] == "cus_3")
    }

    @Test("has_more false on the first page makes one request; the caller's limit is kept")
    func singlePage() async throws {
        let transport = ScriptedTransport([Self.page(["evt_1"], hasMore: false)])
        var count = 0
        for try await page in Fixture.client(transport).list("/v1/events", parameters: ["limit": 10, "type": "invoice.paid"]) {
            count += page.objects.count
        }
        #expect(count == 1)
        #expect(transport.requests.count == 1)
        #expect(Self.query(transport.requests[0]) == ["limit": "10", "type": "invoice.paid"])
    }

    @Test("Pages are fetched only when asked for")
    func lazy() async throws {
        let transport = ScriptedTransport([Self.page(["cus_1"], hasMore: true), Self.page(["cus_2"], hasMore: false)])
        var iterator = Fixture.client(transport).list("/v1/customers").makeAsyncIterator()
        #expect(transport.requests.isEmpty)
        _ = try await iterator.next()
        #expect(transport.requests.count == 1)
        _ = try await iterator.next()
        #expect(transport.requests.count == 2)
        #expect(try await iterator.next() == nil)
        #expect(transport.requests.count == 2)
    }

    @Test("Paging backwards with ending_before continues from each page's first id")
    func endingBefore() async throws {
        let transport = ScriptedTransport([Self.page(["cus_8", "cus_7"], hasMore: true), Self.page(["cus_6"], hasMore: false)])
        var ids: [String] = []
        for try await page in Fixture.client(transport).list("/v1/customers", parameters: ["ending_before": "cus_9"]) {
            ids += page.objects.map(\.id)
        }
        #expect(ids == ["cus_8", "cus_7", "cus_6"])
        #expect(Self.query(transport.requests[1])["ending_before"] == "cus_8")
        #expect(Self.query(transport.requests[1])["starting_after"] == nil)
    }

    @Test("Search results continue with page=<next_page>")
    func searchPages() async throws {
        let transport = ScriptedTransport([
            .json(#"{"object":"search_result","data":[{"id":"cus_1"}],"has_more":true,"next_page":"WzE3MDAwXQ=="}"#),
            .json(#"{"object":"search_result","data":[{"id":"cus_2"}],"has_more":false,"next_page":null}"#),
        ])
        var ids: [String] = []
        for try await page in Fixture.client(transport).list("/v1/customers/search", parameters: ["query": "email:'a@b.c'"]) {
            ids += page.objects.map(\.id)
        }
        #expect(ids == ["cus_1", "cus_2"])
        #expect(Self.query(transport.requests[1])["page"] == "WzE3MDAwXQ==")
        #expect(Self.query(transport.requests[1])["starting_after"] == nil)
    }

    @Test("A malformed list answer throws .decoding; an HTTP error is thrown as is")
    func malformed() async throws {
        let transport = ScriptedTransport([.json(#"{"object":"list","data":[{"id":"cus_1"},"#, requestID: "req_trunc")])
        let error = try await #require(throws: StripeError.self) {
            for try await _ in Fixture.client(transport).list("/v1/customers") {}
        }
        #expect(error.kind == .decoding)
        #expect(error.requestID == "req_trunc")
        #expect(error.path == "/v1/customers")

        let missing = ScriptedTransport([.stripeError(404, type: "invalid_request_error", code: "resource_missing")])
        let notFound = try await #require(throws: StripeError.self) {
            for try await _ in Fixture.client(missing).list("/v1/customers/cus_x/payment_methods") {}
        }
        #expect(notFound.kind == .notFound)
    }

    @Test("has_more with no id to continue from is an error, not a loop")
    func noCursor() async throws {
        let transport = ScriptedTransport([.json(#"{"data":[{"object":"thing"}],"has_more":true}"#)])
        let error = try await #require(throws: StripeError.self) {
            for try await _ in Fixture.client(transport).list("/v1/things") {}
        }
        #expect(error.kind == .decoding)
        #expect(transport.requests.count == 1)
    }

    @Test("Lists are sent at bulk priority unless told otherwise")
    func bulkPriority() async throws {
        let clock = ManualClock()
        let limiter = RequestRateLimiter(requestsPerSecond: 1, clock: clock)
        let transport = ScriptedTransport([.json(), .json(), Self.page(["cus_1"], hasMore: false)])
        let observer = RecordingObserver()
        let client = StripeClient(
            configuration: Fixture.configuration(), transport: transport, observer: observer, rateLimiter: limiter,
            sleep: { _ in }
        )
        _ = try await client.send(.get, "/v1/events")  // takes the only token
        let listing = Task { for try await _ in client.list("/v1/customers") {} }
        await eventually("the list to wait for a token") { await limiter.waiting(.bulk) == 1 }
        let single = Task { _ = try await client.send(.get, "/v1/balance") }
        await eventually("the interactive call to wait") { await limiter.waiting(.interactive) == 1 }
        clock.advance(by: .seconds(1))
        try await single.value
        #expect(transport.requests.count == 2, "the interactive call went first")
        #expect(transport.requests.last?.url.hasSuffix("/v1/balance") == true)
        clock.advance(by: .seconds(1))
        try await listing.value
        #expect(observer.waits.map(\.0) == [.interactive, .bulk])
        #expect(observer.waits.map(\.1) == [.seconds(1), .seconds(2)])
    }
}

@Suite("StripeClient: list scanner")
struct StripeClientListScannerTests {
    static func scan(_ text: String) throws(StripeError) -> StripeListPage {
        try StripeListPage(response: StripeResponse(status: 200, body: Array(text.utf8), path: "/v1/things"))
    }

    @Test("Each element's exact bytes and top-level id are found in tricky JSON")
    func trickyJSON() throws {
        let elements = [
            #"{ "customer" : {"id":"cus_inner","data":[{"id":"nope"}]}, "id" : "sub_1", "note":"a \"quoted\" }{ ] [ brace" }"#,
            #"{"id":"cus_\u0041\u00e9\ud83d\ude00","description":"slash \\\" and \\ and \/","data":{"object":"list","data":[1,2]}}"#,
            #"{"metadata":{"id":"meta"},"items":{"object":"list","data":[{"id":"si_1"}],"has_more":true},"id":"in_3","amount":-1.5e+3,"x":null,"y":false}"#,
            #"{}"#,
        ]
        let body = #"""
            {
              "object": "list",
              "url": "/v1/things?data=[\"x\"]",
              "has_more" : true,
              "meta": {"data": [{"id": "trap"}], "has_more": false},
              "data" : [
                \#(elements.joined(separator: " ,\n    "))
              ]
            }
            """#
        let page = try Self.scan(body)
        #expect(page.objects.map(\.id) == ["sub_1", "cus_Aé😀", "in_3", ""])
        #expect(page.objects.map { String(decoding: $0.bytes, as: UTF8.self) } == elements)
        #expect(page.hasMore)
        for object in page.objects.prefix(3) {
            #expect((try? JSONSerialization.jsonObject(with: Data(object.bytes))) != nil, "each slice is valid JSON on its own")
        }
    }

    @Test("An escaped key still names data, has_more and id")
    func escapedKeys() throws {
        let page = try Self.scan(#"{"d\u0061ta":[{"\u0069d":"cus_1"}],"has\u005fmore":true}"#)
        #expect(page.objects.map(\.id) == ["cus_1"])
        #expect(page.hasMore)
    }

    @Test("An empty list and a list without has_more")
    func emptyList() throws {
        let page = try Self.scan(#"{"object":"list","data":[],"has_more":false}"#)
        #expect(page.objects.isEmpty)
        #expect(!page.hasMore)
        #expect(try !Self.scan(#"{"data":[{"id":"x"}]}"#).hasMore)
    }

    @Test("Malformed lists throw .decoding", arguments: [
        "", "[]", "null", "{", #"{"object":"list"}"#, #"{"data":{}}"#, #"{"data":[1,2]}"#, #"{"data":["cus_1"]}"#,
        #"{"data":[{"id":"cus_1"}],"has_more":"yes"}"#, #"{"data":[{"id":"cus_1"]}"#, #"{"data":[{"id":"cus_1}]}"#,
        #"{"data":[{"id":"cus_\x"}]}"#, #"{"data":[{"id":"cus_\ud83d"}]}"#, #"{"data":[{"id":"a"}]} trailing"#,
        #"{"data":[{"id":"a"}],}"#, #"{"data":[{"id":"a"},]}"#, #"{"data":[{"id":"a","n":tru}]}"#,
        "{\"data\":[{\"id\":\"a\nb\"}]}", String(repeating: "[", count: 2000), #"{"data":[{"a":"#
            + String(repeating: "[", count: 2000) + "]}",
    ])
    func malformed(text: String) {
        #expect(throws: StripeError.self) { try Self.scan(text) }
        do {
            _ = try Self.scan(text)
        } catch {
            #expect(error.kind == .decoding)
            #expect(error.message.contains("at byte"))
        }
    }

    @Test("A 2,000-object page is split without decoding the objects")
    func largePage() throws {
        let object = #"{"id":"cus_%05d","object":"customer","metadata":{"k":"v \"q\""},"list":{"data":[{"id":"x"}]}}"#
        let objects = (0..<2000).map { String(format: object, $0) }
        let page = try Self.scan(#"{"object":"list","data":[\#(objects.joined(separator: ","))],"has_more":false}"#)
        #expect(page.objects.count == 2000)
        #expect(page.objects.last?.id == "cus_01999")
        #expect(String(decoding: page.objects[1234].bytes, as: UTF8.self) == objects[1234])
    }
}
