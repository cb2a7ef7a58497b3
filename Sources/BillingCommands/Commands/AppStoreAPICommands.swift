import AppStoreAPI
import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation
import Logging

/// `billingd appstore reconcile`: App Store reconcile once, from cron or by hand.
struct AppStoreReconcile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract: "Recover missed App Store notifications and repair stale subscriptions from the App Store Server API.",
        discussion: """
            For each environment with an API (Production and Sandbox among APPSTORE_ENVIRONMENTS), in turn:
              1. walks Get Notification History from the stored cursor (an hour of overlap; as far back as Apple keeps it, less a day a long walk needs in hand: 179 days in Production, 29 in the Sandbox) and stores every notification the inbox lacks, then applies it like a delivery; one that arrives later is a duplicate. Warns when the cursor is older than 150 days (25 in the Sandbox).
              2. asks Get All Subscription Statuses about every subscription whose state may be stale: active by the last signed data but past its expiry date, in billing retry or grace period, reported by the app with no notification since, or with a delivery that failed to apply; repairs through the same signedDate guard as notifications.
              3. reports drift by kind (missing, status differs, expiry differs) with examples.

            Shares the reconcile lease with `billingd reconcile` and serve's scheduler. `billingd reconcile` runs this too when the App Store Server API is configured.

            Exit status: 0 when every run completed, drift or not; 1 when one could not (key refused, Apple unreachable past retries); 75 when another run holds the lease — try again later; 64 for a bad option; 78 for a missing or wrong setting.

            Cron, daily at 04:37:
              37 4 * * *  billingd --config /etc/billingd/billingd.env appstore reconcile --json >> /var/log/billingd-appstore-reconcile.jsonl
            """)

    @Flag(name: .long, help: "Compare and report only; change nothing (notifications are not stored, the cursor does not move).")
    var dryRun = false

    @Flag(name: .long, help: "Print the reports as JSON on standard output (an array, one report per environment).")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Walk notification history from this date (2026-11-01 or 2026-11-01T12:00:00Z) instead of the stored cursor.", valueName: "date"))
    var since: String?

    @Option(name: .long, help: ArgumentHelp("Only this environment: Production or Sandbox.", valueName: "environment"))
    var environment: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let since, UTCTimestamp.parse(since) == nil {
            throw ValidationError("--since \(since) is not a date; use 2026-11-01 or 2026-11-01T12:00:00Z.")
        }
    }

    func run() async throws {
        let settings = try global.settings()
        let logger = global.logger("billingd.appstore.reconcile", settings: settings)
        try await global.withStore(settings, announcing: true, creating: true) { store in
            let clients = try await AppStoreClients.select(settings, environment: environment, store: store, logger: logger)
            var options = AppStoreReconciler.Options()
            options.dryRun = dryRun
            options.since = since.flatMap(UTCTimestamp.parse)
            options.applyRecoveredEvents = true
            let outcome = await Self.run(clients, store: store, settings: settings, options: options, logger: logger)
            if json {
                print(Self.encode(outcome.reports))
            } else if !outcome.reports.isEmpty {
                print(outcome.reports.map(\.summary).joined(separator: "\n"))
            }
            if let code = outcome.exitCode { throw ExitCode(code) }
        }
    }

    /// Runs reconcile for each client in turn; the reports of runs that started, and the exit
    /// status when not 0 (75 when the lease was held, 1 when a run failed). Shared with `billingd reconcile`.
    static func run(
        _ clients: [AppStoreClient], store: any LedgerStore, settings: Settings, options: AppStoreReconciler.Options, logger: Logger
    ) async -> (reports: [AppStoreReconcileReport], exitCode: Int32?) {
        var reports: [AppStoreReconcileReport] = []
        var exitCode: Int32?
        for client in clients {
            let reconciler = AppStoreReconciler(
                store: store, client: client, logger: logger, inbox: store.inbox,
                applier: store.applier(.init(apiVersion: settings.stripe.apiVersion)))
            do {
                reports.append(try await reconciler.run(options) { progress in
                    Output.progress("appstore reconcile \(client.configuration.environment): \(progress.phase) \(progress.done) done, \(progress.drift) found")
                })
                Output.endProgress()
            } catch let held as LeaseHeld {
                Output.endProgress()
                FileHandle.standardError.write(Data("billingd appstore reconcile: \(held). Nothing was done.\n".utf8))
                exitCode = exitCode ?? 75
            } catch let failure as AppStoreReconciler.Failure {
                Output.endProgress()
                reports.append(failure.report)
                FileHandle.standardError.write(Data("billingd appstore reconcile (\(client.configuration.environment)): \(failure.underlying)\n".utf8))
                exitCode = 1
            } catch {
                Output.endProgress()
                FileHandle.standardError.write(Data("billingd appstore reconcile (\(client.configuration.environment)): \(error)\n".utf8))
                exitCode = 1
            }
        }
        return (reports, exitCode)
    }

    static func encode(_ reports: [AppStoreReconcileReport]) -> String {
        Output.json(encoding: reports, fallback: "[]")
    }
}

/// `billingd appstore lookup ORDER_ID`: from the order id on Apple's e-mail receipt to the
/// transactions and the app user they belong to.
struct AppStoreLookup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookup",
        abstract: "Find the purchases of an order id (from the customer's Apple e-mail receipt) and the app user they belong to.",
        discussion: """
            For customer support: the customer forwards Apple's receipt e-mail, whose order id (such as MK5TTTVWJH) Look Up Order ID turns into signed transactions. billingd verifies them and prints each with the app user the ledger ties it to. Exit status: 0 when found, 1 when the order id is unknown to Apple in every environment or the call failed.
            """)

    @Argument(help: ArgumentHelp("The order id from Apple's e-mail receipt.", valueName: "order-id"))
    var orderID: String

    @Flag(name: .long, help: "Print JSON.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Only this environment: Production or Sandbox.", valueName: "environment"))
    var environment: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard !orderID.isEmpty, orderID.count <= 64, orderID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw ValidationError("'\(orderID.prefix(64))' is not an order id: it is letters and digits, such as MK5TTTVWJH, on the customer's Apple receipt.")
        }
    }

    func run() async throws {
        let settings = try global.settings()
        let logger = global.logger("billingd.appstore", settings: settings)
        try await global.withStore(settings, announcing: true, creating: true) { store in
            let clients = try await AppStoreClients.select(settings, environment: environment, store: store, logger: logger)
            let ledger = store.appStore
            var rows: [[String: any Sendable]] = []
            for client in clients {
                let lookup: AppStoreOrderLookup
                do {
                    lookup = try await client.lookUpOrder(orderID: orderID)
                } catch {
                    FileHandle.standardError.write(Data("billingd appstore lookup: \(error)\n".utf8))
                    throw ExitCode(1)
                }
                for signed in lookup.transactions {
                    let transaction = signed.transaction
                    let held = try await ledger.subscription(
                        environment: client.configuration.environment.rawValue, originalTransactionID: transaction.originalTransactionID)
                    var row: [String: any Sendable] = [
                        "environment": client.configuration.environment.rawValue, "transaction_id": transaction.transactionID,
                        "original_transaction_id": transaction.originalTransactionID, "product_id": transaction.productID,
                        "app_user_id": held?.owner ?? NSNull(), "revoked": transaction.isRevoked,
                    ]
                    row["purchase_date"] = transaction.purchaseDate.map { UTCTimestamp.string($0 / 1000) } ?? NSNull()
                    row["expires_date"] = transaction.expiresDate.map { UTCTimestamp.string($0 / 1000) } ?? NSNull()
                    rows.append(row)
                }
                if !lookup.transactions.isEmpty { break }
            }
            if json {
                print(Output.json(["order_id": orderID, "transactions": rows]))
            } else if rows.isEmpty {
                print("Apple knows no order \(orderID) for this app (\(clients.map(\.configuration.environment.rawValue).joined(separator: ", "))).")
            } else {
                print(Output.table(
                    ["TRANSACTION", "ORIGINAL", "PRODUCT", "PURCHASED", "EXPIRES", "USER"],
                    rows.map { row in
                        ["transaction_id", "original_transaction_id", "product_id", "purchase_date", "expires_date", "app_user_id"].map { key in
                            (row[key] as? String) ?? (row[key] is NSNull ? "-" : "\(row[key] ?? "-")")
                        }
                    }))
            }
            if rows.isEmpty { throw ExitCode(1) }
        }
    }
}

/// `billingd appstore history TRANSACTION_ID`: every transaction of a purchase, from Apple.
struct AppStoreHistory: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show every transaction of a purchase (each period, upgrade, downgrade and refund) from Get Transaction History.",
        discussion: """
            Any transaction id of the purchase works. With --record the transactions also go into the ledger (as reconcile's repairs do), under the same signedDate guard. Exit status: 0 when shown, 1 when Apple does not know the transaction or the call failed.
            """)

    @Argument(help: ArgumentHelp("A transaction id of the purchase.", valueName: "transaction-id"))
    var transactionID: String

    @Flag(name: .long, help: "Print JSON.")
    var json = false

    @Flag(name: .long, help: "Also record the transactions in the ledger.")
    var record = false

    @Option(name: .long, help: ArgumentHelp("Only this environment: Production or Sandbox.", valueName: "environment"))
    var environment: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard !transactionID.isEmpty, transactionID.count <= 32, transactionID.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw ValidationError("'\(transactionID.prefix(32))' is not a transaction id: App Store transaction ids are digits, such as 2000000123456789.")
        }
    }

    func run() async throws {
        let settings = try global.settings()
        let logger = global.logger("billingd.appstore", settings: settings)
        try await global.withStore(settings, announcing: true, creating: true) { store in
            let clients = try await AppStoreClients.select(settings, environment: environment, store: store, logger: logger)
            for client in clients {
                let history: [AppStoreSignedTransaction]
                do {
                    history = try await client.completeTransactionHistory(transactionID: transactionID)
                } catch let error as AppStoreAPIError where error.kind == .notFound && clients.count > 1 {
                    continue
                } catch {
                    FileHandle.standardError.write(Data("billingd appstore history: \(error)\n".utf8))
                    throw ExitCode(1)
                }
                if record {
                    let snapshots = history.map {
                        AppStoreServerSnapshot(signedTransaction: $0.jws, transaction: $0.transaction, signedRenewalInfo: nil, renewalInfo: nil)
                    }
                    _ = try await store.appStoreReconciliation.recordFetched(
                        snapshots, environment: client.configuration.environment, receivedAt: Int64(Date().timeIntervalSince1970 * 1000))
                }
                let rows: [[String: any Sendable]] = history.map { signed in
                    let transaction = signed.transaction
                    return [
                        "transaction_id": transaction.transactionID, "original_transaction_id": transaction.originalTransactionID,
                        "product_id": transaction.productID, "type": transaction.type ?? NSNull(),
                        "purchase_date": transaction.purchaseDate.map { UTCTimestamp.string($0 / 1000) } ?? NSNull(),
                        "expires_date": transaction.expiresDate.map { UTCTimestamp.string($0 / 1000) } ?? NSNull(),
                        "revocation_date": transaction.revocationDate.map { UTCTimestamp.string($0 / 1000) } ?? NSNull(),
                        "upgraded": transaction.isUpgraded, "transaction_reason": transaction.transactionReason ?? NSNull(),
                    ]
                }
                if json {
                    print(Output.json(["environment": client.configuration.environment.rawValue, "transactions": rows]))
                } else {
                    print("\(history.count) transactions in \(client.configuration.environment)\(record ? ", recorded in the ledger" : ""):")
                    print(Output.table(
                        ["TRANSACTION", "PRODUCT", "PURCHASED", "EXPIRES", "REVOKED", "REASON"],
                        rows.map { row in
                            ["transaction_id", "product_id", "purchase_date", "expires_date", "revocation_date", "transaction_reason"].map { key in
                                (row[key] as? String) ?? "-"
                            }
                        }))
                }
                return
            }
            FileHandle.standardError.write(Data("billingd appstore history: Apple knows no transaction \(transactionID) in \(clients.map(\.configuration.environment.rawValue).joined(separator: " or ")).\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// `billingd appstore test-notification`: asks Apple for a TEST notification and waits for it.
struct AppStoreTestNotification: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test-notification",
        abstract: "Ask Apple to send a TEST notification to the server URL and wait until billingd's inbox has it.",
        discussion: """
            Checks the whole path: App Store Connect's server URL, TLS, the proxy, and billingd's verification. Polls Apple's record of its send attempts and billingd's inbox every two seconds. Exit status: 0 when the notification reached the inbox, 1 when it did not within --timeout (Apple's send attempt result is printed: TIMED_OUT, TLS_ISSUE, UNSUCCESSFUL_HTTP_RESPONSE_CODE, …).
            """)

    @Option(name: .long, help: ArgumentHelp("Only this environment: Production or Sandbox (default: Sandbox if accepted).", valueName: "environment"))
    var environment: String?

    @Option(name: .long, help: "Seconds to wait for the notification.")
    var timeout: Int = 60

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...3600).contains(timeout) else { throw ValidationError("--timeout takes seconds from 1 to 3600.") }
    }

    func run() async throws {
        let settings = try global.settings()
        let logger = global.logger("billingd.appstore", settings: settings)
        try await global.withStore(settings, announcing: true, creating: true) { store in
            let clients = try await AppStoreClients.select(settings, environment: environment, store: store, logger: logger)
            guard let client = clients.first(where: { $0.configuration.environment == .sandbox }) ?? clients.first else { throw ExitCode(1) }
            let inbox = store.inbox
            let environment = client.configuration.environment
            do {
                let token = try await client.requestTestNotification()
                print("Apple accepted the request (\(environment)); waiting up to \(timeout) s for the TEST notification…")
                let deadline = ContinuousClock.now + .seconds(timeout)
                var lastResult = "no send attempt yet"
                while ContinuousClock.now < deadline {
                    try await Task.sleep(for: .seconds(2))
                    guard let status = try await Self.status(client, token: token) else { continue }
                    lastResult = status.sendAttempts.last.map { "\($0.sendAttemptResult) at \(UTCTimestamp.string($0.attemptDate / 1000))" } ?? lastResult
                    let uuid = status.verified.notificationUUID
                    if try await inbox.contains(eventID: uuid, account: InboxAccount.appStore(environment).column, livemode: environment.isLive) {
                        print("Received: notification \(uuid) is in billingd's inbox (Apple's send attempt: \(lastResult)).")
                        return
                    }
                }
                FileHandle.standardError.write(Data(
                    "billingd appstore test-notification: the TEST notification did not reach this billingd's inbox within \(timeout) s (Apple's last send attempt: \(lastResult)). Check the server URL in App Store Connect (https://HOST/webhooks/appstore), that serve is running on this database, and its logs.\n".utf8))
                throw ExitCode(1)
            } catch let error as AppStoreAPIError {
                FileHandle.standardError.write(Data("billingd appstore test-notification: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
    }

    /// The test notification's status; nil while Apple does not know the token yet.
    static func status(_ client: AppStoreClient, token: String) async throws(AppStoreAPIError) -> AppStoreHistoricalNotification? {
        do {
            return try await client.testNotificationStatus(token: token)
        } catch {
            if error.kind == .notFound { return nil }
            throw error
        }
    }
}
