import APITransport
import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation

/// `billingd outbox`: the events for the app's backend, their retry, and a signed test send.
struct Outbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List outbound webhooks to the app's backend, retry them, send a test.",
        discussion: """
            Every change of a user's access is queued in the outbox in the transaction that made it, then sent by serve to BILLINGD_APP_WEBHOOK_URL, signed per Standard Webhooks. Status: pending (waiting, or behind the user's earlier event), failed (retried with backoff), delivered, dead (failed for 3 days; kept).

            Examples:
              billingd outbox --status dead
              billingd outbox retry msg_2k9…
              billingd outbox retry --all-dead
              billingd outbox enable https://app.example.com/webhooks/billingd
              billingd outbox send-test
              billingd outbox send-test --new-secret
            """,
        subcommands: [List.self, Retry.self, Enable.self, SendTest.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List outbound events, newest first.")

        @Option(name: .long, help: ArgumentHelp("Only events in this status.", valueName: "pending|failed|delivered|dead"))
        var status: OutboxStatus?

        @Option(name: .long, help: "At most this many events.")
        var limit: Int = 100

        @Flag(name: .long, help: "Print JSON for scripts.")
        var json = false

        @OptionGroup var global: GlobalOptions

        func validate() throws {
            guard (1...100_000).contains(limit) else { throw ValidationError("--limit takes 1 to 100000.") }
        }

        func run() async throws {
            let settings = try global.settings()
            try await global.withStore(settings) { store in
                let messages = try await store.outbox.list(status: status, limit: limit)
                let disabled = try await store.outbox.disabledEndpoints()
                if json {
                    print(Output.json(messages.map(Self.dictionary)))
                    return
                }
                for (url, at) in disabled.sorted(by: { $0.key < $1.key }) {
                    Output.note("endpoint \(shown(url)) is disabled since \(Output.iso8601(seconds: at / 1000)) (410 Gone); `billingd outbox enable \(shown(url))` sends to it again")
                }
                if messages.isEmpty {
                    print("No outbound events\(status.map { " with status \($0.rawValue)" } ?? "").")
                    return
                }
                print(Output.table(
                    ["id", "type", "user", "status", "attempts", "created", "endpoint", "last error"],
                    messages.map { message in
                        [message.event.id, message.event.type, message.event.user, message.status.rawValue, String(message.attempts),
                         Output.iso8601(seconds: message.event.createdAt / 1000), shown(message.endpoint), message.lastError ?? ""]
                    }))
            }
        }

        static func dictionary(_ message: OutboxMessage) -> [String: Any] {
            var object: [String: Any] = [
                "seq": message.seq, "id": message.event.id, "type": message.event.type, "user": message.event.user,
                "livemode": message.event.scope.livemode, "status": message.status.rawValue, "attempts": message.attempts,
                "created_at": message.event.createdAt, "endpoint": shown(message.endpoint),
            ]
            object["account"] = message.event.scope.account.isEmpty ? NSNull() : message.event.scope.account
            object["next_attempt_at"] = message.nextAttemptAt ?? NSNull()
            object["last_error"] = message.lastError ?? NSNull()
            object["delivered_at"] = message.deliveredAt ?? NSNull()
            object["payload"] = (try? JSONSerialization.jsonObject(with: Data(message.event.payload))) ?? NSNull()
            return object
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send failed or dead events again now.")

        @Argument(help: "The event's id (msg_…).")
        var id: String?

        @Flag(name: .long, help: "Every dead event.")
        var allDead = false

        @OptionGroup var global: GlobalOptions

        func validate() throws {
            guard (id != nil) != allDead else { throw ValidationError("Give an event id or --all-dead.") }
        }

        func run() async throws {
            let settings = try global.settings()
            try await global.withStore(settings) { store in
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                if let id {
                    let count = try await store.outbox.retry(id: id, now: now)
                    guard count > 0 else { throw CommandFailure.notFound("No failed or dead outbound event \(id). See `billingd outbox --status dead`.") }
                    print("Queued \(id) again for \(count) endpoint(s); serve sends it.")
                } else {
                    let count = try await store.outbox.retryAllDead(now: now)
                    print("Queued \(count) dead event(s) again; serve sends them.")
                }
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send to an endpoint again after it answered 410 Gone.")

        @Argument(help: "The endpoint's URL.")
        var url: String

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let settings = try global.settings()
            try await global.withStore(settings) { store in
                guard try await store.outbox.enableEndpoint(url) else {
                    throw CommandFailure.notFound("\(shown(url)) is not disabled.")
                }
                print("Enabled \(shown(url)); its waiting events go out in order.")
            }
        }
    }

    struct SendTest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "send-test", abstract: "POST a signed billingd.test event to each BILLINGD_APP_WEBHOOK_URL now.")

        @Flag(name: .long, help: "Print a new whsec_ secret and send nothing.")
        var newSecret = false

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            if newSecret {
                print(StandardWebhookSigner.generateSecret())
                return
            }
            let settings = try global.settings()
            guard !settings.outbox.webhookURLs.isEmpty else {
                throw CommandFailure.configuration("BILLINGD_APP_WEBHOOK_URL is not set: set it to your app's webhook endpoint.")
            }
            let signer: StandardWebhookSigner
            do { signer = try StandardWebhookSigner(secrets: settings.outbox.webhookSecrets) } catch {
                throw CommandFailure.configuration(error.description)
            }
            let id = "msg_test_\(Int64(Date().timeIntervalSince1970 * 1000))"
            let created = Int64(Date().timeIntervalSince1970)
            let body = Array(#"{"id":"\#(id)","type":"billingd.test","created":\#(created),"user":null,"data":{}}"#.utf8)
            let transport = CurlTransport(maxConnections: 4)
            var failed = 0
            for url in settings.outbox.webhookURLs {
                var headers = signer.headers(id: id, timestamp: created, body: body)
                headers.append(("content-type", "application/json"))
                let request = HTTPTransportRequest(
                    method: .post, url: url, headers: headers, body: body, connectTimeout: settings.outbox.connectTimeout,
                    timeout: settings.outbox.timeout)
                do {
                    let response = try await transport.perform(request)
                    let ok = (200..<300).contains(response.status)
                    if !ok { failed += 1 }
                    print("\(shown(url)): HTTP \(response.status)\(ok ? "" : " (not 2xx: check the endpoint and that it verifies with this secret)")")
                } catch {
                    failed += 1
                    print(shown(url) + ": " + Redaction.mask("\(error)", secrets: Settings.credentials(in: url)))
                }
            }
            if failed > 0 { throw CommandFailure(.unavailable, "\(failed) of \(settings.outbox.webhookURLs.count) endpoint(s) did not accept the test event.") }
        }
    }
}

extension OutboxStatus: ExpressibleByArgument {}

/// An endpoint URL as the outbox commands print it: a password or query value in it (a token
/// some receivers take in the URL) masked as in the logs.
func shown(_ url: String) -> String {
    let credentials = Set(Settings.credentials(in: url))
    guard !credentials.isEmpty, var components = URLComponents(string: url) else { return url }
    if components.password.map(credentials.contains) == true { components.password = "***" }
    components.queryItems = components.queryItems?.map { item in
        item.value.map(credentials.contains) == true ? URLQueryItem(name: item.name, value: "***") : item
    }
    return components.string ?? Redaction.mask(url, secrets: Array(credentials))
}
