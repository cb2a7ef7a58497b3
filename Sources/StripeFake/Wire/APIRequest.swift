import HTTPTypes
import NIOCore

/// A request that passed authentication and parameter decoding, as the store's operations read it.
struct APIRequest: Sendable {
    let method: HTTPRequest.Method
    let path: String
    let parameters: FormValue
    /// The connected account from `Stripe-Account`, nil for the platform.
    let account: String?
    let requestID: String
    let idempotencyKey: String?
    let apiVersion: String?
    /// The `:id` of the route, e.g. the customer id of `/v1/customers/:id`.
    var id: String = ""

    /// Where events this request causes say they came from.
    var origin: EventOrigin {
        EventOrigin(requestID: requestID, idempotencyKey: idempotencyKey, apiVersion: apiVersion)
    }

    /// The parameters as a top-level object.
    func form() throws(StripeAPIError) -> FormParameters { try FormParameters(parameters) }

    /// The `expand[]` paths.
    func expand() throws(StripeAPIError) -> [String] { try form().strings("expand") ?? [] }
}

/// An answer from the store: a status and a JSON body.
struct APIResponse: Sendable {
    var status: HTTPResponse.Status = .ok
    var body: ByteBuffer
    /// Set on an idempotent replay: the request that first got this answer.
    var replayedFrom: String?

    init(status: HTTPResponse.Status = .ok, body: ByteBuffer, replayedFrom: String? = nil) {
        self.status = status
        self.body = body
        self.replayedFrom = replayedFrom
    }

    init(status: HTTPResponse.Status = .ok, bytes: [UInt8]) {
        self.init(status: status, body: ByteBuffer(bytes: bytes))
    }

    init(_ value: JSONValue) { self.init(bytes: value.serialized()) }
}

/// The request behind an event's `request` member and its `api_version`.
struct EventOrigin: Sendable {
    var requestID: String?
    var idempotencyKey: String?
    var apiVersion: String?

    /// A change made by a test helper or by Stripe itself, not by an API request.
    static let automatic = EventOrigin()
}
