import APITransport
import Foundation
import Logging
import StripeAPI
import Synchronization
import Testing

/// A `HTTPTransport` that records every request and answers from a script, in order.
final class ScriptedTransport: HTTPTransport {
    enum Answer: Sendable {
        case response(HTTPTransportResponse)
        case failure(HTTPTransportError)
    }

    private let state: Mutex<(answers: [Answer], requests: [HTTPTransportRequest])>

    init(_ answers: [Answer] = []) {
        state = Mutex((answers, []))
    }

    func enqueue(_ answers: [Answer]) {
        state.withLock { $0.answers.append(contentsOf: answers) }
    }

    var requests: [HTTPTransportRequest] { state.withLock { $0.requests } }

    func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse {
        let answer = state.withLock { state -> Answer? in
            state.requests.append(request)
            return state.answers.isEmpty ? nil : state.answers.removeFirst()
        }
        switch answer {
        case .response(let response): return response
        case .failure(let error): throw error
        case nil:
            Issue.record("the script has no answer left for \(request.method.rawValue) \(request.url)")
            throw .other("no scripted answer")
        }
    }
}

extension ScriptedTransport.Answer {
    static func json(
        _ body: String = "{}", status: Int = 200, requestID: String? = "req_ok", headers: [String: String] = [:]
    ) -> Self {
        var all = headers
        all["Content-Type"] = "application/json"
        if let requestID { all["Request-Id"] = requestID }
        return .response(HTTPTransportResponse(status: status, headers: all, body: Array(body.utf8)))
    }

    static func stripeError(
        _ status: Int, type: String? = "api_error", code: String? = nil, message: String = "Something went wrong.",
        param: String? = nil, requestID: String = "req_err", headers: [String: String] = [:]
    ) -> Self {
        var fields: [String] = []
        if let type { fields.append(#""type":"\#(type)""#) }
        if let code { fields.append(#""code":"\#(code)""#) }
        if let param { fields.append(#""param":"\#(param)""#) }
        fields.append(#""message":"\#(message)""#)
        return .json(#"{"error":{\#(fields.joined(separator: ","))}}"#, status: status, requestID: requestID, headers: headers)
    }
}

/// Records the waits the client asks for instead of waiting.
final class SleepRecorder: Sendable {
    private let recorded = Mutex<[Duration]>([])

    var delays: [Duration] { recorded.withLock { $0 } }

    func sleep(_ duration: Duration) async throws {
        recorded.withLock { $0.append(duration) }
        try Task.checkCancellation()
    }
}

/// Records everything the client reports.
final class RecordingObserver: StripeClientObserver {
    struct Attempt: Equatable {
        let method: HTTPTransportMethod
        let route: String
        let status: Int?
        let attempt: Int
    }

    private let state = Mutex<(attempts: [Attempt], retries: [(route: String, reason: String, delay: Duration)], waits: [(RequestPriority, Duration)])>(([], [], []))

    var attempts: [Attempt] { state.withLock { $0.attempts } }
    var retries: [(route: String, reason: String, delay: Duration)] { state.withLock { $0.retries } }
    var waits: [(RequestPriority, Duration)] { state.withLock { $0.waits } }

    func stripeRequest(method: HTTPTransportMethod, route: String, status: Int?, attempt: Int, duration: Duration) {
        state.withLock { $0.attempts.append(Attempt(method: method, route: route, status: status, attempt: attempt)) }
    }

    func stripeRetry(method: HTTPTransportMethod, route: String, reason: String, delay: Duration) {
        state.withLock { $0.retries.append((route, reason, delay)) }
    }

    func stripeRateLimitWait(priority: RequestPriority, waited: Duration) {
        state.withLock { $0.waits.append((priority, waited)) }
    }
}

/// A LogHandler that keeps every line, message and metadata rendered, at trace level.
struct CapturingLogHandler: LogHandler {
    final class Lines: Sendable {
        private let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func append(_ line: String) { lines.withLock { $0.append(line) } }
    }

    let lines: Lines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(lines: Lines) { self.lines = lines }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let rendered = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        lines.append("\(event.level) \(event.message) \(rendered)")
    }
}

enum ClientFixture {
    static let apiKey = "sk_test_51NotARealKeyButLongEnoughToSpotX9y8z7"
    static let apiVersion = "2025-03-31.basil"

    static func configuration(maxRetries: Int = 4, baseURL: String = "https://api.stripe.test/") -> StripeClientConfiguration {
        StripeClientConfiguration(
            apiKey: apiKey, baseURL: baseURL, apiVersion: apiVersion, maxRetries: maxRetries, requestsPerSecond: 1_000_000
        )
    }

    /// A client over `transport` whose waits are recorded and whose jitter is always one half.
    static func client(
        _ transport: ScriptedTransport, maxRetries: Int = 4, sleeper: SleepRecorder = SleepRecorder(),
        observer: RecordingObserver? = nil, logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
        configuration: StripeClientConfiguration? = nil
    ) -> StripeClient {
        StripeClient(
            configuration: configuration ?? self.configuration(maxRetries: maxRetries), transport: transport, logger: logger,
            observer: observer, sleep: { try await sleeper.sleep($0) }, random: { 0.5 }
        )
    }
}

/// Waits until `condition` holds, polling; records an issue after `limit`. The limit bounds a
/// wait for progress, not a speed: a whole suite on two loaded cores has been seen to need more
/// than ten seconds for a step that takes milliseconds alone.
func eventually(
    _ what: String, limit: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
}
