import HTTPTypes
import NIOCore

/// All of the fake's state: accounts with their objects and events, recorded requests, armed
/// faults and the webhook delivery queue.
///
/// Every API operation runs as one synchronous step on this actor, so that an operation never
/// sees another half done, and concurrent requests under one idempotency key never both execute.
actor FakeStore {
    /// An API operation: reads the request, changes state, answers; one of the resource files' methods.
    typealias Operation = @Sendable (isolated FakeStore, APIRequest) throws -> APIResponse

    let clock: FakeClock
    let ids = IDGenerator()
    /// `api_version` of events caused without a `Stripe-Version` header.
    let defaultAPIVersion: String
    private var accounts: [String: AccountState] = [:]

    /// Requests kept for introspection, oldest first; nil when recording is off.
    private var recorded: [RecordedRequest]?
    private static let recordedLimit = 200_000
    private var faults: [ArmedFault] = []

    var webhookEndpoint: WebhookEndpoint?
    /// The fake's own address when it serves the hosted pages (``StripeFake/Configuration/hostedPages``):
    /// Checkout and portal URLs then point at it instead of stripe.com.
    var hostedPagesBase: String?
    /// The `return_url` of each portal session, for its hosted page.
    var portalReturnURLs: [String: String] = [:]
    var deliveryPolicy = WebhookDeliveryPolicy()
    /// Events waiting to be sent, oldest first.
    var deliveryQueue: [QueuedDelivery] = []
    var deliveryStatuses: [String: DeliveryStatus] = [:]
    var deliveriesInFlight = 0
    /// Wakes the delivery task when events are queued or the policy changes.
    nonisolated let deliveryWakeups: AsyncStream<Void>
    let wakeDelivery: AsyncStream<Void>.Continuation

    init(clock: FakeClock, defaultAPIVersion: String, webhookEndpoint: WebhookEndpoint?, recordsRequests: Bool) {
        self.clock = clock
        self.defaultAPIVersion = defaultAPIVersion
        self.webhookEndpoint = webhookEndpoint
        self.recorded = recordsRequests ? [] : nil
        (deliveryWakeups, wakeDelivery) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The state of an account, created on first use; nil and "" are the platform account.
    func account(_ id: String?) -> AccountState {
        let key = id ?? ""
        if let state = accounts[key] { return state }
        let state = AccountState(account: key.isEmpty ? nil : key)
        accounts[key] = state
        return state
    }

    // MARK: - Running operations

    /// Runs `operation`, replaying the saved answer for a repeated `Idempotency-Key`.
    func perform(_ request: APIRequest, _ operation: Operation) throws -> APIResponse {
        guard request.method == .post, let key = request.idempotencyKey else { return try operation(self, request) }
        let account = account(request.account)
        let fingerprint = "\(request.method.rawValue) \(request.path) \(request.parameters)"
        let now = clock.now
        // Stripe forgets keys after 24 hours.
        if let saved = account.idempotentResults[key], now - saved.created < 24 * 3600 {
            guard saved.fingerprint == fingerprint else { throw StripeAPIError.idempotencyConflict(key) }
            return APIResponse(
                status: HTTPResponse.Status(code: saved.status), body: ByteBuffer(bytes: saved.body),
                replayedFrom: saved.requestID)
        }
        // Errors are not saved: a request that failed validation may be retried under the same key.
        let response = try operation(self, request)
        account.idempotentResults[key] = IdempotentResult(
            fingerprint: fingerprint, status: response.status.code, body: Array(buffer: response.body),
            requestID: request.requestID, created: now)
        return response
    }

    // MARK: - Objects

    /// Stores `object` (its `id` and `created` members) as the current state of that object.
    @discardableResult
    func save(_ object: JSONValue, as kind: ObjectKind, in account: AccountState) -> StoredObject {
        let stored = StoredObject(
            id: object["id"]?.stringValue ?? "", created: object["created"]?.intValue ?? clock.now,
            json: object.serialized(), fields: kind.indexedFields(of: object))
        account[kind].put(stored)
        return stored
    }

    /// The object `id` of `kind`, or Stripe's 404 (400 with `param` when a parameter named it).
    func existing(
        _ kind: ObjectKind, _ id: String, in account: AccountState, param: String? = nil
    )
        throws(StripeAPIError) -> StoredObject
    {
        guard let object = account[kind][id] else { throw .noSuch(kind, id, param: param) }
        return object
    }

    /// The answer for one object, with `expand[]` applied.
    func respond(
        with object: StoredObject, to request: APIRequest, in account: AccountState
    ) throws(StripeAPIError)
        -> APIResponse
    {
        let expand = try request.expand()
        guard !expand.isEmpty else { return APIResponse(bytes: object.json) }
        return APIResponse(bytes: try expanded(object.json, paths: expand, in: account))
    }

    /// A list envelope around a page: `{"object":"list","data":[…],"has_more":…,"url":…}`.
    func respond(
        with page: Page, url: String, to request: APIRequest, in account: AccountState
    )
        throws(StripeAPIError) -> APIResponse
    {
        let expand = try request.expand().compactMap { path in
            path.hasPrefix("data.") ? String(path.dropFirst("data.".count)) : nil
        }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(page.objects.reduce(64 + url.utf8.count) { $0 + $1.json.count + 1 })
        buffer.writeString(#"{"object":"list","data":["#)
        for (index, object) in page.objects.enumerated() {
            if index > 0 { buffer.writeInteger(UInt8(ascii: ",")) }
            if expand.isEmpty {
                buffer.writeBytes(object.json)
            } else {
                buffer.writeBytes(try expanded(object.json, paths: expand, in: account))
            }
        }
        buffer.writeString(#"],"has_more":\#(page.hasMore),"url":"#)
        var urlBytes: [UInt8] = []
        JSONValue.writeString(url, into: &urlBytes)
        buffer.writeBytes(urlBytes)
        buffer.writeString("}")
        return APIResponse(body: buffer)
    }

    // MARK: - Events

    /// Appends an event for a change and queues it for the webhook endpoint.
    /// - Parameters:
    ///   - object: the JSON bytes of `data.object`, the full object after the change.
    ///   - previous: `data.previous_attributes`, the changed members' old values.
    @discardableResult
    func emit(
        _ type: String, object: [UInt8], previous: JSONValue? = nil, in account: AccountState, origin: EventOrigin,
        created: Int64? = nil
    ) -> String {
        let id = ids.make(.event)
        let created = created ?? clock.now
        var bytes: [UInt8] = []
        bytes.reserveCapacity(object.count + 400)
        func member(_ name: String, _ value: JSONValue) {
            JSONValue.writeString(name, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            value.write(into: &bytes)
            bytes.append(UInt8(ascii: ","))
        }
        bytes.append(UInt8(ascii: "{"))
        if let connected = account.account { member("account", .string(connected)) }
        member("api_version", .string(origin.apiVersion ?? defaultAPIVersion))
        member("created", .int(created))
        bytes.append(contentsOf: #""data":{"object":"#.utf8)
        bytes.append(contentsOf: object)
        if let previous {
            bytes.append(contentsOf: #","previous_attributes":"#.utf8)
            previous.write(into: &bytes)
        }
        bytes.append(contentsOf: "},".utf8)
        member("id", .string(id))
        member("livemode", false)
        member("object", "event")
        member("pending_webhooks", .int(webhookEndpoint == nil ? 0 : 1))
        member("request", ["id": JSONValue(origin.requestID), "idempotency_key": JSONValue(origin.idempotencyKey)])
        JSONValue.writeString("type", into: &bytes)
        bytes.append(UInt8(ascii: ":"))
        JSONValue.writeString(type, into: &bytes)
        bytes.append(UInt8(ascii: "}"))

        var fields = IndexedFields()
        fields.type = type
        account[.event].put(StoredObject(id: id, created: created, json: bytes, fields: fields))
        enqueueDelivery(eventID: id, type: type, body: bytes)
        return id
    }

    /// Stores `object` and emits `type` for it, with the members that changed since `old`.
    @discardableResult
    func saveAndEmit(
        _ type: String, _ object: JSONValue, as kind: ObjectKind, old: JSONValue? = nil, in account: AccountState,
        origin: EventOrigin
    ) -> StoredObject {
        let stored = save(object, as: kind, in: account)
        emit(
            type, object: stored.json, previous: old.flatMap { object.previousAttributes(comparedTo: $0) }, in: account,
            origin: origin)
        return stored
    }

    // MARK: - Introspection and faults

    /// Records a request and returns the fault it meets, if any (which then fires one time less).
    func receive(_ request: RecordedRequest) -> Fault? {
        var request = request
        var fault: Fault?
        if let index = faults.firstIndex(where: { $0.matcher.matches(method: request.method, path: request.path) }) {
            fault = faults[index].fault
            faults[index].remaining -= 1
            if faults[index].remaining <= 0 { faults.remove(at: index) }
            request.fault = fault?.description
        }
        if recorded != nil {
            recorded!.append(request)
            if recorded!.count > Self.recordedLimit + Self.recordedLimit / 10 {
                recorded!.removeFirst(recorded!.count - Self.recordedLimit)
            }
        }
        return fault
    }

    var requests: [RecordedRequest] { recorded ?? [] }

    func resetRequests() {
        if recorded != nil { recorded = [] }
    }

    func arm(_ fault: Fault, times: Int, matching matcher: RequestMatcher) {
        faults.append(ArmedFault(fault: fault, matcher: matcher, remaining: times))
    }

    func clearFaults() { faults.removeAll() }

    /// Faults still waiting, with how many times each will fire.
    var armedFaults: [(fault: Fault, matcher: RequestMatcher, remaining: Int)] {
        faults.map { ($0.fault, $0.matcher, $0.remaining) }
    }
}
