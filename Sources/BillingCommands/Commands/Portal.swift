import ArgumentParser
import BillingServer
import BillingStore
import Foundation

/// `billingd portal`: a Customer Portal link for a user, as `POST /v1/portal-sessions` makes it.
struct Portal: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a Stripe Customer Portal session for an app user and print its URL.",
        discussion: """
            The portal lets the user change plan or quantity, update the card, see invoices and cancel, as configured in the Stripe Dashboard (Settings → Billing → Customer portal). The user must already have a Stripe customer (tied by metadata.app_user_id or a completed Checkout); otherwise the command fails with user_not_found.

            Prints the portal URL on standard output (or, with --json, {"id", "url"}). Exit status: 0 on success, 1 when Stripe or the ledger refuses, 64 for a bad option, 75 when Stripe cannot be reached — try again. Needs STRIPE_API_KEY.

            Example:
              billingd portal --user user_42 --return-url https://app.example.com/account
            """)

    @Option(name: .long, help: ArgumentHelp("The app's id of the user.", valueName: "user"))
    var user: String

    @Option(name: .long, help: ArgumentHelp("Where the portal's return link goes.", valueName: "url"))
    var returnURL: String

    @Option(name: .long, help: ArgumentHelp("A connected account (Stripe-Account); default the platform account.", valueName: "acct_…"))
    var account: String?

    @Flag(name: .long, help: "Print the session as JSON instead of just its URL.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        _ = try input(scope: .test)
    }

    func input(scope: ServiceScope) throws -> PortalInput {
        do {
            return try PortalInput(user: user, scope: try BillingCommandSupport.scope(account, base: scope), returnURL: returnURL)
        } catch let error as APIError {
            throw ValidationError(BillingCommandSupport.optionMessage(error))
        }
    }

    func run() async throws {
        try await BillingCommandSupport.with(global: global, label: "billingd.portal") { support in
            let input = try input(scope: support.scope)
            let session = try await support.perform("portal") {
                try await support.actions.portal(input, logger: support.logger)
            }
            print(json ? Output.json(["id": session.id, "url": session.url]) : session.url)
        }
    }
}
