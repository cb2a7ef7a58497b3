import BillingCore
import BillingStore
import Foundation
import Hummingbird
import NIOCore

/// The revenue metrics API, `GET /v1/metrics/overview|movement|churn|trials|revenue|series`, for
/// operators and finance behind a console token (``ConsoleTokenMiddleware``). It is off — its
/// routes are not registered — when no console token is configured (`BILLINGD_CONSOLE_TOKENS`).
/// Instants are Unix seconds; a missing or malformed parameter is a 400 that names it.
public struct MetricsController: Sendable {
    public struct Configuration: Sendable {
        public var tokens: [ConsoleToken]
        /// The app's tokens, refused here with 403.
        public var serviceTokens: [String]
        public var reader: RevenueMetricsReader.Configuration

        public init(tokens: [ConsoleToken], serviceTokens: [String], reader: RevenueMetricsReader.Configuration) {
            self.tokens = tokens
            self.serviceTokens = serviceTokens
            self.reader = reader
        }
    }

    let facts: any MetricsFactStore
    let configuration: Configuration
    let metrics: BillingMetrics
    let rejections: RejectionLog

    public init(facts: any MetricsFactStore, configuration: Configuration, metrics: BillingMetrics, rejections: RejectionLog) {
        self.facts = facts
        self.configuration = configuration
        self.metrics = metrics
        self.rejections = rejections
    }

    /// The latest instant taken: the end of year 9999.
    public static let latestInstant: Int64 = 253_402_300_799

    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        guard !configuration.tokens.isEmpty else { return }
        let group = router.group("v1/metrics").add(
            middleware: ConsoleTokenMiddleware<Context>(
                tokens: configuration.tokens, serviceTokens: configuration.serviceTokens, metrics: metrics, rejections: rejections))
        let reader = RevenueMetricsReader(facts: facts, configuration: configuration.reader)
        group.get("overview") { request, _ in
            let query = try Query(request, allowed: ["at"])
            let at = try query.instant("at") ?? Int64(reader.configuration.now().timeIntervalSince1970)
            return Self.json(MetricsJSON.overview(try await reader.overview(at: at)))
        }
        group.get("movement") { request, _ in
            let range = try Query(request, allowed: ["from", "to"]).range()
            return Self.json(MetricsJSON.movement(try await reader.movement(range), range: range))
        }
        group.get("churn") { request, _ in
            let range = try Query(request, allowed: ["from", "to"]).range()
            return Self.json(MetricsJSON.churn(try await reader.churn(range)))
        }
        group.get("trials") { request, _ in
            let range = try Query(request, allowed: ["from", "to"]).range()
            return Self.json(MetricsJSON.trials(try await reader.trials(range)))
        }
        group.get("revenue") { request, _ in
            let query = try Query(request, allowed: ["from", "to", "interval"])
            let range = try query.range()
            let interval = try query.interval() ?? .month
            try Self.checked { () throws(MetricsParameterError) in try reader.checkPoints(range, interval: interval, series: false) }
            return Self.json(MetricsJSON.revenue(try await reader.revenue(range, interval: interval)))
        }
        group.get("series") { request, _ in
            let query = try Query(request, allowed: ["metric", "from", "to", "interval"])
            guard let name = try query.single("metric") else { throw Self.invalid("metric", "metric is missing: give mrr, active_subscriptions or active_trials.") }
            guard let metric = MetricsSeriesMetric(rawValue: name) else {
                throw Self.invalid("metric", "metric=\(UserRequest.printable(name)) is not a series: give mrr, active_subscriptions or active_trials.")
            }
            let range = try query.range()
            let interval = try query.interval() ?? .month
            try Self.checked { () throws(MetricsParameterError) in try reader.checkPoints(range, interval: interval, series: true) }
            return Self.json(MetricsJSON.series(try await reader.series(range, interval: interval), metric: metric))
        }
    }

    static func json(_ object: [String: Any]) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: MetricsJSON.data(object))))
    }

    /// A 400 `invalid_parameter` naming `parameter`.
    static func invalid(_ parameter: String, _ message: String) -> APIError {
        APIError(.badRequest, code: "invalid_parameter", message: message, extra: ["parameter": parameter])
    }

    static func checked(_ body: () throws(MetricsParameterError) -> Void) throws(APIError) {
        do { try body() } catch { throw invalid(error.parameter, error.message) }
    }

    /// A request's query: only the parameters of its endpoint, each at most once and not empty.
    struct Query {
        let parameters: Parameters

        init(_ request: Request, allowed: Set<Substring>) throws(APIError) {
            parameters = request.uri.queryParameters
            for (name, _) in parameters where !allowed.contains(name) {
                throw APIError(
                    .badRequest, code: "unknown_parameter",
                    message: "Unknown query parameter \"\(UserRequest.printable(name))\"; this endpoint takes \(allowed.sorted().joined(separator: ", ")).",
                    extra: ["parameter": UserRequest.printable(name)])
            }
        }

        func single(_ name: Substring) throws(APIError) -> String? {
            let values = parameters[values: name]
            guard values.count <= 1 else { throw MetricsController.invalid(String(name), "Give \(name) at most once.") }
            guard let value = values.first else { return nil }
            guard !value.isEmpty else { throw MetricsController.invalid(String(name), "\(name) is empty: give it a value, or leave it out.") }
            return String(value)
        }

        /// Unix seconds, from 0 to the end of year 9999.
        func instant(_ name: Substring) throws(APIError) -> Int64? {
            guard let text = try single(name) else { return nil }
            guard let seconds = Int64(text), (0...MetricsController.latestInstant).contains(seconds) else {
                throw MetricsController.invalid(
                    String(name), "\(name)=\(UserRequest.printable(text)) is not an instant: give Unix seconds (0 to \(MetricsController.latestInstant)).")
            }
            return seconds
        }

        /// `from` and `to`, both required, `from` before `to`.
        func range() throws(APIError) -> MetricsRange {
            guard let from = try instant("from") else { throw MetricsController.invalid("from", "from is missing: give the start of the range in Unix seconds.") }
            guard let to = try instant("to") else { throw MetricsController.invalid("to", "to is missing: give the end of the range (exclusive) in Unix seconds.") }
            do { return try MetricsRange(from: from, to: to) } catch { throw MetricsController.invalid(error.parameter, error.message) }
        }

        func interval() throws(APIError) -> MetricsInterval? {
            guard let text = try single("interval") else { return nil }
            guard let interval = MetricsInterval(rawValue: text) else {
                throw MetricsController.invalid("interval", "interval=\(UserRequest.printable(text)) is not an interval: give day, week or month.")
            }
            return interval
        }
    }
}
