import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation
import Logging

/// `billingd checkout`: a Checkout link for a user, as `POST /v1/checkout-sessions` makes it.
struct Checkout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a Stripe Checkout session for an app user and print its URL.",
        discussion: """
            Sells a subscription to the user: a tier of the plan catalog (--plan, with --interval), a Stripe price (--price) or a price's lookup key (--lookup-key). Creates the user's Stripe customer first if the ledger knows none (with metadata.app_user_id and --email), and refuses when the user already holds that plan (exit 1, already_subscribed). The session is written to the ledger at once.

            Prints the Checkout URL on standard output (or, with --json, {"id", "url", "expires_at", "customer", "price", "customer_created"}). Exit status: 0 on success, 1 when Stripe or the ledger refuses (the message says why), 64 for a bad option, 75 when Stripe cannot be reached — try again.

            Needs STRIPE_API_KEY; --plan needs BILLINGD_PLANS.

            Examples:
              billingd checkout --user user_42 --plan pro --interval year \\
                --success-url 'https://app.example.com/billing/done?session={CHECKOUT_SESSION_ID}' \\
                --cancel-url https://app.example.com/pricing
              billingd checkout --user user_42 --lookup-key team_seat_monthly --quantity 5 --trial-days 14 \\
                --promotion-codes --email ada@example.com \\
                --success-url https://app.example.com/done --cancel-url https://app.example.com/pricing --json
            """)

    @Option(name: .long, help: ArgumentHelp("The app's id of the user who buys.", valueName: "user"))
    var user: String

    @Option(name: .long, help: ArgumentHelp("A tier id of the plan catalog (BILLINGD_PLANS), e.g. pro.", valueName: "tier"))
    var plan: String?

    @Option(name: .long, help: ArgumentHelp("With --plan: bill monthly or yearly; default the tier's monthly price.", valueName: "month|year"))
    var interval: String?

    @Option(name: .long, help: ArgumentHelp("A Stripe price id instead of --plan.", valueName: "price_…"))
    var price: String?

    @Option(name: .long, help: ArgumentHelp("A Stripe price lookup key instead of --plan.", valueName: "key"))
    var lookupKey: String?

    @Option(name: .long, help: ArgumentHelp("Units of the price, such as seats (1…10000).", valueName: "n"))
    var quantity: Int64 = 1

    @Option(name: .long, help: ArgumentHelp("Free trial days before the first charge (1…730).", valueName: "n"))
    var trialDays: Int64?

    @Flag(name: .long, help: "Let the buyer enter a promotion code on the Checkout page.")
    var promotionCodes = false

    @Option(name: .long, help: ArgumentHelp("Where Stripe sends the buyer after paying; {CHECKOUT_SESSION_ID} is replaced by the session id.", valueName: "url"))
    var successURL: String

    @Option(name: .long, help: ArgumentHelp("Where the Checkout page's back link goes.", valueName: "url"))
    var cancelURL: String

    @Option(name: .long, help: ArgumentHelp("The e-mail of the customer billingd creates (ignored when the user already has one).", valueName: "email"))
    var email: String?

    @Option(name: .long, help: ArgumentHelp("A connected account (Stripe-Account); default the platform account.", valueName: "acct_…"))
    var account: String?

    @Flag(name: .long, help: "Print the session as JSON instead of just its URL.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        _ = try input(scope: .test)
    }

    /// The same checks as the service API, as usage errors.
    func input(scope: ServiceScope) throws -> CheckoutInput {
        let given = [plan.map { _ in "--plan" }, price.map { _ in "--price" }, lookupKey.map { _ in "--lookup-key" }].compactMap { $0 }
        guard given.count == 1 else {
            throw ValidationError(
                given.isEmpty ? "Give what to sell: --plan TIER (with --interval month|year), --price price_… or --lookup-key KEY." : "Give one of --plan, --price and --lookup-key, not \(given.joined(separator: " and ")).")
        }
        if interval != nil, plan == nil {
            throw ValidationError("--interval goes with --plan only; a price has its own interval.")
        }
        let choice: PlanChoice =
            if let plan { .tier(plan, interval: interval.map(RecurringInterval.init(rawValue:))) }
            else if let price { .price(price) }
            else { .lookupKey(lookupKey ?? "") }
        do {
            return try CheckoutInput(
                user: user, scope: try BillingCommandSupport.scope(account, base: scope), plan: choice, quantity: quantity,
                trialDays: trialDays, allowPromotionCodes: promotionCodes ? true : nil, successURL: successURL, cancelURL: cancelURL,
                email: email)
        } catch let error as APIError {
            throw ValidationError(BillingCommandSupport.optionMessage(error))
        }
    }

    func run() async throws {
        try await BillingCommandSupport.with(global: global, label: "billingd.checkout") { support in
            let input = try input(scope: support.scope)
            let session = try await support.perform("checkout") {
                try await support.actions.checkout(input, logger: support.logger)
            }
            if json {
                print(Output.json([
                    "id": session.id, "url": session.url, "expires_at": session.expiresAt.map { $0 as Any } ?? NSNull(),
                    "customer": session.customer, "price": session.price, "customer_created": session.customerCreated,
                ] as [String: Any]))
            } else {
                print(session.url)
            }
        }
    }
}

/// What `checkout` and `portal` share: settings, ledger, catalog, Stripe client, and how a
/// refusal becomes a message and an exit status.
struct BillingCommandSupport {
    let settings: Settings
    let logger: Logger
    let store: any LedgerStore
    let actions: BillingActions
    /// The key's mode, platform account; `--account` narrows it.
    let scope: ServiceScope

    init(global: GlobalOptions, label: String) async throws {
        settings = try global.settings()
        logger = global.logger(label, settings: settings)
        let client = try StripeClients.make(
            settings, logger: logger,
            purpose: "calls Stripe to create Checkout and portal sessions: a restricted key (rk_…) needs write access to customers, Checkout Sessions and customer portal sessions")
        var catalog = PlanCatalog.freeOnly
        if let path = settings.plans.catalogPath {
            do {
                catalog = try PlanCatalogLoader.load(path: path)
            } catch {
                throw CommandFailure.configuration("\(error)")  // the error names BILLINGD_PLANS and the file
            }
        }
        store = try await global.openStore(settings)
        actions = BillingActions(store: store, client: client, catalog: catalog)
        scope = ServiceScope.forAPIKey(isLive: settings.stripe.apiKeyIsLive)
    }

    /// Runs `body` with the support of a command, and closes its store afterwards, whatever happened.
    static func with(global: GlobalOptions, label: String, _ body: (BillingCommandSupport) async throws -> Void) async throws {
        let support = try await BillingCommandSupport(global: global, label: label)
        do {
            try await body(support)
        } catch {
            try? await support.store.close()
            throw error
        }
        try? await support.store.close()
    }

    /// Runs an action; a ``APIError`` is printed as `billingd COMMAND: message` and ends the
    /// process with 75 when trying again later may work (Stripe unreachable), else 1.
    func perform<T>(_ command: String, _ action: () async throws -> T) async throws -> T {
        do {
            return try await action()
        } catch let error as APIError {
            FileHandle.standardError.write(Data("billingd \(command): \(error.message) (\(error.code))\n".utf8))
            throw ExitCode(error.retryAfter != nil ? 75 : 1)
        }
    }

    /// The scope for `--account`, or `base` without it.
    static func scope(_ account: String?, base: ServiceScope) throws -> ServiceScope {
        guard let account else { return base }
        guard ServiceScope.isAccountID(account) else {
            throw ValidationError("--account takes a connected account id such as acct_1Nv0FGQ9RKHgCVdK.")
        }
        return base.account(account)
    }

    /// A validation error's message with the JSON field names turned into option names.
    static func optionMessage(_ error: APIError) -> String {
        var message = error.message
        for (field, option) in [
            ("\"success_url\"", "--success-url"), ("\"cancel_url\"", "--cancel-url"), ("\"return_url\"", "--return-url"),
            ("\"trial_days\"", "--trial-days"), ("\"lookup_key\"", "--lookup-key"), ("\"quantity\"", "--quantity"),
            ("\"interval\"", "--interval"), ("\"email\"", "--email"), ("\"price\"", "--price"), ("\"plan\"", "--plan"),
            ("\"user\"", "--user"),
        ] {
            message = message.replacingOccurrences(of: "The field \(field)", with: option)
        }
        return message
    }
}
