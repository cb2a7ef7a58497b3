import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StripeAPI

/// The service API's writes to Stripe for an app user:
///
/// - `POST /v1/checkout-sessions`: `{user, plan [+ interval] | price | lookup_key, quantity,
///   trial_days, allow_promotion_codes, success_url, cancel_url, email, account}` → 201
///   `{id, url, expires_at, customer, price}`.
/// - `POST /v1/portal-sessions`: `{user, return_url, account}` → 201 `{id, url}`.
/// - `POST /v1/users/{user}/subscription/cancel`: `{at_period_end}` (optional, default true),
///   `?account=` → 200, the `GET /v1/users/{user}/subscription` view after the change.
///
/// Each honours an `Idempotency-Key` header (1–255 printable ASCII), forwarded to Stripe scoped
/// by mode, account and user: the same key for the same user answers the same session. Without a Stripe API key every one of them answers 503
/// `stripe_not_configured`.
public struct SessionController: Sendable {
    let actions: BillingActions?
    let scope: ServiceScope
    let users: any UserLedgerStore
    let configuration: UserController.Configuration

    /// - Parameter stripe: nil when billingd has no `STRIPE_API_KEY`.
    public init(store: any LedgerStore, stripe: StripeClient?, configuration: UserController.Configuration) {
        actions = stripe.map { BillingActions(store: store, client: $0, catalog: configuration.catalog, now: configuration.now) }
        scope = configuration.scope
        users = store.users
        self.configuration = configuration
    }

    /// Apple lets only the user cancel an App Store subscription: when one decides the user's
    /// plan, cancel answers 409 `managed_by_app_store` with where the user manages it.
    func refuseAppStoreCancel(_ user: UserRequest) async throws {
        let billing = try await users.billing(of: user.user, in: user.scope, stripeEntitlements: false)
        let resolution = billing.resolve(configuration.catalog, now: Int64(configuration.now().timeIntervalSince1970))
        guard resolution.entitled, resolution.source == .appStore else { return }
        throw APIError(
            .conflict, code: "managed_by_app_store",
            message: "This user's plan comes from an App Store subscription; only the user can cancel it, in their Apple account settings: \(AppStoreController.manageSubscriptionsURL)",
            extra: ["manage_url": AppStoreController.manageSubscriptionsURL])
    }

    static let idempotencyKeyHeader = HTTPField.Name("Idempotency-Key")!

    static let checkoutFields = [
        "user", "plan", "interval", "price", "lookup_key", "quantity", "trial_days", "allow_promotion_codes", "success_url",
        "cancel_url", "email", "account",
    ]
    static let portalFields = ["user", "return_url", "account"]
    static let cancelFields = ["at_period_end"]

    public func addRoutes<Methods: RouterMethods>(to router: Methods) {
        router.post("checkout-sessions") { request, context in
            try await run { actions in
                let input = try await checkoutInput(request)
                let session = try await actions.checkout(input, logger: context.logger)
                return Self.checkoutResponse(session, input: input)
            }
        }
        router.post("portal-sessions") { request, context in
            try await run { actions in
                let input = try await portalInput(request)
                let session = try await actions.portal(input, logger: context.logger)
                var json = JSONBytesWriter(capacity: 256)
                json.beginObject()
                json.field("id", session.id)
                json.field("url", session.url)
                json.endObject()
                return UserJSONResponse.response(json.bytes, status: .created)
            }
        }
        router.post("users/:user/subscription/cancel") { request, context in
            try await refuseAppStoreCancel(try UserRequest(request, context: context, scope: scope))
            return try await run { actions in
                let user = try UserRequest(request, context: context, scope: scope)
                let body = try await SessionRequestBody.read(request, allowed: Self.cancelFields, emptyAllowed: true)
                let input = try CancelInput(
                    user: user.user, scope: user.scope, atPeriodEnd: try body.bool("at_period_end") ?? true,
                    idempotencyKey: request.headers[Self.idempotencyKeyHeader])
                return try await actions.cancel(input, logger: context.logger).response()
            }
        }
    }

    /// Runs a write: 503 without Stripe; a refusal (``APIError``) renders itself, headers and all.
    private func run(_ body: (BillingActions) async throws -> Response) async throws -> Response {
        guard let actions else { throw APIError.stripeNotConfigured }
        return try await body(actions)
    }

    func checkoutInput(_ request: Request) async throws(APIError) -> CheckoutInput {
        let body = try await SessionRequestBody.read(request, allowed: Self.checkoutFields)
        let user = try body.requiredString("user", hint: "give the app's id of the user who buys")
        let given = ["plan", "price", "lookup_key"].filter(body.has)
        guard given.count <= 1 else {
            throw APIError(
                .badRequest, code: "conflicting_fields",
                message: "Give one of plan, price and lookup_key, not \(given.joined(separator: " and ")).")
        }
        let plan: PlanChoice
        switch given.first {
        case "plan"?:
            plan = .tier(try body.requiredString("plan"), interval: try body.string("interval").map(RecurringInterval.init(rawValue:)))
        case "price"?:
            plan = .price(try body.requiredString("price"))
        case "lookup_key"?:
            plan = .lookupKey(try body.requiredString("lookup_key"))
        default:
            throw .missingField("plan", "give plan (a tier id of the plan catalog, with interval month or year), price (price_…) or lookup_key")
        }
        if body.has("interval"), given.first != "plan" {
            throw .invalidField("interval", "no interval with \(given.first ?? "price"): it goes with plan only (a price has its own interval)")
        }
        return try CheckoutInput(
            user: user, scope: try scope(body), plan: plan, quantity: try body.integer("quantity") ?? 1,
            trialDays: try body.integer("trial_days"), allowPromotionCodes: try body.bool("allow_promotion_codes"),
            successURL: try body.requiredString("success_url", hint: "give the absolute http(s) URL Stripe sends the buyer to after paying"),
            cancelURL: try body.requiredString("cancel_url", hint: "give the absolute http(s) URL Stripe sends the buyer to on going back"),
            email: try body.string("email"), idempotencyKey: request.headers[Self.idempotencyKeyHeader])
    }

    func portalInput(_ request: Request) async throws(APIError) -> PortalInput {
        let body = try await SessionRequestBody.read(request, allowed: Self.portalFields)
        return try PortalInput(
            user: try body.requiredString("user", hint: "give the app's id of the user"), scope: try scope(body),
            returnURL: try body.requiredString("return_url", hint: "give the absolute http(s) URL the portal's return link goes to"),
            idempotencyKey: request.headers[Self.idempotencyKeyHeader])
    }

    /// The configured scope, or the same mode for the body's connected `account`.
    private func scope(_ body: SessionRequestBody) throws(APIError) -> ServiceScope {
        guard let account = try body.string("account") else { return scope }
        return scope.account(try CheckoutInput.account(account))
    }

    static func checkoutResponse(_ session: BillingActions.CheckoutSessionResult, input: CheckoutInput) -> Response {
        var json = JSONBytesWriter(capacity: 512)
        json.beginObject()
        json.field("id", session.id)
        json.field("url", session.url)
        json.field("expires_at", session.expiresAt)
        json.field("customer", session.customer)
        json.field("price", session.price)
        json.endObject()
        return UserJSONResponse.response(json.bytes, status: .created)
    }
}
