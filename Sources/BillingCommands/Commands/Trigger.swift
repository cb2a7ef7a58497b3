import ArgumentParser
import BillingCore
import BillingLocal
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import Logging

/// `billingd trigger`: sign a realistic sample event the way Stripe does and post it to a
/// running billingd, like `stripe trigger` but offline.
struct Trigger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a signed sample Stripe event to a running billingd (like `stripe trigger`, offline).",
        discussion: """
            The event carries a realistic object of the right kind (a subscription for customer.subscription.*, an invoice for invoice.*, …) and is signed with STRIPE_WEBHOOK_SECRET, or with the local secret that `billingd serve --local` keeps in the database.

            Examples:
              billingd trigger customer.subscription.created
              billingd trigger invoice.paid --set customer=cus_123
              billingd trigger checkout.session.completed --print
            """)

    @Argument(help: ArgumentHelp("The event type, e.g. invoice.paid.", valueName: "event-type"))
    var eventType: String

    @Option(name: .long, help: "Where to post (default: http://BILLINGD_HOST:BILLINGD_PORT/webhooks/stripe).")
    var url: String?

    @Option(
        name: .customLong("set"),
        help: ArgumentHelp(
            "Set a field of data.object by its dotted path, e.g. --set customer=cus_123, --set metadata.app_user_id=user_8, --set items.data.0.quantity=3 (repeatable). A value that parses as JSON is JSON (3, true, {\"app_user_id\": \"u\"}); quote it to keep a string (--set 'name=\"true\"'). The path must exist in the sample; only metadata takes new keys.",
            valueName: "path=value"))
    var fields: [String] = []

    @Option(name: .long, help: "The event id (default: a new random evt_… id).")
    var id: String?

    @Option(name: .long, help: "Send the event as from this connected account (acct_…).")
    var account: String?

    @Flag(name: .long, help: "Mark the event and its object as live mode.")
    var live = false

    @Flag(name: .long, help: "Print the signed request instead of sending it.")
    var print = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789._")
        guard !eventType.isEmpty, eventType.count <= 120, eventType.allSatisfy(allowed.contains), eventType.contains(".") else {
            throw ValidationError("'\(eventType)' is not an event type: use Stripe's names, e.g. invoice.paid or customer.subscription.updated.")
        }
        guard StripeEventTypes.all.contains(eventType) else {
            let nearest = StripeEventTypes.nearest(to: eventType)
            throw ValidationError(
                "Stripe sends no event of type '\(eventType)'"
                    + (nearest.isEmpty ? "; use Stripe's names, e.g. invoice.paid or customer.subscription.updated." : ". Did you mean \(nearest.joined(separator: ", "))?"))
        }
        for field in fields {
            do {
                _ = try SampleField(parsing: field)
            } catch {
                throw ValidationError(error.description)
            }
        }
    }

    func run() async throws {
        let settings = try global.settings()
        let now = Int64(Date().timeIntervalSince1970)
        let eventID = id ?? "evt_" + Self.randomSuffix()
        let body: [UInt8]
        do {
            body = try SampleEvent.body(
                type: eventType, eventID: eventID, created: now, apiVersion: StripeAPIVersion.pinned,
                livemode: live, account: account, fields: try fields.map(SampleField.init(parsing:)), timesAtEvent: true)
        } catch {
            throw ValidationError(error.description)
        }

        let secret: String
        // The ledger of `serve --local`, when the secret comes from it.
        var localStore: (any LedgerStore)?
        if let configured = settings.stripe.webhookSecrets.first {
            secret = configured
        } else {
            // Never create a ledger here: one made in the wrong directory hides the real one.
            let path = settings.database.sqlitePath
            guard settings.database.postgres != nil || FileManager.default.fileExists(atPath: path) else {
                let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
                throw CommandFailure.configuration(
                    "No webhook secret to sign with: STRIPE_WEBHOOK_SECRET is not set, and there is no ledger at \(absolute) to read `serve --local`'s generated secret from. Run trigger where `billingd serve --local` runs, or point BILLINGD_DATABASE (or --config) at its ledger, or set STRIPE_WEBHOOK_SECRET.")
            }
            let store = try await global.openStore(settings)
            localStore = store
            guard let local = try await LocalMode.secret(in: store, creating: false) else {
                try? await store.close()
                throw CommandFailure.configuration(
                    "No webhook secret to sign with: set STRIPE_WEBHOOK_SECRET to the one billingd uses, or start `billingd serve --local` first (it keeps its generated secret in \(settings.database.sqlitePath)).")
            }
            secret = local
        }

        let signature = SignatureVerifier.header(body: body, secret: secret, timestamp: now)
        let target = url ?? "http://\(settings.server.host):\(settings.server.port)/webhooks/stripe"

        let post = WebhookPost(target: target, headers: [("Stripe-Signature", signature)], body: body)
        if print {
            post.print()
        } else {
            if let localStore {
                do {
                    try await holdInLocalFake(body, store: localStore, settings: settings)
                } catch {
                    try? await localStore.close()
                    throw error
                }
            }
            try? await localStore?.close()
            localStore = nil
            try await post.send(label: "\(eventType) \(eventID)", example: "http://127.0.0.1:8080/webhooks/stripe")
        }
        try? await localStore?.close()
    }

    /// In local mode, has serve's Stripe fake (when it runs one) hold the event's object, so that
    /// Checkout, the portal and cancel find a triggered customer or subscription.
    private func holdInLocalFake(_ body: [UInt8], store: any LedgerStore, settings: Settings) async throws {
        let logger = global.logger("billingd.trigger", settings: settings)
        switch try await LocalStripeFake.hold(eventBody: body, store: store, logger: logger) {
        case .held(let objectID, let fake):
            Output.note("\(objectID) is held by serve's local Stripe fake at \(fake): Checkout, Portal and cancel find it.")
        case .unreachable(let fake, _):
            Output.note("serve's local Stripe fake at \(fake) did not answer (is `billingd serve --local` running without STRIPE_API_KEY?); the event is sent anyway.")
        case .notApplicable:
            break
        }
    }

    static func randomSuffix() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<24).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }
}
