import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation

/// `billingd appstore consumption`: Apple's refund requests and what billingd answered.
struct AppStoreConsumptionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumption",
        abstract: "List Apple's refund requests (CONSUMPTION_REQUEST) and billingd's answers.",
        discussion: """
            When a customer asks Apple for a refund, Apple sends CONSUMPTION_REQUEST and takes the app's answer for 12 hours. serve answers each request once through the App Store Server API (Send Consumption Information) when the purchase's owner consented (PUT /v1/users/USER/appstore/consumption-consent). Status: pending (waiting, or retrying), sent (Apple accepted the answer), no_consent (not answered: no consent), expired (not answered within 12 hours), failed (Apple refused the answer; its error is shown).

            Examples:
              billingd appstore consumption list
              billingd appstore consumption list --status failed
              billingd appstore consumption list --json
            """,
        subcommands: [List.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List refund requests, newest first.")

        @Option(name: .long, help: ArgumentHelp("Only requests in this status.", valueName: "pending|sent|no_consent|expired|failed"))
        var status: AppStoreConsumptionStatus?

        @Option(name: .long, help: "At most this many requests.")
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
                let requests = try await store.appStoreConsumption.requests(status: status, limit: limit)
                if json {
                    print(Output.json(requests.map(Self.dictionary)))
                    return
                }
                if requests.isEmpty {
                    print("No refund requests\(status.map { " with status \($0.rawValue)" } ?? "").")
                    return
                }
                print(Output.table(
                    ["notification", "environment", "transaction", "user", "status", "attempts", "requested", "answer / error"],
                    requests.map { request in
                        [request.notificationUUID, request.environment, request.transactionID, Output.printable(request.user ?? ""),
                         request.status.rawValue, String(request.attempts), Output.iso8601(seconds: request.signedDate / 1000),
                         Output.printable(Self.outcome(request))]
                    }))
            }
        }

        /// What the last column says: the answer sent, or why there is none.
        static func outcome(_ request: AppStoreConsumptionRequest) -> String {
            switch request.status {
            case .sent: request.answer?.summary ?? ""
            case .noConsent: "no consent recorded for the user"
            case .expired: "not answered within 12 hours" + (request.lastError.map { ": \($0)" } ?? "")
            case .failed, .pending: request.lastError ?? ""
            }
        }

        static func dictionary(_ request: AppStoreConsumptionRequest) -> [String: Any] {
            var object: [String: Any] = [
                "notification_uuid": request.notificationUUID, "environment": request.environment, "transaction_id": request.transactionID,
                "original_transaction_id": request.originalTransactionID, "status": request.status.rawValue, "attempts": request.attempts,
                "signed_date": request.signedDate, "received_at": request.receivedAt, "deadline": request.deadline,
            ]
            object["user"] = request.user ?? NSNull()
            object["reason"] = request.reason ?? NSNull()
            object["next_attempt_at"] = request.nextAttemptAt ?? NSNull()
            object["last_attempt_at"] = request.lastAttemptAt ?? NSNull()
            object["sent_at"] = request.sentAt ?? NSNull()
            object["apple_status"] = request.appleStatus ?? NSNull()
            object["last_error"] = request.lastError ?? NSNull()
            object["body"] = request.body.flatMap { try? JSONSerialization.jsonObject(with: Data($0)) } ?? NSNull()
            return object
        }
    }
}

extension AppStoreConsumptionStatus: ExpressibleByArgument {}
