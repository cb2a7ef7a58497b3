import BillingCommands
import BillingServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

@Suite("Rejected requests: one log line per cause and interval, every one counted (issue 39)")
struct RejectionLogTests {
    /// The captured lines, one per entry.
    static func lines(_ log: CapturedLog) -> [Substring] {
        log.text.split(separator: "\n")
    }

    @Test("40 badly signed webhooks, 40 service API calls without a token and 40 with a wrong one write one line each and one summary each; the metrics count all 40")
    func flood() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let log = CapturedLog()
        let logger = log.logger(format: .text)
        let metrics = BillingMetrics()
        var dependencies = makeDependencies(ledger, metrics: metrics)
        dependencies.apiTokens = ["tok_service_0123456789abcdef"]
        let rejections = RejectionLog(interval: .seconds(3600), logger: logger)
        dependencies.rejections = rejections
        let app = BillingApplication.application(dependencies, host: "127.0.0.1", port: 0, logger: logger)
        let body = eventBody(id: "evt_flood", type: "customer.updated")
        try await app.test(.router) { client in
            var wrongToken = HTTPFields()
            wrongToken[.authorization] = "Bearer tok_guess_0123456789abcdef"
            for _ in 0..<40 {
                try await client.execute(
                    uri: "/webhooks/stripe", method: .post, headers: signedHeaders(body, secret: "whsec_not_the_secret_0123"),
                    body: ByteBuffer(bytes: body)
                ) { #expect($0.status == .badRequest) }
                try await client.execute(uri: "/v1/users/user_1/subscription", method: .get) { #expect($0.status == .unauthorized) }
                try await client.execute(uri: "/v1/users/user_1/subscription", method: .get, headers: wrongToken) {
                    #expect($0.status == .unauthorized)
                }
            }
        }
        rejections.flush()
        let lines = Self.lines(log)
        for (message, reason) in [
            ("webhook rejected", "signature_mismatch"), ("service API request refused", "authorization_missing"),
            ("service API request refused", "authorization_rejected"),
        ] {
            let full = lines.filter { $0.contains(message) && $0.contains("reason=\(reason)") && !$0.contains("more not logged") }
            #expect(full.count == 1, "\(message) \(reason): \(full)")
            let summaries = lines.filter { $0.contains("\(message): 39 more not logged") && $0.contains("reason=\(reason)") }
            #expect(summaries.count == 1, "\(message) \(reason): \(lines)")
        }
        let samples = try PrometheusText.parse(String(decoding: metrics.render(), as: UTF8.self))
        #expect(samples[#"billingd_webhook_deliveries_total{outcome="bad_signature",type="unknown"}"#] == 40)
        #expect(samples[#"billingd_service_api_unauthorized_total{authorization="missing"}"#] == 40)
        #expect(samples[#"billingd_service_api_unauthorized_total{authorization="rejected"}"#] == 40)
    }

    @Test("A cause with no rejection for a whole interval is forgotten: its next rejection is logged in full again")
    func quietCauseLogsAgain() {
        let log = CapturedLog()
        let logger = log.logger(format: .text)
        let rejections = RejectionLog(interval: .seconds(3600), logger: logger)
        rejections.notice("webhook rejected", reason: "malformed", metadata: [:], to: logger)
        rejections.notice("webhook rejected", reason: "malformed", metadata: [:], to: logger)
        rejections.flush()  // one summary: 1 more
        rejections.flush()  // nothing more: forgotten
        rejections.notice("webhook rejected", reason: "malformed", metadata: [:], to: logger)
        let lines = Self.lines(log)
        #expect(lines.filter { $0.contains("webhook rejected") && !$0.contains("more not logged") }.count == 2, "\(lines)")
        #expect(lines.filter { $0.contains("webhook rejected: 1 more not logged") }.count == 1, "\(lines)")
    }
}
