/// A request as the fake received it, for tests that check what a client sent.
public struct RecordedRequest: Sendable, CustomStringConvertible {
    /// The `Request-Id` the fake answered with.
    public let requestID: String
    public let method: String
    public let path: String
    /// The raw query string, without `?`.
    public let query: String?
    /// Query (GET, DELETE) or form body (POST) parameters; nil when they could not be read.
    public let parameters: FormValue?
    /// The raw body.
    public let body: [UInt8]
    /// Every header, names lowercased, in the order received.
    public let headers: [(name: String, value: String)]
    public let idempotencyKey: String?
    public let stripeVersion: String?
    /// The `Stripe-Account` header.
    public let account: String?
    /// The fake clock when it arrived.
    public let receivedAt: Int64
    /// The injected fault it met, if any.
    public internal(set) var fault: String?

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }

    public var description: String {
        "\(method) \(path)\(query.map { "?\($0)" } ?? "")\(fault.map { " [\($0)]" } ?? "")"
    }
}
