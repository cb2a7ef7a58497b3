import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation

/// `billingd timeline USER`: a user's history across both stores, from the ledger.
struct Timeline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a user's history: store events, grants, usage limits, outbound deliveries, repairs and the access each step left.",
        discussion: """
            Newest first, as GET /v1/users/{user}/timeline answers: Stripe events of the user's customers, subscriptions and invoices; App Store notifications, forwarded transactions and repairs of their purchases; grants made, revoked and expired; usage periods begun and consumes refused at a limit (one line per meter and day, with the count); outbound webhook deliveries and their outcome; subscriptions reconcile repaired; and each change of access (entitlement.changed). The mode is the API key's (STRIPE_API_KEY), test mode without one.

            --cursor takes the `next_cursor` of a page (--json) or the cursor line the table ends with, for the page after it.
            """)

    @Argument(help: ArgumentHelp("The app's id of the user.", valueName: "user"))
    var user: String

    @Option(name: .long, help: ArgumentHelp("Items per page, 1 to \(TimelinePage.maximumLimit).", valueName: "n"))
    var limit = TimelinePage.defaultLimit

    @Option(name: .long, help: ArgumentHelp("Start after this cursor of an earlier page.", valueName: "cursor"))
    var cursor: String?

    @Option(name: .long, help: ArgumentHelp("A connected account (Stripe-Account); default the platform account.", valueName: "acct_…"))
    var account: String?

    @Flag(name: .long, help: "Print the page as JSON, as the service API answers it.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...255).contains(user.utf8.count) else {
            throw ValidationError("USER is the app's user id, 1 to 255 bytes, as the service API takes it.")
        }
        guard (1...TimelinePage.maximumLimit).contains(limit) else {
            throw ValidationError("--limit takes a number from 1 to \(TimelinePage.maximumLimit).")
        }
        if let cursor, TimelineCursor(encoded: cursor) == nil {
            throw ValidationError("--cursor takes the next_cursor of an earlier page, unchanged.")
        }
        _ = try BillingCommandSupport.scope(account, base: .test)
    }

    func run() async throws {
        let settings = try global.settings()
        try await global.withStore(settings) { store in
            let scope = try BillingCommandSupport.scope(account, base: .forAPIKey(isLive: settings.stripe.apiKeyIsLive))
            let page = try await store.timeline.timeline(
                of: user, in: scope, limit: limit, after: cursor.flatMap(TimelineCursor.init(encoded:)), now: Int64(Date().timeIntervalSince1970))
            if json {
                print(String(decoding: TimelineView(user: user, scope: scope, page: page).json(), as: UTF8.self))
            } else {
                print(Self.text(user: user, scope: scope, page: page))
            }
        }
    }

    static func text(user: String, scope: ServiceScope, page: TimelinePage) -> String {
        var lines = ["\(user) (\(scope)): \(page.items.isEmpty ? "nothing in the ledger" : "\(page.items.count) items, newest first")"]
        guard !page.items.isEmpty else { return lines[0] }
        let rows = page.items.map { item -> [String] in
            let access = item.entitlement.map { entitlement in
                "\(entitlement.tier ?? "-")\(entitlement.source.map { " via \($0)" } ?? "")\(entitlement.validUntil.map { " until \(UTCTimestamp.string($0))" } ?? "")"
            }
            return [
                UTCTimestamp.string(item.at), item.kind.rawValue, item.source, Output.printable(item.summary),
                Output.printable(item.ref ?? "-"), access ?? "",
            ]
        }
        lines.append(Output.table(["AT", "KIND", "SOURCE", "SUMMARY", "REF", "ACCESS"], rows))
        if let next = page.nextCursor {
            lines.append("More: billingd timeline \(user) --cursor \(next.encoded)")
        }
        return lines.joined(separator: "\n")
    }
}
