extension AppStoreFake {
    /// A failure the fake answers with instead of (or before) the real answer, for testing a
    /// client's retries, timeouts and error handling:
    /// `fake.inject(.status(429, retryAfter: 1), times: 2, matching: .path("/inApps/v1/subscriptions"))`.
    public struct Fault: Sendable, CustomStringConvertible {
        enum Effect: Sendable {
            case error(APIError)
            case delay(Duration)
            case dropConnection
        }

        let effect: Effect

        /// Answers with `code` and Apple's body for it (429 → 4290000, 500 → 5000000, 401 empty …).
        /// - Parameters:
        ///   - retryAfter: seconds, sent as `Retry-After`.
        public static func status(_ code: Int, retryAfter: Int? = nil) -> Fault {
            Fault(effect: .error(.forStatus(code, retryAfter: retryAfter)))
        }

        /// Answers with this exact Apple error, e.g. `.error(.accountNotFoundRetryable)`.
        public static func error(_ error: APIError) -> Fault { Fault(effect: .error(error)) }

        /// Waits this long, then answers normally.
        public static func delay(_ duration: Duration) -> Fault { Fault(effect: .delay(duration)) }

        /// Closes the TCP connection without answering; the client sees a transport error.
        public static let dropConnection = Fault(effect: .dropConnection)

        public var description: String {
            switch effect {
            case .error(let error): "error(\(error))"
            case .delay(let duration): "delay(\(duration))"
            case .dropConnection: "dropConnection"
            }
        }
    }

    /// Which requests a fault or a look at ``AppStoreFake/requests(matching:)`` applies to: a
    /// method and a path prefix, either optional.
    public struct RequestMatcher: Sendable, CustomStringConvertible {
        /// `GET`, `POST`; nil for any.
        public var method: String?
        /// A prefix of the path (`/inApps/v1/subscriptions` also takes `/inApps/v1/subscriptions/2000…`); nil for any.
        public var pathPrefix: String?

        public init(method: String? = nil, pathPrefix: String? = nil) {
            self.method = method?.uppercased()
            self.pathPrefix = pathPrefix
        }

        public static let any = RequestMatcher()

        public static func path(_ prefix: String, method: String? = nil) -> RequestMatcher {
            RequestMatcher(method: method, pathPrefix: prefix)
        }

        public func matches(method: String, path: String) -> Bool {
            (self.method == nil || self.method == method.uppercased()) && (pathPrefix.map { path.hasPrefix($0) } ?? true)
        }

        public var description: String { "\(method ?? "*") \(pathPrefix ?? "*")" }
    }
}

/// A fault waiting for requests, with how many more times it fires.
struct ArmedFault: Sendable {
    let fault: AppStoreFake.Fault
    let matcher: AppStoreFake.RequestMatcher
    var remaining: Int
}
