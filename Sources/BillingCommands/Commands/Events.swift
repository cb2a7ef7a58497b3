import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation

/// `billingd events`: see the inbox, and re-queue what failed.
struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List stored webhook events and re-queue failed ones.",
        discussion: """
            Every verified delivery is kept in the inbox with its apply status: pending (not yet applied), applied, ignored (a type billingd does not model), failed (retried with backoff) or dead (failed too often; waits for `billingd events retry`).

            Examples:
              billingd events --status failed
              billingd events --type invoice.paid --limit 20 --json
              billingd events retry evt_1PgcABC…
              billingd events retry --all-failed
            """,
        subcommands: [List.self, Retry.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List inbox events, oldest first.")

        @Option(name: .long, help: ArgumentHelp("Only events in this status (repeatable).", valueName: "pending|applied|ignored|failed|dead"))
        var status: [InboxStatus] = []

        @Option(name: .long, help: "Only events of this type, e.g. invoice.paid.")
        var type: String?

        @Option(name: .long, help: "Only events about this object id (cus_…, sub_…, in_…).")
        var object: String?

        @Option(name: .long, help: "Only events stored after this inbox position (for paging).")
        var after: Int64?

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
                let events = try await store.inbox.list(
                    .init(statuses: status, type: type, objectID: object, afterSeq: after, limit: limit))
                if json {
                    print(Output.json(events.map(Self.dictionary)))
                    return
                }
                if events.isEmpty {
                    print("No events match.")
                    return
                }
                print(Output.table(
                    ["SEQ", "EVENT", "TYPE", "OBJECT", "CREATED", "STATUS", "TRIES", "EFFECT / ERROR"],
                    events.map { event in
                        [
                            String(event.seq), event.eventID, event.type, event.objectID ?? "-",
                            Output.iso8601(seconds: event.created), event.status.rawValue, String(event.attempts),
                            event.lastError.map { String($0.prefix(80)) } ?? event.effect ?? "",
                        ]
                    }))
            }
        }

        static func dictionary(_ event: InboxEvent) -> [String: Any] {
            [
                "seq": event.seq, "id": event.eventID, "type": event.type, "account": event.account ?? NSNull(),
                "livemode": event.livemode, "api_version": event.apiVersion ?? NSNull(), "created": event.created,
                "object_id": event.objectID ?? NSNull(), "object_type": event.objectType ?? NSNull(),
                "received_at_ms": event.receivedAt, "source": event.source.rawValue, "status": event.status.rawValue,
                "attempts": event.attempts, "last_error": event.lastError ?? NSNull(), "effect": event.effect ?? NSNull(),
            ]
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-queue a failed or dead event (or all of them) for the applier.",
            discussion: """
                A running `billingd serve` applies re-queued events within a second; without one, they are applied at its next start.

                An event is kept per account and mode: when the same id failed in more than one (a connected account, test and live), name it with --account and --mode.
                """)

        @Argument(help: ArgumentHelp("The event id to re-queue.", valueName: "event-id"))
        var eventID: String?

        @Flag(name: .long, help: "Re-queue every failed and dead event.")
        var allFailed = false

        @Option(name: .long, help: ArgumentHelp("The event's connected account (acct_…), or appstore:Production / appstore:Sandbox.", valueName: "account"))
        var account: String?

        @Option(name: .long, help: ArgumentHelp("The event's mode.", valueName: "live|test"))
        var mode: Mode?

        enum Mode: String, ExpressibleByArgument, Sendable {
            case live, test
        }

        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if (eventID == nil) == !allFailed {
                throw ValidationError("Give one event id, or --all-failed.")
            }
            if allFailed, account != nil || mode != nil {
                throw ValidationError("--account and --mode name one event; --all-failed re-queues every failed event.")
            }
        }

        func run() async throws {
            let settings = try global.settings()
            try await global.withStore(settings) { store in
                let inbox = store.inbox
                guard let eventID else {
                    let count = try await inbox.retryAllFailed()
                    print("Re-queued \(count) event\(count == 1 ? "" : "s").")
                    return
                }
                let candidates = try await inbox.list(.init(statuses: [.failed, .dead], eventID: eventID, limit: 100)).filter { event in
                    (account == nil || (event.account ?? "") == account) && (mode == nil || event.livemode == (mode == .live))
                }
                guard let event = candidates.first else {
                    throw CommandFailure.notFound("No failed or dead event \(eventID)\(Self.scope(account, mode)) in the inbox (see `billingd events --status failed`).")
                }
                guard candidates.count == 1 else {
                    let places = candidates.map { "\($0.account ?? "platform") \($0.livemode ? "live" : "test")" }.joined(separator: ", ")
                    throw ValidationError("\(eventID) failed in \(candidates.count) places (\(places)): name one with --account and --mode.")
                }
                guard try await inbox.retry(eventID: eventID, account: event.account, livemode: event.livemode) else {
                    throw CommandFailure.notFound("\(eventID) is no longer failed or dead: it was re-queued meanwhile.")
                }
                print("Re-queued \(eventID)\(Self.scope(event.account, event.livemode ? .live : .test)).")
            }
        }

        /// ` (acct_1 live)`: where an event was kept, for messages; empty when nothing is named.
        static func scope(_ account: String?, _ mode: Mode?) -> String {
            let parts = [account, mode?.rawValue].compactMap { $0 }
            return parts.isEmpty ? "" : " (\(parts.joined(separator: " ")))"
        }
    }
}

extension InboxStatus: ExpressibleByArgument {}
