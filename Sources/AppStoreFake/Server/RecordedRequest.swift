extension AppStoreFake {
    /// A request as the fake received it, for tests that check what a client sent.
    public struct RecordedRequest: Sendable, CustomStringConvertible {
        public let method: String
        public let path: String
        /// The raw query string, without `?`.
        public let query: String?
        /// Every header, names lowercased, in the order received.
        public let headers: [(name: String, value: String)]
        public let body: [UInt8]
        /// The fake's clock when it arrived, Unix milliseconds.
        public let receivedAt: Int64
        /// The injected fault it met, if any.
        public internal(set) var fault: String?
        /// Why its bearer token was refused; nil when accepted (or a fault answered first).
        public internal(set) var tokenRefusal: TokenRefusal?

        /// The first value of header `name` (case-insensitive).
        public func header(_ name: String) -> String? {
            let lowered = name.lowercased()
            return headers.first { $0.name == lowered }?.value
        }

        /// The token of `Authorization: Bearer …`.
        public var bearerToken: String? {
            guard let value = header("authorization"), value.hasPrefix("Bearer ") else { return nil }
            return String(value.dropFirst("Bearer ".count))
        }

        public var description: String {
            "\(method) \(path)\(query.map { "?\($0)" } ?? "")\(fault.map { " [\($0)]" } ?? "")"
                + (tokenRefusal.map { " [401 \($0)]" } ?? "")
        }
    }
}
