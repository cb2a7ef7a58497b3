import BillingCommands
import BillingCore
import BillingServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// Lines captured from a real LineLogHandler that knows the configured secrets.
final class SecretAwareLog: Sendable {
    private let lines = Mutex<[String]>([])
    var text: String { lines.withLock { $0.joined() } }

    func logger(format: LineLogHandler.Format, secrets: [String]) -> Logger {
        Logger(label: "billingd") { label in
            LineLogHandler(label: label, level: .trace, format: format, secrets: secrets) { line in self.lines.withLock { $0.append(line) } }
        }
    }
}

@Suite("Log lines: no injection (issue 18 item 6)")
struct LogInjectionTests {
    @Test("Control characters in a logged value or message are escaped, so a value can neither forge a line nor a key")
    func textEscapesControlCharacters() throws {
        let log = SecretAwareLog()
        let logger = log.logger(format: .text, secrets: [])
        logger.notice(
            "webhook accepted\nFAKE forged line",
            metadata: [
                "type": "customer.updated\n2026-01-01T00:00:00.000Z ERROR   forged", "event": "evt_nul\u{0}x", "color": "\u{1B}[31mred\u{1B}[0m",
                "csi": "a\u{9B}2Jb", "separator": "a\u{2028}b", "quote": #"a" forged=1"#, "slash": #"C:\path"#,
            ])
        let text = log.text
        #expect(text.filter { $0 == "\n" }.count == 1, "one record, one line: \(text)")
        #expect(!text.unicodeScalars.dropLast().contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x2028 })
        #expect(text.contains(#"webhook accepted\nFAKE forged line"#))
        #expect(text.contains(#"type="customer.updated\n2026-01-01T00:00:00.000Z ERROR   forged""#))
        #expect(text.contains(#"event=evt_nul\u{0}x"#))
        #expect(text.contains(#"color=\u{1B}[31mred\u{1B}[0m"#))
        #expect(text.contains(#"csi=a\u{9B}2Jb"#))
        #expect(text.contains(#"separator=a\u{2028}b"#))
        #expect(text.contains(#"quote="a\" forged=1""#), "a quote cannot end the value early: \(text)")
        #expect(text.contains(#"slash=C:\\path"#))
    }

    @Test("JSON lines keep such values whole and escaped: a NUL does not cut an id")
    func jsonKeepsValuesWhole() throws {
        let log = SecretAwareLog()
        log.logger(format: .json, secrets: []).notice("accepted\nforged", metadata: ["event": "evt_nul\u{0}x", "type": "a\nb"])
        let text = log.text
        #expect(text.filter { $0 == "\n" }.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
        #expect(object["event"] == "evt_nul\u{0}x")
        #expect(object["type"] == "a\nb")
        #expect(object["msg"] == "accepted\nforged")
    }
}

@Suite("Log lines: masking and length (issue 18 item 8)")
struct LogMaskingTests {
    static let token = "tok_service_0123456789abcdef"
    static let card = "4242424242424242"

    @Test("A card number as a path segment, a configured token as a path segment, a card inside an event type, and a 60 KB path never reach the log whole", arguments: LineLogHandler.Format.allCases)
    func masksOverHTTP(format: LineLogHandler.Format) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let log = SecretAwareLog()
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [Self.token]
        let logger = log.logger(format: format, secrets: [testSecret, Self.token])
        let app = BillingApplication.application(dependencies, host: "127.0.0.1", port: 0, logger: logger)
        let long = String(repeating: "a", count: 60_000)
        let typed = eventBody(id: "evt_card_type", type: "customer.\(Self.card).updated")
        try await app.test(.router) { client in
            // Refused for want of a token: the refusal logs the path.
            for path in ["/v1/users/\(Self.card)/subscription", "/v1/users/\(Self.token)/subscription", "/v1/users/\(long)/subscription"] {
                let response = try await client.execute(uri: path, method: .get)
                #expect(response.status == .unauthorized)
            }
            let response = try await client.execute(uri: "/webhooks/stripe", method: .post, headers: signedHeaders(typed), body: ByteBuffer(bytes: typed))
            #expect(response.status == .ok, "an unknown type is stored and acknowledged")
        }
        let text = log.text
        #expect(text.contains("service API request refused"))
        #expect(text.contains("webhook accepted"))
        #expect(!text.contains(Self.card), "a card number leaked")
        #expect(!text.contains(Self.token), "the API token leaked")
        #expect(!text.contains(String(repeating: "a", count: 2_000)), "the 60 KB path is cut")
        for line in text.split(separator: "\n") {
            #expect(line.utf8.count < 4_096, "a line of \(line.utf8.count) bytes")
        }
    }

    @Test("Card numbers are masked wherever they stand; ordinary numbers, ids and spaced groups are kept")
    func cardNumbersAnywhere() {
        for text in [
            "/v1/users/4242424242424242/subscription", "customer.4242424242424242.updated", "evt_4242424242424242x",
            "pan=4242-4242-4242-4242", "n=42424242424242421234567",
        ] {
            let masked = Redaction.mask(text)
            #expect(!masked.contains("4242424242424242") && !masked.contains("4242-4242-4242-4242"), "\(text) → \(masked)")
            #expect(masked.contains("[card number redacted]"), "\(text) → \(masked)")
        }
        let plain = "webhook accepted event=evt_1Q2w type=invoice.paid amount=1944 at=1767225600123 sub=sub_1Sx4 hb.request.id=b1a4c0ffee"
        #expect(Redaction.mask(plain) == plain)
        #expect(Redaction.mask("card 4000 0566 5566 5556").contains("4000 0566"), "spaced groups are separate numbers")
    }

    @Test("Configured secrets are masked wherever they appear, and long values are cut")
    func configuredSecretsAndLength() {
        #expect(Redaction.clean("/v1/users/\(Self.token)/x", secrets: [Self.token]) == "/v1/users/[redacted]/x")
        let cut = Redaction.clean(String(repeating: "é", count: 5_000))
        #expect(cut.count < Redaction.maximumLength + 40)
        #expect(cut.hasSuffix("…[cut, 10000 bytes]"))
    }
}
