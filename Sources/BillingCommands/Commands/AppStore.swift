import AppStoreAPI
import ArgumentParser
import BillingCore
import BillingLocal
import BillingSamples
import BillingServer
import BillingStore
import Foundation

/// `billingd appstore …`: App Store tools.
struct AppStore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore",
        abstract: "App Store tools: reconcile with the App Store Server API, look up orders and histories, test notifications, refund requests, send samples in local mode.",
        subcommands: [
            AppStoreReconcile.self, AppStoreLookup.self, AppStoreHistory.self, AppStoreTestNotification.self, AppStoreConsumptionCommand.self,
            AppStoreTrigger.self,
        ])
}

/// `billingd appstore trigger`: sign a realistic App Store Server Notification V2 with local
/// mode's PKI (Apple's shape: root, intermediate and leaf with Apple's OIDs) and post it.
struct AppStoreTrigger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trigger",
        abstract: "Send a signed sample App Store notification to billingd in local mode (like `billingd trigger` for Stripe).",
        discussion: """
            While `billingd serve --local` runs its App Store fake (no In-App Purchase key set), the fake acts the notification out: it makes the change after which Apple sends it (now, ending the current period early for a renewal, failure or expiry), sends it and anything the change brings with it to serve, and the command waits until serve has stored each. A change the subscription's state does not allow is refused (exit 1) with what would work. Other types, --url and --print sign the notification here with the local App Store PKI that serve generates and trusts (only in local mode). Notifications are in the Sandbox environment (test mode). Repeated triggers for the same --user and --product continue the same subscription (one original transaction), so a lifecycle can be walked through:

              billingd appstore trigger SUBSCRIBED --subtype INITIAL_BUY --user user_42 --product com.example.pro.monthly
              billingd appstore trigger DID_FAIL_TO_RENEW --subtype GRACE_PERIOD --user user_42 --product com.example.pro.monthly
              billingd appstore trigger DID_RENEW --subtype BILLING_RECOVERY --user user_42 --product com.example.pro.monthly
              billingd appstore trigger EXPIRED --subtype VOLUNTARY --user user_42 --product com.example.pro.monthly

            With --user, the transaction carries the user's appAccountToken, so billingd ties it to that user as it would a real purchase made with `Product.purchase(options: [.appAccountToken(…)])`.

            CONSUMPTION_REQUEST asks for a refund of the user's latest purchase of --product, as a customer does in the App Store; serve answers it through the fake when the user consented (PUT /v1/users/USER/appstore/consumption-consent), and `billingd appstore consumption list` shows the answer.
            """)

    @Argument(help: ArgumentHelp("The notification type, e.g. SUBSCRIBED, DID_RENEW, EXPIRED, REFUND.", valueName: "notification-type"))
    var notificationType: String

    @Option(name: .long, help: "The subtype, e.g. INITIAL_BUY, GRACE_PERIOD, VOLUNTARY.")
    var subtype: String?

    @Option(name: .long, help: "The App Store product id.")
    var product: String = "com.example.pro.monthly"

    @Option(name: .long, help: "The app user the purchase belongs to (through their appAccountToken).")
    var user: String?

    @Option(name: .long, help: "Where to post (default: http://BILLINGD_HOST:BILLINGD_PORT/webhooks/appstore).")
    var url: String?

    @Flag(name: .long, help: "Print the signed request instead of sending it.")
    var print = false

    /// For scripts/bench-appstore: write this many distinct signed notifications to --requests
    /// (one `-<TAB>body` line each, the format of scripts/bench/ingest.lua) instead of sending one.
    @Option(name: .long, help: .hidden)
    var count: Int?

    @Option(name: .long, help: .hidden)
    var requests: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZ_")
        guard !notificationType.isEmpty, notificationType.count <= 64, notificationType.allSatisfy(allowed.contains) else {
            throw ValidationError("'\(notificationType)' is not a notification type: use Apple's names, e.g. SUBSCRIBED or DID_RENEW.")
        }
        if let subtype, subtype.isEmpty || subtype.count > 64 || !subtype.allSatisfy(allowed.contains) {
            throw ValidationError("'\(subtype)' is not a subtype: use Apple's names, e.g. INITIAL_BUY or GRACE_PERIOD.")
        }
    }

    func run() async throws {
        let settings = try global.settings()
        try await global.withStore(settings) { store in
            guard let pki = try await AppStoreSupport.localPKI(in: store, creating: false) else {
                throw CommandFailure.configuration(
                    "No local App Store PKI in \(settings.database.sqlitePath): start `billingd serve --local` first (it generates one and trusts it), or point BILLINGD_DATABASE at its database.")
            }
            var token: String?
            if let user { token = try await store.appStore.accountToken(for: user) }
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            if let count, let requests {
                try writeRequests(count: count, to: requests, pki: pki, bundleID: settings.appStore.bundleID ?? AppStoreSupport.localBundleID, now: now)
                return
            }
            if !print, url == nil,
                let client = try await LocalAppStoreFake.client(settings: settings, store: store, logger: global.logger("billingd.appstore", settings: settings)),
                try await triggerThroughFake(client, appAccountToken: token, store: store, databasePath: settings.database.sqlitePath)
            {
                return
            }
            // A renewal or a new purchase is a new transaction; anything else (a failed renewal, a
            // refund, a change of renewal preference) is about the subscription's current one.
            let original = AppStoreSampleNotification.originalTransactionID(user: user ?? "", product: product)
            let current = try await store.appStore.subscription(environment: "Sandbox", originalTransactionID: original)
            let startsPeriod = [.subscribed, .didRenew, .oneTimeCharge].contains(AppStoreNotificationType(rawValue: notificationType))
            let sample = AppStoreSampleNotification(
                type: notificationType, subtype: subtype, productID: product, originalTransactionID: original,
                transactionID: startsPeriod ? nil : current?.0.transactionID ?? original,
                bundleID: settings.appStore.bundleID ?? AppStoreSupport.localBundleID, environment: .sandbox,
                appAccountToken: token, now: now)
            let body = Array(#"{"signedPayload":""#.utf8) + Array(sample.signedPayload(pki.sign(payload:)).utf8) + Array(#""}"#.utf8)
            let target = url ?? "http://\(settings.server.host):\(settings.server.port)/webhooks/appstore"
            let post = WebhookPost(target: target, headers: [], body: body)
            if print {
                post.print()
            } else {
                try await post.send(
                    label: "\(notificationType)\(subtype.map { "/" + $0 } ?? "") \(sample.notificationUUID)",
                    example: "http://127.0.0.1:8080/webhooks/appstore")
            }
        }
    }

    /// Has serve's local App Store fake act the notification out (it then sends it, and what
    /// comes with it, to serve), and waits until each is in the inbox. False when the fake does
    /// not answer or does not act out this type: the caller signs the notification itself.
    private func triggerThroughFake(_ client: AppStoreClient, appAccountToken: String?, store: any LedgerStore, databasePath: String) async throws -> Bool {
        let fake = client.configuration.baseURL
        let triggered: LocalAppStoreFake.Triggered
        do {
            triggered = try await LocalAppStoreFake.trigger(
                client, notificationType: notificationType, subtype: subtype, productID: product, appAccountToken: appAccountToken)
        } catch where error.kind == .transport {
            Output.note("serve's local App Store fake at \(fake) did not answer (is `billingd serve --local` running?); signing the notification here instead.")
            return false
        } catch where error.kind == .invalidRequest && error.status == 400 {
            Output.note("\(error.message) Signing \(notificationType) here instead: lookups and reconcile will not know it.")
            return false
        } catch {
            // The fake refuses what the subscription's state does not allow, and says what would.
            throw CommandFailure(.failed, "\(error.message)")
        }
        let deadline = ContinuousClock.now + .seconds(10)
        for sent in triggered.notifications {
            while !(try await store.inbox.contains(eventID: sent.notificationUUID, account: InboxAccount.appStore(.sandbox).column, livemode: false)) {
                guard ContinuousClock.now < deadline else {
                    throw CommandFailure(
                        .unavailable,
                        "serve's local App Store fake sent \(sent.label) \(sent.notificationUUID), but it is not in this ledger's inbox after 10 s: is `billingd serve --local` running on \(databasePath)? Its log says why a delivery failed.")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            Swift.print("\(sent.label) \(sent.notificationUUID) → sent by serve's local App Store fake and stored (original transaction \(triggered.originalTransactionId))")
        }
        if notificationType == AppStoreNotificationType.consumptionRequest.rawValue {
            Swift.print("serve answers the refund request if the user consented; `billingd appstore consumption list` shows what it answered.")
        }
        if let signed = triggered.signedTransaction {
            Swift.print("Transaction.jwsRepresentation, as the device holds it (the app forwards it to POST /v1/users/USER/appstore/transactions):")
            Swift.print(signed)
        }
        return true
    }

    /// Distinct notifications (each its own original transaction), signed once each.
    func writeRequests(count: Int, to path: String, pki: AppStoreTestPKI, bundleID: String, now: Int64) throws {
        guard count > 0, FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw CommandFailure.cannotCreate("Cannot write \(path).") }
        defer { try? handle.close() }
        var buffer: [UInt8] = []
        for index in 0..<count {
            let sample = AppStoreSampleNotification(
                type: notificationType, subtype: subtype, productID: product,
                originalTransactionID: AppStoreSampleNotification.originalTransactionID(user: "bench-\(index)", product: product),
                bundleID: bundleID, environment: .sandbox, now: now)
            buffer += Array("-\t{\"signedPayload\":\"".utf8) + Array(sample.signedPayload(pki.sign(payload:)).utf8) + Array("\"}\n".utf8)
            if buffer.count > 1 << 20 {
                try handle.write(contentsOf: buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
        try handle.write(contentsOf: buffer)
    }
}
